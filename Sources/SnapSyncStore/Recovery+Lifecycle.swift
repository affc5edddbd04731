internal import Logging
internal import SnapSyncModel
internal import SnapSyncWire

// Replaying the records of rooms' lives (LifecycleRecord): tombstones and TTLs.
//
// A tombstone voids one incarnation of a room, (room, epoch): its checkpoint and its log
// records. Those records may then look like damage when they are read before the tombstone:
// writes of the old epoch while the room's newer incarnation was loaded from its checkpoint,
// or writes whose base checkpoint was already removed. So a record that does not follow its
// room's state is not refused at once but held in doubt, and the incarnation's later records
// are skipped; its tombstone clears the doubt. A doubt still open when the last good record
// has been read is the damage it looked like: the start is refused with the error the record
// would have raised at once.

extension Recovery {
    struct Doubt {
        var room: String
        var epoch: UInt64
        var error: StoreError
    }

    func isInDoubt(room: String, epoch: UInt64) -> Bool {
        !doubts.isEmpty && doubts.contains { $0.epoch == epoch && $0.room.utf8.elementsEqual(room.utf8) }
    }

    /// Holds the incarnation (room, epoch) in doubt, with the error that refuses the start if no
    /// tombstone of it follows.
    mutating func doubt(room: String, epoch: UInt64, _ error: StoreError) {
        guard !isInDoubt(room: room, epoch: epoch) else { return }
        doubts.append(Doubt(room: room, epoch: epoch, error: error))
    }

    /// Refuses the start with the first record still in doubt. Call once every good record has
    /// been replayed.
    func throwFirstDoubt() throws(StoreError) {
        if let first = doubts.first { throw first.error }
    }

    /// Replays a tombstone or a TTL record.
    /// - Complexity: O(1) (O(doubts) while some are open; none in a sound directory).
    mutating func apply(_ record: LifecycleRecord, segment: UInt64, corrupt: (String) -> StoreError) throws(StoreError) {
        let key = RoomName(record.room)
        switch record {
        case .tombstone(let room, let epoch, _):
            doubts.removeAll { $0.epoch == epoch && $0.room.utf8.elementsEqual(room.utf8) }
            // A room left asleep (Recovery+Sleep.swift): its checkpoint is voided unread.
            if let sleeper = asleep[key], sleeper.epoch == epoch {
                let file = CheckpointFile.fileName(sleeper.checkpoint)
                droppedCheckpoints.append((name: file, sequence: sleeper.checkpoint))
                logger.notice("store: removing \(file), the checkpoint of room \(room), which was dropped")
                asleep[key] = nil
                asleepTTLs[key] = nil
                return
            }
            // Only the incarnation it names: a newer one loaded from its checkpoint stays.
            guard let state = rooms[key], state.epoch == epoch else { return }
            if let file = state.checkpointFile, let sequence = CheckpointFile.sequence(ofFileName: file) {
                droppedCheckpoints.append((name: file, sequence: sequence))
                logger.notice("store: removing \(file), the checkpoint of room \(room), which was dropped")
            }
            rooms[key] = nil
        case .ttl(let room, let epoch, let serial, let seconds):
            if isInDoubt(room: room, epoch: epoch) { return }
            // A TTL record after an asleep room's checkpoint: the room is loaded, as for a write.
            if let sleeper = asleep[key] {
                if sleeper.epoch == epoch && serial <= (asleepTTLs[key]?.serial ?? 0) { return }
                try wakeAsleep(key, sleeper)
            }
            guard let state = rooms[key] else {
                // A room given a TTL before (or without) any write: held at version 0, its chain
                // the incarnation's start (a tombstone before it ended the previous one).
                rooms[key] = RoomState(
                    epoch: epoch, version: 0, snapshot: RoomSnapshot(), history: [], checkpointFile: nil,
                    checkpointVersion: 0, pinnedSegment: segment, ttlSeconds: seconds, ttlSerial: serial,
                    chain: .start(epoch: epoch))
                return
            }
            guard state.epoch == epoch else {
                doubt(room: room, epoch: epoch, corrupt("room \(room) is at epoch \(state.epoch), but this TTL record is for epoch \(epoch)"))
                return
            }
            // An older SET_TTL than the checkpoint's changes nothing.
            guard serial > state.ttlSerial else { return }
            rooms[key]?.ttlSeconds = seconds
            rooms[key]?.ttlSerial = serial
            if rooms[key]?.pinnedSegment == nil { rooms[key]?.pinnedSegment = segment }
        }
    }
}
