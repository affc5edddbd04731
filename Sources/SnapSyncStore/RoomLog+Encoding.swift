// A room log record's bytes (Protocol/CLUSTER.md, "Records"): the store's own payloads
// (docs/persistence.md), so that a node's log and the local write-ahead log share one record
// shape: a write is kind 0x01 or 0x06 (`WriteRecord.encodePayload`), a tombstone kind 0x04
// (`LifecycleRecord.tombstone`).

extension RoomLogEntry {
    /// The record's payload. `room` is the subject's room (a tombstone's payload names it; a
    /// write's names its own).
    /// - Complexity: O(size of the DIFF frame), one copy.
    package func encode(room: String) -> [UInt8] {
        var out: [UInt8] = []
        switch self {
        case .write(let record):
            out.reserveCapacity(WriteRecord.payloadSizeUpperBound(room: record.room, writeID: record.writeID, frameCount: record.diffFrame.count))
            record.encodePayload(into: &out)
        case .tombstone(let epoch, let version):
            LifecycleRecord.tombstone(room: room, epoch: epoch, version: version).encodePayload(into: &out)
        }
        return out
    }

    /// Decodes a record's payload: a write (kind 0x01 or 0x06) or a tombstone (kind 0x04); anything else,
    /// or a damaged payload, is `.corrupt` naming the field.
    package init(payload: [UInt8]) throws(StoreError) {
        let range = 0..<payload.count
        do throws(FieldReader.Failure) {
            switch LifecycleRecord.kind(of: payload, payload: range) {
            case .write, .writeWithFingerprint:
                self = .write(try WriteRecord(payload: payload, range: range))
            case .tombstone:
                guard case .tombstone(_, let epoch, let version) = try LifecycleRecord(payload: payload, range: range) else {
                    throw FieldReader.Failure(what: "a tombstone that is not one")
                }
                self = .tombstone(epoch: epoch, version: version)
            default:
                throw FieldReader.Failure(what: "record kind \(payload.first.map(String.init) ?? "none") is not a write (1 or 6) or a tombstone (4)")
            }
        } catch {
            throw StoreError.corrupt(path: "room log record", offset: 0, reason: error.what)
        }
    }
}
