import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncStore

/// Log segments as recovery reads them: `LogSegment.checkHeader`, then `RecordFraming.parse`
/// record by record from byte 24, each payload through `WriteRecord(payload:range:)` (or, for a
/// tombstone or a TTL, `LifecycleRecord(payload:range:)`), its DIFF
/// frame through `FrameDecoder` (accepting the server's messages, no limits) and its ops applied
/// to the room, in version order. Damage is followed by `RecordFraming.nextGoodRecord`.
///
/// Input: a segment file; it is run as it is and with its checksums repaired. Laws: a record's
/// payload lies inside the file right after its header; `.end` is twelve zero bytes or nothing;
/// a good record found after damage parses as one; a decoded payload re-encodes to its bytes;
/// replayed batches keep the room's invariants or change nothing.
enum LogTarget {
    /// Recovery reads records up to this size whatever the options (half of 4 GiB).
    static let maxPayload = Int(UInt32.max) >> 1

    /// What recovery allows a logged DIFF: anything the format can hold.
    static let permissive = WireLimits(maxFrameBytes: Int(UInt32.max), model: .unlimited)

    static func run(_ input: [UInt8]) throws(LawViolation) {
        try replay(input)
        var repaired = input
        ChecksumRepair.segment(&repaired)
        if repaired != input { try replay(repaired) }
    }

    struct Room {
        var epoch: UInt64
        var version: UInt64
        var snapshot = RoomSnapshot()
    }

    static func replay(_ bytes: [UInt8]) throws(LawViolation) {
        guard bytes.count >= LogSegment.headerSize else {
            try law(LogSegment.checkHeader(bytes, sequence: 0) != nil, "a \(bytes.count)-byte file passed the header check")
            return
        }
        let sequence = bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        if LogSegment.checkHeader(bytes, sequence: sequence) == nil {
            try law(LogSegment.checkHeader(bytes, sequence: sequence &+ 1) != nil, "segment \(sequence)'s header also passes as segment \(sequence &+ 1)")
        }
        var rooms: [String: Room] = [:]
        var offset = LogSegment.headerSize
        while true {
            switch RecordFraming.parse(bytes, at: offset, end: bytes.count, maxPayload: maxPayload) {
            case .record(let payload, let next):
                try law(
                    payload.lowerBound == offset + RecordFraming.headerSize && payload.count >= 1
                        && next == payload.upperBound && next <= bytes.count,
                    "record at \(offset): payload \(payload), next \(next) in \(bytes.count) bytes")
                try record(bytes, payload, rooms: &rooms)
                offset = next
            case .end:
                try law(
                    bytes[offset..<min(offset + RecordFraming.headerSize, bytes.count)].allSatisfy { $0 == 0 },
                    "the end of the data at \(offset) is not zeros")
                return
            case .damaged(let why):
                try law(!why.isEmpty, "damage at \(offset) without a reason")
                if let good = RecordFraming.nextGoodRecord(bytes, after: offset, end: bytes.count, maxPayload: maxPayload) {
                    guard good > offset,
                        case .record = RecordFraming.parse(bytes, at: good, end: bytes.count, maxPayload: maxPayload)
                    else {
                        throw LawViolation(description: "nextGoodRecord after \(offset) gave \(good), which is not a record")
                    }
                }
                return
            }
        }
    }

    static func record(_ bytes: [UInt8], _ payload: Range<Int>, rooms: inout [String: Room]) throws(LawViolation) {
        switch LifecycleRecord.kind(of: bytes, payload: payload) {
        case .tombstone, .ttl:
            let lifecycle: LifecycleRecord
            do { lifecycle = try LifecycleRecord(payload: bytes, range: payload) } catch {
                try law(!error.what.isEmpty, "a refused record without a reason")
                return
            }
            var encoded: [UInt8] = []
            lifecycle.encodePayload(into: &encoded)
            try law(encoded[...] == bytes[payload], "a \(payload.count)-byte lifecycle record re-encodes to \(encoded.count) other bytes")
            if case .tombstone(let room, let epoch, _) = lifecycle, rooms[room]?.epoch == epoch { rooms[room] = nil }
            return
        default:
            break
        }
        let write: WriteRecord
        do { write = try WriteRecord(payload: bytes, range: payload) } catch {
            try law(!error.what.isEmpty, "a refused record without a reason")
            return
        }
        var encoded: [UInt8] = []
        write.encodePayload(into: &encoded)
        try law(encoded[...] == bytes[payload], "a \(payload.count)-byte record payload re-encodes to \(encoded.count) other bytes")
        try law(write.writeID.count <= 32, "a write_id of \(write.writeID.count) bytes was accepted")
        let decoded = Result { () throws(WireError) -> Message in
            try FrameDecoder.decode(frame: write.diffFrame, limits: permissive, accepting: .server)
        }
        guard case .success(.diff(let name, let epoch, let version, let ops, _)) = decoded,
            name == write.room, epoch == write.epoch, version == write.version
        else { return }
        var room = rooms[name] ?? Room(epoch: epoch, version: 0)
        guard room.epoch == epoch, version > room.version, version == room.version + 1 else { return }
        try WireTarget.applyAtomically(ops, to: &room.snapshot, limits: .unlimited)
        room.version = version
        rooms[name] = room
    }
}
