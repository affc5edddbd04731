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
        var reader = try CheckpointReader(bytes, path: path)
        let header = try reader.header()
        // The snapshot and the history records: checksums only.
        for _ in 0...header.historyCount { _ = try reader.nextRecord() }
        let ttl = try reader.ttl(room: header.room, epoch: header.epoch)
        // The resume base: its checksum only.
        _ = try reader.optionalRecord(kind: PayloadKind.resumeBase.rawValue)
        try reader.end()
        return (header.room, header.epoch, header.version, ttl)
    }
}
