import SnapSyncModel
import SnapSyncWire

/// Frame and message decoding, as a peer does it: bytes arrive in chunks and `nextMessage()` is
/// called until it returns nil.
///
/// Input: byte 0 chooses the decoder (bits 0–1: accepting client, server or either in protocol
/// version 2's layouts, or (3) either in the current version's, with the chain fields, VERIFY and
/// DIGEST of version 3 and the presence messages of version 4;
/// bit 2: tight limits; bits 3–7: chunk size 1–32); the rest is the byte stream. Laws:
/// - nil consumes nothing; a frame-level error consumes nothing and repeats; any other error
///   consumes exactly its frame, and the one-shot `decode(frame:)` agrees with the stream decoder
///   on every frame, message or error;
/// - a decoded message is one the decoder accepts from that side, and re-encodes to its frame's
///   bytes (the encoding is canonical, so decode is injective);
/// - REPLACE/SNAPSHOT snapshots keep their invariants; MUTATE/DIFF ops applied to the last
///   decoded snapshot either apply (invariants hold) or change nothing;
/// - bytes left at the end are an incomplete frame: `decode(frame:)` calls them malformed.
enum WireTarget {
    /// The limits of Protocol/vectors/limits.json, whose frames sit on their boundaries.
    static let tight = WireLimits(
        maxFrameBytes: 128,
        model: SnapshotLimits(
            maxIdentifierBytes: 8, maxPayloadBytes: 16,
            maxItems: 4, maxSections: 2, maxSnapshotBytes: 40))

    static func run(_ input: [UInt8]) throws(LawViolation) {
        guard let control = input.first else { return }
        let stream = Array(input.dropFirst())
        let accepting: Sender = [.client, .server, .either, .either][Int(control & 3)]
        let version = control & 3 == 3 ? ProtocolVersion.current : ProtocolVersion.unchained
        let limits = control & 4 != 0 ? tight : .default
        let chunk = Int(control >> 3) + 1
        var decoder = FrameDecoder(limits: limits, accepting: accepting)
        decoder.version = version
        var room = RoomSnapshot()
        var appended = 0
        var consumed = 0
        while true {
            while true {
                let before = decoder.bufferedByteCount
                let result = Result { () throws(WireError) -> Message? in try decoder.nextMessage() }
                let frameEnd = appended - decoder.bufferedByteCount
                let frame = Array(stream[consumed..<frameEnd])
                consumed = frameEnd
                switch result {
                case .success(.none):
                    try law(frame.isEmpty, "nextMessage() returned nil but consumed \(frame.count) bytes")
                case .success(.some(let message)):
                    try check(message, frame: frame, limits: limits, accepting: accepting, version: version, room: &room)
                    continue
                case .failure(let error):
                    try law(!error.detail.isEmpty, "\(error.code.name) without a detail")
                    if frame.isEmpty {
                        // Frame-level: the stream cannot be resynchronised, and the error repeats.
                        try law(
                            error.code == .malformedFrame || error.code == .frameTooLarge,
                            "an error that consumed nothing is \(error.code.name), not a frame-level one")
                        let again = Result { () throws(WireError) -> Message? in try decoder.nextMessage() }
                        try law(
                            again == .failure(error) && decoder.bufferedByteCount == before,
                            "a frame-level error did not repeat unchanged: \(again)")
                        return
                    }
                    try law(frame.count >= 5, "an error consumed \(frame.count) bytes, less than a frame")
                    let once = Result { () throws(WireError) -> Message in
                        try FrameDecoder.decode(frame: frame, limits: limits, accepting: accepting, version: version)
                    }
                    try law(once == .failure(error), "decode(frame:) gives \(once), the stream decoder \(error)")
                    if let requestID = error.requestID {
                        try law(
                            (20...32).contains(error.code.rawValue),
                            "request \(requestID) carries \(error.code.name), not a content error")
                    }
                    continue
                }
                break
            }
            if appended == stream.count { break }
            let n = min(chunk, stream.count - appended)
            decoder.append(stream[appended..<appended + n])
            appended += n
        }
        if consumed < stream.count {
            let rest = Array(stream[consumed...])
            let once = Result { () throws(WireError) -> Message in
                try FrameDecoder.decode(frame: rest, limits: limits, accepting: accepting, version: version)
            }
            guard case .failure(let error) = once, error.code == .malformedFrame else {
                throw LawViolation(description: "\(rest.count) bytes the stream decoder holds as incomplete decode whole: \(once)")
            }
        }
    }

    static func check(
        _ message: Message, frame: [UInt8], limits: WireLimits, accepting: Sender, version: UInt64,
        room: inout RoomSnapshot
    ) throws(LawViolation) {
        let sender = message.type.sentBy
        try law(
            accepting == .either || sender == .either || sender == accepting,
            "a decoder accepting \(accepting) decoded \(message.type.name)")
        let encoded = FrameEncoder().encode(message)
        try law(encoded == frame, "\(message.type.name) re-encodes to \(encoded.count) bytes that differ from its \(frame.count)-byte frame")
        let once = Result { () throws(WireError) -> Message in
            try FrameDecoder.decode(frame: frame, limits: limits, accepting: accepting, version: version)
        }
        try law(once == .success(message), "decode(frame:) gives \(once) for a frame the stream decoded")
        switch message {
        case .replace(_, _, _, _, let snapshot), .snapshot(_, _, _, _, _, _, let snapshot, _):
            try invariants(snapshot, "\(message.type.name).snapshot")
            var canonical: [UInt8] = []
            FrameEncoder.encodeSnapshot(snapshot, into: &canonical)
            try law(
                canonical.count == snapshot.canonicalByteCount, "canonicalByteCount is \(snapshot.canonicalByteCount), the encoding \(canonical.count) bytes")
            try law(
                canonical.count <= limits.model.maxSnapshotBytes,
                "a \(canonical.count)-byte snapshot passed max_snapshot_bytes \(limits.model.maxSnapshotBytes)")
            room = snapshot
        case .mutate(_, _, _, _, let ops):
            try applyAtomically(ops, to: &room, limits: limits.model)
        case .diff(let name, let epoch, let diffVersion, let ops, let chain):
            var diff: [UInt8] = []
            FrameEncoder().encodeDiff(room: name, epoch: epoch, version: diffVersion, ops: ops, into: &diff)
            // Version 3's frame is that frame with the chain after it (PROTOCOL.md §9).
            var unchained = frame
            if let chain {
                try law(Array(frame.suffix(RoomChain.byteCount)) == chain.bytes, "a DIFF's chain is not its last 32 bytes")
                unchained = Array(frame.dropLast(RoomChain.byteCount))
                let length = UInt32(unchained.count - 4)
                unchained.replaceSubrange(0..<4, with: withUnsafeBytes(of: length.bigEndian, Array.init))
            }
            try law((chain != nil) == ProtocolVersion.hasChain(version: version), "a DIFF's chain does not match its version")
            try law(diff == unchained, "encodeDiff differs from the DIFF frame it was decoded from")
            try applyAtomically(ops, to: &room, limits: limits.model)
        default:
            break
        }
    }

    /// A batch either applies whole (and the snapshot stays valid) or leaves it as it was.
    static func applyAtomically(_ ops: [SnapshotOperation], to room: inout RoomSnapshot, limits: SnapshotLimits) throws(LawViolation) {
        let before = room
        do throws(BatchError) {
            try room.apply(ops, limits: limits)
        } catch {
            try law(room == before, "a refused batch (\(error)) changed the snapshot")
            return
        }
        try invariants(room, "the snapshot after a batch")
        try law(room.canonicalByteCount <= limits.maxSnapshotBytes, "a batch grew the snapshot past max_snapshot_bytes")
    }

    static func invariants(_ snapshot: RoomSnapshot, _ what: String) throws(LawViolation) {
        do { try snapshot.checkInvariants() } catch {
            throw LawViolation(description: "\(what) breaks an invariant: \(error)")
        }
    }
}
