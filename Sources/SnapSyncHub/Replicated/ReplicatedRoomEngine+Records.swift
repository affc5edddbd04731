import Logging
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Cluster mode: the records the room's log delivers, from any node, applied to the
// replica in the log's order: the only place a cluster room changes. Members get a write's DIFF
// as on a single node; a tombstone ends the incarnation (LEFT room_deleted) and the next one
// starts empty at version 0. And the checkpoints this node saves for the log.

extension ReplicatedRoomEngine {
    /// The record at `sequence`, whose proposer expected the subject's last sequence to be
    /// `expected`, by Protocol/CLUSTER.md §3's rule, with L the replica's `logSequence`:
    /// `expected` = L, it is the room's next record and must follow it (else the follow fails:
    /// the log and the replica disagree); below L, it is void (`void`); above L, records were
    /// missed and the follow fails (`ReplicaGap`): skipping them would fork the room.
    func apply(_ entry: RoomLogEntry, at sequence: UInt64, expected: UInt64, to replica: ReplicatedRoom) {
        // Following again after a failure delivers records this replica has applied.
        guard let room = replica.room, sequence > replica.logSequence else { return }
        guard expected <= replica.logSequence else {
            stopFollowing(replica, ReplicaGap(room: replica.name, sequence: sequence, expected: expected, applied: replica.logSequence))
            return
        }
        guard expected == replica.logSequence else {
            void(at: sequence, expected: expected, in: replica, room: room)
            return
        }
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
                stopFollowing(replica, error)
                return
            }
            replica.logSequence = sequence
            hub.stats.writesApplied += 1
            hub.touch(room)
            hub.totalItems += room.snapshot.numberOfItems - itemsBefore
            hub.roomBudget.update(room)
            hub.fanOut(diff, in: room)
            recordApplied(to: replica, at: sequence, epoch: record.epoch, version: record.version)
        case .tombstone(let epoch, let version):
            guard epoch == room.epoch, version == room.version else {
                stopFollowing(
                    replica,
                    ReplicaError(
                        room: replica.name, sequence: sequence,
                        reason:
                            "it is a tombstone of version \(version) of epoch \(epoch), the replica is at version \(room.version) of epoch \(room.epoch)"
                    ))
                return
            }
            hub.endRoom(room, code: .roomDeleted, "room \(LogEscaping.line(room.name)) was deleted")
            hub.stats.roomsDeleted += 1
            let next = Room(
                name: replica.name, epoch: log.epoch(room: replica.name, after: sequence), version: 0, snapshot: Snapshot(),
                limits: hub.configuration.wire, maxHistoryBytes: hub.configuration.historyBytes, idleSince: hub.monotonicNow())
            replica.room = next
            hub.install(next)
            replica.logSequence = sequence
            recordApplied(to: replica, at: sequence, epoch: epoch, version: version)
        }
    }

    /// A record the replica cannot take (`ReplicaError`, `ReplicaGap`): the follow ends, the
    /// room goes on serving reads and refuses writes until the timer follows it again.
    private func stopFollowing(_ replica: ReplicatedRoom, _ error: any Error) {
        hub.logger.error("\(error); the room takes no more writes here until it is followed again")
        log.unfollow(room: replica.name)
        followFailed(replica, error: error)
    }

    /// A record whose proposer expected a sequence before the replica's last is void: every
    /// replica skips it, the same way, so they stay equal (Protocol/CLUSTER.md §3). The log
    /// should never hold one, since JetStream stores a proposal only if its expectation is the
    /// subject's last sequence; but nats-server 2.9 does not serialise that check for concurrent
    /// publishes to a clustered stream (nats-io/nats-server#4320, fixed in 2.10), so two
    /// proposals made against one state can both be stored. The first applies; the second was
    /// validated against a state that is gone, so applying it could break the room's rules: it
    /// is voided, and its proposer proposes it again (`recordVoided`).
    /// - Complexity: O(1).
    private func void(at sequence: UInt64, expected: UInt64, in replica: ReplicatedRoom, room: Room) {
        hub.logger.debug(
            "void record skipped",
            metadata: [
                "room": "\(LogEscaping.line(room.name))", "sequence": "\(sequence)", "expected": "\(expected)",
                "last": "\(replica.logSequence)",
            ])
        replica.logSequence = sequence
        hub.stats.clusterVoidRecords += 1
        recordVoided(in: replica, at: sequence)
    }

    /// Saves the room as it is here as the log's checkpoint, covering every record applied.
    /// - Complexity: O(history) to copy the frames; the snapshot is shared.
    func saveCheckpoint(of replica: ReplicatedRoom) {
        guard let room = replica.room else { return }
        let history = room.historyRecords()
        let image = RoomImage(
            room: room.name, epoch: room.epoch, version: room.version, snapshot: room.snapshot, diffFrames: history.map(\.diffFrame))
        log.saveCheckpoint(image, history: history, sequence: replica.logSequence)
    }
}
