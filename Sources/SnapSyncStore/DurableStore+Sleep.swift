internal import Logging
import SnapSyncWire

#if canImport(Glibc)
    internal import Glibc
#endif

// Sleeping rooms (`SleepingRoomStore`): a room evicted from the daemon's memory lives in
// its checkpoint file alone. Its checkpoint is made current at eviction, so nothing of it is
// left in the log to replay: waking it reads one file. What the store keeps of it is
// `SleepingRoom` (24 bytes) under its name, in place of a `RoomTrack` (72 bytes and the write
// ids of its history, up to 2 × historyLimit arrays).

extension DurableStore: SleepingRoomStore {
    package var sleepingRoomCount: Int { sleep.rooms.count }

    package func isAsleep(_ room: String) -> Bool { sleep.rooms[RoomName(room)] != nil }

    package func forEachSleepingRoom(_ body: (String, UInt64?) -> Void) {
        for name in sleep.rooms.keys { body(name.string, sleep.ttls[name]?.seconds) }
    }

    /// Puts rooms to sleep, in the order of `images`: for each, unless its checkpoint already
    /// holds `image.version` (a room woken and only read), a new checkpoint file, then the room
    /// is kept as `SleepingRoom` only. Each image must hold every write appended for its room
    /// (the daemon's room as it is).
    ///
    /// The files are written as a batch (`writeCheckpointBatch`: one syncfs for all, renamed
    /// into place, one directory fsync). The MANIFEST that lists them is left to
    /// `commitEvictions()`, once per tick: until then each new file is one recovery takes in
    /// (unlisted, numbered past the MANIFEST's `next_checkpoint`), the replaced checkpoints stay
    /// until a MANIFEST no longer lists them, and the log is not deleted before a MANIFEST
    /// lists the new ones.
    ///
    /// - Parameter budget: no new file is written once this long has passed on `batchClock`
    ///   since the call (at least one room is); nil: no time bound.
    /// - Returns: how many of `images`, from the first, are asleep; fewer than given when the
    ///   budget was spent or the disk is full (logged): the others must stay in memory.
    /// - Throws: fatal errors only.
    /// - Complexity: O(size of the rooms written) and one syncfs when a checkpoint is written.
    package func evict(_ images: some Sequence<RoomImage>, within budget: Duration?) throws(StoreError) -> Int {
        let batch = try writeCheckpointBatch(images, within: budget, maxBytes: .max, purpose: "for eviction") {
            image in
            let key = RoomName(image.room)
            let current = rooms[key].map { track in
                track.checkpointFile != nil && track.pinnedSegment == nil && track.epoch == image.epoch
                    && track.version == image.version && track.checkpointVersion == image.version
            }
            return sleep.rooms[key] != nil || current == true
        }
        for staged in batch {
            let key = RoomName(staged.image.room)
            if let file = staged.file {
                if let replaced = installCheckpoint(staged.image, file: file, bytes: staged.bytes) { checkpointsToRemove.append(replaced) }
                sleep.unlisted = true
            }
            guard let track = rooms.removeValue(forKey: key) else { continue }  // asleep already
            guard let checkpoint = track.checkpointFile.flatMap(CheckpointFile.sequence(ofFileName:)) else {
                preconditionFailure("store: room \(staged.image.room) has no checkpoint after eviction")
            }
            sleep.add(
                key, SleepingRoom(epoch: track.epoch, version: track.version, checkpoint: checkpoint),
                ttl: track.ttlSeconds.map { (serial: track.ttlSerial, seconds: $0) })
        }
        return batch.count
    }

    /// Lists the checkpoints `evict` wrote since the last call in one MANIFEST (which also
    /// fsyncs the directory their renames are in), then unlinks the checkpoints they replaced.
    /// A full disk leaves it for the next call (logged).
    /// - Complexity: O(rooms on disk), one small file written whole, when something was evicted.
    package func commitEvictions() throws(StoreError) {
        guard sleep.unlisted else { return }
        if try commitCheckpoints(replacing: []) { sleep.unlisted = false }
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
        let (history, chain, base) = HistoryChain.suffix(
            checkpoint.history, options.historyLimit, chain: HistoryChain.beforeHistory(of: checkpoint),
            base: options.keepsResumeBases ? checkpoint.base : nil)
        return RecoveredRoom(
            name: room, epoch: checkpoint.epoch, version: checkpoint.version, snapshot: checkpoint.snapshot,
            history: history, ttlSeconds: checkpoint.ttl?.seconds, chain: chain, base: base)
    }

    /// Tracks `room` (from `loadSleeping`) as a resident room again: its checkpoint holds it
    /// whole, and the write ids of its history go into the next checkpoint.
    package func markAwake(_ room: RecoveredRoom) {
        let key = RoomName(room.name)
        let ttl = sleep.ttls[key]
        guard let sleeper = sleep.remove(key) else { return }
        rooms[key] = RoomTrack(
            epoch: sleeper.epoch, version: sleeper.version, checkpointVersion: sleeper.version,
            checkpointFile: CheckpointFile.fileName(sleeper.checkpoint), pinnedSegment: nil,
            writeIDs: room.history.map { ($0.version, $0.writeID, $0.fingerprint) }, ttlSeconds: ttl?.seconds,
            ttlSerial: ttl?.serial ?? 0)
    }
}
