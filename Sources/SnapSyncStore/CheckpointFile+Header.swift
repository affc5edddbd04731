// Reading a checkpoint without loading its room: what recovery does for a room that stays
// asleep (`StoreOptions.sleepingRooms`). Every record's checksum is still checked, so damage
// refuses the start as before; the snapshot is decoded, and its digest checked, when the room
// is woken (`DurableStore.loadSleeping`).

extension CheckpointFile {
    /// The room, epoch, version and TTL a checkpoint file holds, its layout and every record's
    /// checksum checked, the snapshot not decoded.
    /// - Complexity: O(size of the file): one CRC pass.
    static func decodeHeader(
        _ bytes: [UInt8], path: String
    ) throws(StoreError) -> (room: String, epoch: UInt64, version: UInt64, ttl: (serial: UInt64, seconds: UInt64)?) {
        func corrupt(_ offset: Int, _ reason: String) -> StoreError {
            .corrupt(
                path: path, offset: offset,
                reason: reason + " (checkpoints are written whole and renamed into place, so this is damage, not an unfinished write)")
        }
        guard bytes.count >= magic.count, bytes[0..<magic.count].elementsEqual(magic) else {
            throw corrupt(0, "it does not start with \"SNAPCKP1\"")
        }
        var offset = magic.count
        func nextRecord() throws(StoreError) -> Range<Int> {
            switch RecordFraming.parse(bytes, at: offset, end: bytes.count, maxPayload: Int(UInt32.max)) {
            case .record(let payload, let next):
                offset = next
                return payload
            case .end: throw corrupt(offset, "a record is missing: the file ends early")
            case .damaged(let why): throw corrupt(offset, why)
            }
        }
        let headerRange = try nextRecord()
        let header: (room: String, epoch: UInt64, version: UInt64, historyCount: UInt64)
        do throws(FieldReader.Failure) {
            header = try bytes.withUnsafeBufferPointer { (p) throws(FieldReader.Failure) -> (String, UInt64, UInt64, UInt64) in
                var r = FieldReader(p, from: headerRange.lowerBound, to: headerRange.upperBound)
                guard try r.u8("kind") == PayloadKind.checkpointHeader.rawValue else {
                    throw FieldReader.Failure(what: "the first record is not a checkpoint header")
                }
                let room = try r.string("room")
                let epoch = try r.varint("epoch")
                let version = try r.varint("version")
                _ = try r.raw(32, "digest")
                let historyCount = try r.varint("history_count")
                guard r.isAtEnd else { throw FieldReader.Failure(what: "bytes left after the header's fields") }
                guard historyCount <= version else {
                    throw FieldReader.Failure(what: "history_count \(historyCount) is more than the version \(version) (no write makes version 0)")
                }
                return (room, epoch, version, historyCount)
            }
        } catch {
            throw corrupt(magic.count, "checkpoint header: \(error.what)")
        }
        // The snapshot and the history records: checksums only.
        for _ in 0...header.historyCount { _ = try nextRecord() }
        // The optional TTL record, as `decode` reads it.
        var ttl: (serial: UInt64, seconds: UInt64)?
        if offset < bytes.count {
            let start = offset
            switch ttlRecord(bytes, range: try nextRecord(), room: header.room, epoch: header.epoch) {
            case .success(let found): ttl = found
            case .failure(let why): throw corrupt(start, why.reason)
            }
        }
        guard offset == bytes.count else {
            throw corrupt(offset, "\(bytes.count - offset) bytes follow the last record")
        }
        return (header.room, header.epoch, header.version, ttl)
    }
}
