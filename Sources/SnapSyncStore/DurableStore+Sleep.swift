internal import Logging
import SnapSyncWire

#if canImport(Glibc)
    internal import Glibc
#endif

// Sleeping rooms (#17, `SleepingRoomStore`): a room evicted from the daemon's memory lives in
// its checkpoint file alone. Its checkpoint is made current at eviction, so nothing of it is
// left in the log to replay: waking it reads one file. What the store keeps of it is
// `SleepingRoom` (24 bytes) under its name, in place of a `RoomTrack` (72 bytes and the write
// ids of its history, up to 2 × historyLimit arrays).

extension DurableStore: SleepingRoomStore {
    package var sleepingRoomCount: Int { sleep.rooms.count }

    package func isAsleep(_ room: String) -> Bool { sleep.rooms[RoomName(room)] != nil }

    /// Puts `image`'s room to sleep: writes its checkpoint unless the one it has already holds
    /// `image.version` (a room woken and only read), then keeps only `SleepingRoom`. The image
    /// must hold every write appended for the room (the daemon's room as it is).
    ///
    /// The checkpoint file is fsynced and renamed, but neither the directory nor a MANIFEST is
    /// synced here: `commitEvictions()` does both once per batch. Until then a crash leaves the
    /// room recoverable either way: the new file, unlisted and numbered past the MANIFEST's
    /// `next_checkpoint`, is taken in, or (if its rename was lost) the previous checkpoint plus
    /// the log, which is not deleted before a MANIFEST (and its directory fsync) lists the new one.
    ///
    /// - Returns: false when the disk is full (logged): the room must stay in memory.
    /// - Throws: fatal errors only.
    /// - Complexity: O(size of the room) and one fsync when a checkpoint is written, else O(1).
    package func evict(_ image: RoomImage) throws(StoreError) -> Bool {
        let key = RoomName(image.room)
        if sleep.rooms[key] != nil { return true }
        let current = rooms[key].map { track in
            track.checkpointFile != nil && track.pinnedSegment == nil && track.epoch == image.epoch
                && track.version == image.version && track.checkpointVersion == image.version
        }
        if current != true {
            do {
                let (_, replaced) = try writeCheckpoint(image, syncDirectory: false)
                if let replaced { checkpointsToRemove.append(replaced) }
                sleep.unlisted = true
            } catch {
                guard case .noSpace = error else { throw error }
                logger.warning("store: no space to checkpoint room \(image.room) for eviction: \(error); it stays in memory")
                return false
            }
        }
        guard let track = rooms.removeValue(forKey: key), let file = track.checkpointFile,
            let sequence = CheckpointFile.sequence(ofFileName: file)
        else {
            // writeCheckpoint always leaves a track with a checkpoint file.
            preconditionFailure("store: room \(image.room) has no checkpoint after eviction")
        }
        sleep.rooms[key] = SleepingRoom(epoch: track.epoch, version: track.version, checkpoint: sequence)
        return true
    }

    /// Lists the checkpoints `evict` wrote since the last call in one MANIFEST (which also
    /// fsyncs the directory their renames are in), then unlinks the checkpoints they replaced.
    /// A full disk leaves it for the next call (logged).
    /// - Complexity: O(rooms on disk), one small file written whole, when something was evicted.
    package func commitEvictions() throws(StoreError) {
        guard sleep.unlisted else { return }
        try commitCheckpoints(replacing: [])
        if checkpointsToRemove.isEmpty { sleep.unlisted = false }
    }

    /// The sleeping room `room` as its checkpoint holds it, or nil when it is not asleep.
    /// Nothing changes until `markAwake(_:)`.
    /// - Throws: an unreadable or damaged checkpoint (`.io`, `.corrupt`), or one that does not
    ///   hold the room at the position it went to sleep at (`.inconsistent`). The room stays
    ///   asleep; the daemon refuses the request.
    /// - Complexity: one read of the checkpoint file; O(size of the room) to decode it and check
    ///   its digest.
    package func loadSleeping(_ room: String) throws(StoreError) -> RecoveredRoom? {
        guard let sleeper = sleep.rooms[RoomName(room)] else { return nil }
        let path = path(CheckpointFile.fileName(sleeper.checkpoint))
        let file = try PosixFile(path: path, flags: O_RDONLY)
        let bytes: [UInt8]
        do {
            bytes = try file.readAll()
        } catch {
            file.close()
            throw error
        }
        file.close()
        let checkpoint = try CheckpointFile.decode(bytes, path: path)
        guard checkpoint.room == room, checkpoint.epoch == sleeper.epoch, checkpoint.version == sleeper.version else {
            throw StoreError.inconsistent(
                path: path,
                reason:
                    "holds room \(checkpoint.room) at \(checkpoint.epoch)/\(checkpoint.version), but room \(room) went to sleep at \(sleeper.epoch)/\(sleeper.version) in it"
            )
        }
        return RecoveredRoom(
            name: room, epoch: checkpoint.epoch, version: checkpoint.version, snapshot: checkpoint.snapshot,
            history: Array(checkpoint.history.suffix(options.historyLimit)))
    }

    /// Tracks `room` (from `loadSleeping`) as a resident room again: its checkpoint holds it
    /// whole, and the write ids of its history go into the next checkpoint.
    package func markAwake(_ room: RecoveredRoom) {
        let key = RoomName(room.name)
        guard let sleeper = sleep.rooms.removeValue(forKey: key) else { return }
        rooms[key] = RoomTrack(
            epoch: sleeper.epoch, version: sleeper.version, checkpointVersion: sleeper.version,
            checkpointFile: CheckpointFile.fileName(sleeper.checkpoint), pinnedSegment: nil,
            writeIds: room.history.map { ($0.version, $0.writeId) })
    }

    /// The sequence numbers of the sleeping rooms' checkpoints, for the MANIFEST.
    var sleepingCheckpoints: some Sequence<UInt64> { sleep.rooms.values.lazy.map(\.checkpoint) }
}
