import Logging
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Cluster mode (#20): the records the room's log delivers, from any node, applied to the
// replica in the log's order: the only place a cluster room changes. Members get a write's DIFF
// as on a single node; a tombstone ends the incarnation (LEFT room_deleted) and the next one
// starts empty at version 0. And the checkpoints this node saves for the log.

extension Hub {
    func apply(_ entry: RoomLogEntry, at sequence: UInt64, to replica: RoomReplica) {
        // Following again after a failure delivers records this replica has applied.
        guard let log, let room = replica.room, sequence > replica.logSequence else { return }
        switch entry {
        case .write(let record):
            var prepared: (ops: [SnapshotOperation], result: Snapshot)?
            if let flight = replica.inFlight, flight.expected == replica.logSequence, flight.entry == entry {
                prepared = flight.prepared
            }
            let itemsBefore = room.snapshot.numberOfItems
            let diff: OutputChunk
            do {
                diff = try room.applyLogged(record, sequence: sequence, prepared: prepared)
            } catch {
                logger.error("\(error); the room takes no more writes here until it is followed again")
                log.unfollow(room: replica.name)
                followFailed(replica, error: error)
                return
            }
            replica.logSequence = sequence
            stats.writesApplied += 1
            touch(room)
            totalItems += room.snapshot.numberOfItems - itemsBefore
            roomBudget.update(room)
            fanOut(diff, in: room)
            recordApplied(to: replica, at: sequence, epoch: record.epoch, version: record.version)
        case .tombstone(let epoch, let version):
            guard epoch == room.epoch else {
                let error = ReplicaError(
                    room: room.name, sequence: sequence, reason: "it ends epoch \(epoch), the replica is in epoch \(room.epoch)")
                logger.error("\(error); the room takes no more writes here until it is followed again")
                log.unfollow(room: replica.name)
                followFailed(replica, error: error)
                return
            }
            endRoom(room, code: .roomDeleted, "room \(LogEscaping.line(room.name)) was deleted")
            stats.roomsDeleted += 1
            let next = Room(
                name: replica.name, epoch: log.epoch(room: replica.name, after: sequence), version: 0, snapshot: Snapshot(),
                limits: configuration.wire, maxHistoryBytes: configuration.historyBytes)
            install(next, in: replica)
            replica.logSequence = sequence
            recordApplied(to: replica, at: sequence, epoch: epoch, version: version)
        }
    }

    /// Saves the room as it is here as the log's checkpoint, covering every record applied.
    /// - Complexity: O(history) to copy the frames; the snapshot is shared.
    func saveCheckpoint(of replica: RoomReplica) {
        guard let log, let room = replica.room else { return }
        let history = room.historyRecords()
        let image = RoomImage(
            room: room.name, epoch: room.epoch, version: room.version, snapshot: room.snapshot, diffFrames: history.map(\.diffFrame))
        log.saveCheckpoint(image, history: history, sequence: replica.logSequence)
    }
}
