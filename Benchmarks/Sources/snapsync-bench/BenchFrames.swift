// The SnapSync frames snapsync-bench sends, all made by Wire's FrameEncoder, and the templates the
// measured loops patch instead of encoding: a MUTATE whose payload is the last field of its
// frame, so the loop overwrites payload bytes in place and never touches a length or a varint.
//
// The fan-out and durability load: one item, id "i", in one section "s", is overwritten with
// update_items(reload) on every write, so the room stays one item whatever the run length
// (append_items would grow it without bound). The payload is [send time, CLOCK_MONOTONIC ns,
// u64 host order][sequence number, u64][filler up to the payload size].
import SnapSyncModel
import SnapSyncWire

enum BenchFrames {
    static let encoder = FrameEncoder()
    static let section: SnapshotIdentifier = "s"
    static let item: SnapshotIdentifier = "i"

    /// HELLO for `version`: by default 2, whose DIFF ends with the payload the measured loops
    /// read in place; version 3 appends the room's chain after it (PROTOCOL.md §11.13), which
    /// the fan-out loop skips (`fanout --protocol-version 3`).
    static func hello(clientName: String = "snapsync-bench", version: UInt64 = ProtocolVersion.unchained) -> [UInt8] {
        encoder.encode(.hello(versions: [version], clientName: clientName, credentials: []))
    }

    static func join(requestID: UInt64, room: String) -> [UInt8] {
        encoder.encode(.join(requestID: requestID, room: room, resume: nil))
    }

    static func mutate(requestID: UInt64, room: String, ops: [SnapshotOperation]) -> [UInt8] {
        encoder.encode(.mutate(requestID: requestID, room: room, expectedVersion: nil, writeID: [], ops: ops))
    }

    /// The benchmark's layout: section "s" holding item "i" with `payload`.
    static func createLayout(requestID: UInt64, room: String, payload: [UInt8]) -> [UInt8] {
        mutate(
            requestID: requestID, room: room,
            ops: [.appendSections([SnapshotElement(section)]), .appendItems([SnapshotElement(item, payload: SnapshotPayload(payload))], toSection: section)])
    }

    /// The one operation of every measured write: item "i" gets `payload`.
    static func overwrite(_ payload: [UInt8]) -> [SnapshotOperation] {
        [.updateItems([SnapshotElement(item, payload: SnapshotPayload(payload))], .reload)]
    }

    /// A MUTATE overwriting item "i" with a `payloadBytes`-byte payload, ready to be copied and
    /// patched: the payload is the frame's last `payloadBytes` bytes (update_items' last field).
    /// Request ids are echoed, never interpreted, by the server (PROTOCOL.md §3), so every copy
    /// keeps `requestID`.
    static func overwriteTemplate(requestID: UInt64, room: String, payloadBytes: Int, fill: UInt8) -> [UInt8] {
        let payload = [UInt8](repeating: fill, count: payloadBytes)
        let frame = mutate(requestID: requestID, room: room, ops: overwrite(payload))
        precondition(frame.suffix(payloadBytes).elementsEqual(payload), "the MUTATE's payload is not its last field")
        return frame
    }

    /// The bytes of the DIFF a subscriber receives for one overwrite, between the version (the
    /// last field that changes from DIFF to DIFF) and the payload, which ends the frame: a
    /// receiver that finds them at `frame.count - payloadBytes - suffix.count` has the
    /// benchmark's DIFF without decoding it. Found by encoding the DIFF with and without its
    /// operations: they share everything up to the operation count.
    static func diffOpsPrefix(room: String, payloadBytes: Int) -> [UInt8] {
        let payload = [UInt8](repeating: 0, count: payloadBytes)
        let full = encoder.encode(.diff(room: room, epoch: 1, version: 1, ops: overwrite(payload)))
        let empty = encoder.encode(.diff(room: room, epoch: 1, version: 1, ops: []))
        // `empty` ends with the operation count 0, one byte; `full` has its count there.
        return Array(full[(empty.count - 1)..<(full.count - payloadBytes)])
    }

    /// `cluster`'s write: `overwriteTemplate` with a request id and a write id of fixed width,
    /// so that every copy is patched in place. The request id is a 9-byte varint (a value in
    /// [2^56, 2^63): LEB128's minimal encoding of every such value is 9 bytes), the write id 16
    /// bytes. Returns the frame and the offsets of the request id and the write id in it.
    static func identifiedOverwriteTemplate(room: String, payloadBytes: Int) -> (frame: [UInt8], requestIDOffset: Int, writeIDOffset: Int) {
        let payload = [UInt8](repeating: UInt8(ascii: "x"), count: payloadBytes)
        let marker = [UInt8](repeating: 0xA5, count: writeIDBytes)
        let frame = encoder.encode(
            .mutate(requestID: identifiedRequestBase, room: room, expectedVersion: nil, writeID: marker, ops: overwrite(payload)))
        precondition(frame.suffix(payloadBytes).elementsEqual(payload), "the MUTATE's payload is not its last field")
        // length prefix (4), type (1), then the request id.
        precondition(frame[5..<14].elementsEqual(varint(identifiedRequestBase)), "the MUTATE's request id is not its first field")
        let header = frame.prefix(frame.count - payloadBytes)
        guard let writeIDOffset = (0...(header.count - writeIDBytes)).first(where: { header[$0..<($0 + writeIDBytes)].elementsEqual(marker) })
        else { preconditionFailure("the MUTATE's write id is not in its frame") }
        return (frame, 5, writeIDOffset)
    }

    static let writeIDBytes = 16
    /// The smallest request id of `identifiedOverwriteTemplate`: sequence numbers are added to it.
    static let identifiedRequestBase: UInt64 = 1 << 56

    /// Writes `identifiedRequestBase + sequence` as the 9-byte varint at `p` (sequence < 2^56).
    @inline(__always)
    static func patchRequestID(_ p: UnsafeMutablePointer<UInt8>, sequence: UInt64) {
        let value = identifiedRequestBase | sequence
        for i in 0..<8 { p[i] = UInt8(truncatingIfNeeded: value >> UInt64(7 * i)) & 0x7F | 0x80 }
        p[8] = UInt8(truncatingIfNeeded: value >> 56)
    }

    /// LEB128, as Wire writes it (for the template checks).
    static func varint(_ value: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
        return bytes
    }

    /// "ERROR code: message" / "REJECT code: message" for a failure, else nil.
    static func describeFailure(_ message: Message) -> String? {
        switch message {
        case .error(let code, let text): "ERROR \(code): \(text)"
        case .reject(_, let code, _, _, let text): "REJECT \(code): \(text)"
        default: nil
        }
    }
}
