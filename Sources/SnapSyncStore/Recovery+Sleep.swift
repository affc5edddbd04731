internal import SnapSyncModel
import SnapSyncWire

#if canImport(Glibc)
    internal import Glibc
#endif

// Recovery with sleeping rooms (`StoreOptions.sleepingRooms`): each checkpoint is read and
// checksummed, but only its header is decoded, and its room is left asleep (24 bytes in
// `asleep`). A room the log writes after its checkpoint is loaded whole when replay reaches
// its first such record, and comes back resident with its log tail applied. So a start holds
// in memory the rooms written since their last checkpoint, not every room on disk; the others
// are woken by their next JOIN or write (`DurableStore.loadSleeping`), which is also where
// their snapshot's digest and the content limits are checked.

extension Recovery {
    /// One checkpoint file, its room left asleep; of two checkpoints of one room the newer wins.
    mutating func loadAsleep(
        _ bytes: [UInt8], name: String, sequence: UInt64, path: String,
        superseded: inout [(name: String, sequence: UInt64)]
    ) throws(StoreError) {
        let header = try CheckpointFile.decodeHeader(bytes, path: path)
        let key = RoomName(header.room)
        if let existing = asleep[key] {
            if existing.epoch == header.epoch && existing.version > header.version {
                superseded.append((name: name, sequence: sequence))
                return
            }
            superseded.append((name: CheckpointFile.fileName(existing.checkpoint), sequence: existing.checkpoint))
            checkpointsLoaded -= 1
        }
        asleep[key] = SleepingRoom(epoch: header.epoch, version: header.version, checkpoint: sequence)
        asleepTTLs[key] = header.ttl
        checkpointsLoaded += 1
        progress?(RecoveryProgress(checkpointsLoaded: checkpointsLoaded, recordsReplayed: recordsReplayed))
    }

    /// Before a logged write is replayed: true when its room is asleep and its checkpoint
    /// already holds it (skip it). When the write is newer, the room is loaded from its
    /// checkpoint into `rooms` (it stays resident), and replay goes on as for any room.
    mutating func wakeForReplay(_ write: WriteRecord) throws(StoreError) -> Bool {
        let key = RoomName(write.room)
        guard let sleeper = asleep[key] else { return false }
        if write.epoch == sleeper.epoch && write.version <= sleeper.version { return true }
        try wakeAsleep(key, sleeper)
        return false
    }

    /// Loads the asleep room `key` whole from its checkpoint into `rooms`, for a log record
    /// that follows its checkpoint (a write, or a TTL record).
    mutating func wakeAsleep(_ key: RoomName, _ sleeper: SleepingRoom) throws(StoreError) {
        let name = CheckpointFile.fileName(sleeper.checkpoint)
        let path = directory + "/" + name
        let file = try PosixFile(path: path, flags: O_RDONLY)
        let bytes = try file.readAll()
        file.close()
        let checkpoint = try CheckpointFile.decode(bytes, path: path)
        asleep[key] = nil
        asleepTTLs[key] = nil
        rooms[key] = RoomState(
            epoch: checkpoint.epoch, version: checkpoint.version, snapshot: checkpoint.snapshot,
            history: checkpoint.history, checkpointFile: name, checkpointVersion: checkpoint.version,
            pinnedSegment: nil, ttlSeconds: checkpoint.ttl?.seconds, ttlSerial: checkpoint.ttl?.serial ?? 0,
            chain: HistoryChain.beforeHistory(of: checkpoint), base: resumeBase(of: checkpoint))
    }
}
