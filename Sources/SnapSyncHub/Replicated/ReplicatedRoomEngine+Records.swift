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
    /// `expected`, by Protocol/CLUSTER.md §3's rules, with L the replica's `logSequence`:
    /// `expected` = L, it is the room's next record and must follow it (else the follow fails:
    /// the log and the replica disagree); below L, it is void (`void`); above L, records were
    /// missed and the follow fails (`ReplicaGap`): skipping them would fork the room. A record
    /// that names a chain before it other than the replica's (`checkChain`) is void while the
    /// room loads, and means this node's replica left the log's history once it is loaded
    /// (`diverged`).
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
        let ours = replica.inFlight.map { $0.expected == replica.logSequence && $0.entry == entry } ?? false
        switch entry {
        case .writes(let writes):
            guard writes.epoch == room.epoch, writes.firstVersion == room.version + 1 else {
                stopFollowing(
                    replica,
                    ReplicaError(
                        room: replica.name, sequence: sequence,
                        reason:
                            "it is versions \(writes.firstVersion)...\(writes.lastVersion) of epoch \(writes.epoch), the replica is at version \(room.version) of epoch \(room.epoch)"
                    ))
                return
            }
            guard checkChain(writes.chainBefore, at: sequence, in: replica, room: room) else { return }
            // The record's chain after, checked before anything changes: a record whose frames do
            // not make it is damage, whoever reads it. From its own chain before, which the room's
            // is now (or is not known, or is the zero chain of a proposer that did not know it:
            // then the chain after becomes the room's). The chain after each write, computed here
            // once (one SHA-256 per frame), is the one each version gets (`Room.commit`).
            var chains: [RoomChain] = []
            chains.reserveCapacity(writes.records.count)
            var after = writes.chainBefore
            for record in writes.records {
                after = after.next(frame: record.diffFrame)
                chains.append(after)
            }
            guard after == writes.chainAfter else {
                stopFollowing(
                    replica,
                    ReplicaError(
                        room: replica.name, sequence: sequence,
                        reason: "its DIFF frames lead to chain \(after), the record names \(writes.chainAfter)"))
                return
            }
            let prepared = ours ? replica.inFlight?.prepared : nil
            let itemsBefore = room.snapshot.numberOfItems
            var diffs: [OutputChunk] = []
            diffs.reserveCapacity(writes.records.count)
            for (index, record) in writes.records.enumerated() {
                do {
                    diffs.append(
                        try room.applyLogged(
                            record, sequence: sequence,
                            prepared: prepared.map { (ops: $0.ops[index], result: index == writes.records.count - 1 ? $0.result : nil) },
                            chainAfter: chains[index]))
                } catch {
                    // Part of the record is applied: the room is no state of the log's.
                    diverged(replica, room: room, error)
                    return
                }
            }
            finishApplying(diffs, in: room, replica: replica, at: sequence, itemsBefore: itemsBefore, ours: ours)
        case .write(let record):
            let prepared = ours ? replica.inFlight?.prepared : nil
            let itemsBefore = room.snapshot.numberOfItems
            let diff: OutputChunk
            do {
                diff = try room.applyLogged(record, sequence: sequence, prepared: prepared.map { (ops: $0.ops[0], result: $0.result) })
            } catch {
                stopFollowing(replica, error)
                return
            }
            finishApplying([diff], in: room, replica: replica, at: sequence, itemsBefore: itemsBefore, ours: ours)
        case .chainedTombstone(let epoch, let version, let chain):
            guard checkTombstone(epoch: epoch, version: version, at: sequence, in: replica, room: room),
                checkChain(chain, at: sequence, in: replica, room: room)
            else { return }
            applyTombstone(at: sequence, in: replica, room: room, ours: ours)
        case .tombstone(let epoch, let version):
            guard checkTombstone(epoch: epoch, version: version, at: sequence, in: replica, room: room) else { return }
            applyTombstone(at: sequence, in: replica, room: room, ours: ours)
        }
    }

    /// Whether a record whose proposer's replica had `before` may be applied to `room`: it may
    /// when `before` is the room's chain, or either is not known (a room loaded from a
    /// checkpoint saved before checkpoints carried the chain: the record's chain is then the
    /// room's). Otherwise the record and the replica are on two histories. While the room
    /// loads, the replica is the log's own state (its checkpoint and every record since, by
    /// these rules): the record's proposer was on another history, and the record is void on
    /// every node alike. Once loaded, this node cannot tell which of the two left the log, so it
    /// loads the room again from the log (`diverged`), where the same rule decides.
    /// - Complexity: O(1).
    private func checkChain(_ before: RoomChain, at sequence: UInt64, in replica: ReplicatedRoom, room: Room) -> Bool {
        guard let chain = room.chain, before != .unknown, before != chain else {
            if room.chain == nil, before != .unknown { room.chain = before }
            return true
        }
        let mismatch = ReplicaError(
            room: replica.name, sequence: sequence,
            reason: "it follows chain \(before), the replica is at chain \(chain) (version \(room.version) of epoch \(room.epoch))")
        if replica.phase == .loading {
            hub.logger.warning("\(mismatch); its proposer was on another history: void")
            replica.logSequence = sequence
            hub.stats.clusterVoidRecords += 1
            recordVoided(in: replica, at: sequence)
        } else {
            diverged(replica, room: room, mismatch)
        }
        return false
    }

    private func checkTombstone(epoch: UInt64, version: UInt64, at sequence: UInt64, in replica: ReplicatedRoom, room: Room) -> Bool {
        guard epoch == room.epoch, version == room.version else {
            stopFollowing(
                replica,
                ReplicaError(
                    room: replica.name, sequence: sequence,
                    reason:
                        "it is a tombstone of version \(version) of epoch \(epoch), the replica is at version \(room.version) of epoch \(room.epoch)"
                ))
            return false
        }
        return true
    }

    /// What every applied write record does besides changing the room: the members get its
    /// DIFFs, the counts and the proposal follow.
    private func finishApplying(
        _ diffs: [OutputChunk], in room: Room, replica: ReplicatedRoom, at sequence: UInt64, itemsBefore: Int, ours: Bool
    ) {
        replica.logSequence = sequence
        hub.stats.writesApplied += UInt64(diffs.count)
        hub.touch(room)
        hub.totalItems += room.snapshot.numberOfItems - itemsBefore
        hub.roomBudget.update(room)
        let first = room.version - UInt64(diffs.count) + 1
        for (offset, diff) in diffs.enumerated() { hub.fanOut(diff, version: first + UInt64(offset), in: room) }
        recordApplied(to: replica, at: sequence, ours: ours)
    }

    /// The incarnation ends (LEFT `room_deleted` to its members); the next one starts empty at
    /// version 0, with the epoch every node derives from the tombstone's sequence.
    private func applyTombstone(at sequence: UInt64, in replica: ReplicatedRoom, room: Room, ours: Bool) {
        hub.endRoom(room, code: .roomDeleted, "room \(LogEscaping.line(room.name)) was deleted")
        hub.stats.roomsDeleted += 1
        let epoch = log.epoch(room: replica.name, after: sequence)
        let next = Room(
            name: replica.name, epoch: epoch, version: 0, snapshot: RoomSnapshot(), limits: hub.configuration.wire,
            maxHistoryBytes: hub.configuration.historyBytes, chain: .start(epoch: epoch), foldsResumes: hub.configuration.foldResumes,
            idleSince: hub.monotonicNow())
        replica.room = next
        hub.install(next)
        replica.logSequence = sequence
        recordApplied(to: replica, at: sequence, ours: ours)
    }

    /// This node's replica and the log are on two histories (a record that follows another
    /// chain, or one that stopped applying half way): the members hold a state the room may no
    /// longer have, and nothing this node would answer from it can be trusted. Every member is
    /// sent LEFT `storage_failure` (a client joins again, and gets the room as the log has it),
    /// every write waiting here is refused (`storage_failure`: a retry with the same write id
    /// is safe), and the replica is forgotten: the next request follows the room anew, from its
    /// checkpoint and records. Logged and counted (`snapsync_cluster_divergences_total`): the
    /// writes this node applied on the other history and acknowledged may be lost.
    func diverged(_ replica: ReplicatedRoom, room: Room, _ error: any Error) {
        let name = LogEscaping.line(replica.name)
        hub.logger.error(
            "room \(name) diverged from the cluster's log at version \(room.version) of epoch \(room.epoch): \(error); its members are sent LEFT, and the room is loaded again from the log; writes this node applied since the histories parted may be lost"
        )
        hub.stats.clusterDivergences += 1
        log.unfollow(room: replica.name)
        hub.endRoom(room, code: .storageFailure, "room \(name): this node's copy left the cluster's history of the room; join again")
        replica.room = nil
        forgetReplica(
            replica, Rejection(.storageFailure, "room \(name): this node's copy left the cluster's history of the room; a retry with the same write id is safe")
        )
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
        // The chain before the history too, so that a node loading it knows the chain after each
        // kept DIFF, which a version 3 CATCHUP through that history carries.
        let before = room.chain(atVersion: room.historyBaseVersion)
        let image = RoomImage(
            room: room.name, epoch: room.epoch, version: room.version, snapshot: room.snapshot, diffFrames: history.map(\.diffFrame),
            chain: before == .unknown ? nil : before)
        log.saveCheckpoint(image, history: history, sequence: replica.logSequence, chain: room.chain)
    }
}
