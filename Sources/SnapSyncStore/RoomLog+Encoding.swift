internal import SnapSyncWire

// The bytes of a room log record (`RoomLogEntry`) are the store's payload encodings
// (docs/persistence.md): a write is a `WriteRecord` payload (kind 0x01), a DROP a tombstone
// payload (kind 0x04), so a node's log and the local WAL share one record shape.

extension RoomLogEntry {
    /// The record's payload: kind 0x01 `WriteRecord` or kind 0x04 tombstone. A tombstone's room
    /// field is empty: on the log the room is the subject's.
    /// - Complexity: O(size of the DIFF frame), one copy.
    package func encode() -> [UInt8] {
        var out: [UInt8] = []
        switch self {
        case .write(let record):
            out.reserveCapacity(
                WriteRecord.payloadSizeUpperBound(room: record.room, writeId: record.writeId, frameCount: record.diffFrame.count))
            record.encodePayload(into: &out)
        case .tombstone(let epoch, let version):
            LifecycleRecord.tombstone(room: "", epoch: epoch, version: version).encodePayload(into: &out)
        }
        return out
    }

    /// Decodes a record's payload (`encode()`'s bytes; a tombstone's room field is ignored).
    /// - Throws: `StoreError.corrupt` (path "room log record") naming the field that is wrong,
    ///   for any other kind (a TTL record included: cluster mode logs none) or a damaged field.
    package init(payload: [UInt8]) throws(StoreError) {
        do throws(FieldReader.Failure) {
            switch LifecycleRecord.kind(of: payload, payload: 0..<payload.count) {
            case .write:
                self = .write(try WriteRecord(payload: payload, range: 0..<payload.count))
            case .tombstone:
                guard case .tombstone(_, let epoch, let version) = try LifecycleRecord(payload: payload, range: 0..<payload.count) else {
                    throw FieldReader.Failure(what: "kind 0x04 is not a tombstone")
                }
                self = .tombstone(epoch: epoch, version: version)
            case let kind:
                let shown = kind.map { "\($0.rawValue)" } ?? (payload.isEmpty ? "none (empty payload)" : "\(payload[0])")
                throw FieldReader.Failure(what: "record kind \(shown) is not a write (1) or a tombstone (4)")
            }
        } catch {
            throw StoreError.corrupt(path: "room log record", offset: 0, reason: error.what)
        }
    }
}
