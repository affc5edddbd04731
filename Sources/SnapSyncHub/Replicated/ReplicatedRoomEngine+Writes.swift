import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Cluster mode's write path: a write is validated against the replica without changing it
// (`Room.propose`), its record proposed to the room's log expecting the room's last sequence,
// and the room changes only when the log delivers the record (ReplicatedRoomEngine+Records.swift), on
// every node alike. The writer's ACK needs both the log's `.stored(sequence)` and, applied here at
// that sequence, the very record proposed, in either order. One record per room is in flight; the
// writes that arrive meanwhile wait in a bounded FIFO, which keeps each client's order, and go
// together in the next record (up to `ReplicatedRoom.maxWritesPerRecord`), each validated against
// what the ones before it lead to: one round trip to the log for all of them, as a single node
// makes one fsync for a batch.

extension ReplicatedRoomEngine {
    /// MUTATE, REPLACE or REPLACE_SECTION, admitted by the hub: into the room's queue.
    func write(_ write: AdmittedWrite, from session: Session) {
        submit(
            ReplicatedRoom.PendingWrite(
                requestID: write.requestID, session: session, writeID: write.writeID, kind: .write(write.request),
                queuedAt: hub.monotonicNow(), received: write.received),
            to: write.roomName)
    }

    /// DROP (admitted by the hub: the name and the `admin` right): a tombstone record, through
    /// the room's queue like a write, answered with the dropped incarnation's last position. The
    /// room is loaded even at `--max-rooms`, as a single node drops a room it does not hold
    /// without loading it; it is let go once answered (`releaseIfOverLimit`).
    func drop(requestID: UInt64, roomName: String, from session: Session) {
        submit(
            ReplicatedRoom.PendingWrite(requestID: requestID, session: session, writeID: [], kind: .drop, queuedAt: hub.monotonicNow()),
            to: roomName)
    }

    /// Whether `submit` would queue a write of `roomName` (answered after the writes waiting
    /// there) rather than refuse it at once: the hub hands a session's next write of the room
    /// over then, without waiting for its previous ones.
    func queuesWrite(toRoom roomName: String) -> Bool {
        guard let replica = replicas[RoomName(roomName)] else { return false }
        return replica.phase != .broken && replica.waitingCount < ReplicatedRoom.maxWaiting
    }

    /// Queues `write` in the room's queue (the session waits for its answer), or refuses it at
    /// once (the session does not wait).
    private func submit(_ write: ReplicatedRoom.PendingWrite, to roomName: String) {
        let replica: ReplicatedRoom
        switch self.replica(named: roomName, beyondLimit: write.isDrop) {
        case .success(let found): replica = found
        case .failure(let rejection):
            refuse(write, rejection, awaited: false)
            return
        }
        if replica.phase == .broken {
            refuse(
                write,
                Rejection(.storageFailure, "room \(LogEscaping.line(roomName)): this node is following the cluster's log again; retry"),
                awaited: false)
            return
        }
        guard replica.enqueue(write) else {
            refuse(
                write,
                Rejection(
                    .storageFailure,
                    "room \(LogEscaping.line(roomName)): \(ReplicatedRoom.maxWaiting) writes already wait for the cluster's log; nothing was applied"
                ), awaited: false)
            return
        }
        hub.awaitLog(write.session, writeOf: write.isDrop ? nil : roomName)
        proposeNext(replica)
    }

    /// Proposes the waiting writes that need the log, as one record, answering the ones before
    /// them that do not (refused, duplicates, and, after a read barrier, writes that change
    /// nothing and DROPs of a room at version 0). Nothing while the room loads, while a record
    /// or a barrier is in flight, or while its follow is broken.
    func proposeNext(_ replica: ReplicatedRoom) {
        guard replica.phase == .current, replica.inFlight == nil, replica.writeBarrier == nil else { return }
        while let room = replica.room, let write = replica.dequeue() {
            // A write whose client has gone is dropped unanswered and unapplied.
            guard !write.session.isEnded else { continue }
            switch write.kind {
            case .drop:
                // A room never written in this incarnation is no room (PROTOCOL.md §11.19): no
                // node can know who joined it, and a retried DROP must change nothing. But a
                // replica behind the log may not have the room's writes yet: version 0 is
                // believed after a read barrier only.
                guard room.version > 0 else {
                    guard write.barrierPassed else {
                        startBarrier(.write(write), for: replica)
                        return
                    }
                    hub.send(.ack(requestID: write.requestID, epoch: 0, version: 0), to: write.session)
                    hub.logAnswered(write.session)
                    continue
                }
                send(
                    .chainedTombstone(epoch: room.epoch, version: room.version, chain: room.chain ?? .unknown), of: [write], prepared: nil,
                    for: replica)
                return
            case .write(let request):
                switch room.propose(request, writeID: write.writeID, scratch: &hub.diffBuffer) {
                case .unchanged(let fingerprint):
                    // It changes nothing here; against records this replica has not applied yet
                    // it may change something, or fail: answered after a read barrier, validated
                    // again.
                    guard write.barrierPassed else {
                        startBarrier(.write(write), for: replica)
                        return
                    }
                    settle(write, room.unchanged(writeID: write.writeID, fingerprint: fingerprint), in: room)
                    continue
                case .settled(let outcome):
                    if !write.barrierPassed && Self.expectsAheadOfReplica(request, outcome, room: room) {
                        startBarrier(.write(write), for: replica)
                        return
                    }
                    settle(write, outcome, in: room)
                    continue
                case .write(let version, let frame, let ops, let result, let fingerprint):
                    // A room's first write creates it: counted against the principal's creations
                    // per minute. A replica behind the log may take an existing room for new, so
                    // a principal out of creations is refused only once a read barrier has
                    // confirmed the room has no write yet (a room that exists is never refused).
                    if room.version == 0 {
                        guard hub.mayCreateRoom(write.session) else {
                            guard write.barrierPassed else {
                                startBarrier(.write(write), for: replica)
                                return
                            }
                            refuse(write, hub.refusePrincipalsRoomCreation(room.name, for: write.session))
                            continue
                        }
                        hub.chargeRoomCreation(write.session)
                    }
                    proposeWrites(
                        first: write,
                        WriteRecord(room: room.name, epoch: room.epoch, version: version, writeID: write.writeID, fingerprint: fingerprint, diffFrame: frame),
                        ops: ops, result: result, in: room, of: replica)
                    return
                }
            }
        }
        releaseIfOverLimit(replica)
    }

    /// Proposes `first` (validated: `record`, with its ops and the snapshot it leads to) and
    /// the waiting writes behind it that validate against what it leads to, one after the other,
    /// as one record. It stops at the first write that does not make a new version there (a
    /// refusal, a duplicate, a write that changes nothing, a DROP, a write id already in the
    /// record): that one is validated against the room itself once this record is applied.
    private func proposeWrites(
        first: ReplicatedRoom.PendingWrite, _ record: WriteRecord, ops: [SnapshotOperation], result: RoomSnapshot, in room: Room,
        of replica: ReplicatedRoom
    ) {
        var writes = [first]
        var records = [record]
        var allOps = [ops]
        var base = ProposalBase(snapshot: room.snapshot, version: room.version).after(record.version, result, frameBytes: record.diffFrame.count)
        // The record must fit the servers' max_payload, which the frame limit is set under with
        // room for one write's other fields and the headers (Protocol/CLUSTER.md §8): every
        // write added counts its own fields too (write id, fingerprint, lengths: at most 48).
        let perWrite = 48
        var recordBytes = record.diffFrame.count + perWrite
        let maxFrameBytes = hub.configuration.wire.maxFrameBytes
        while writes.count < ReplicatedRoom.maxWritesPerRecord, let next = replica.firstWaiting, !next.session.isEnded,
            case .write(let request) = next.kind,
            next.writeID.isEmpty || !writes.contains(where: { $0.writeID == next.writeID })
        {
            guard
                case .write(let version, let frame, let ops, let result, let fingerprint) = room.propose(
                    request, writeID: next.writeID, after: base, scratch: &hub.diffBuffer),
                recordBytes + frame.count + perWrite <= maxFrameBytes
            else { break }
            _ = replica.dequeue()
            writes.append(next)
            records.append(
                WriteRecord(room: room.name, epoch: room.epoch, version: version, writeID: next.writeID, fingerprint: fingerprint, diffFrame: frame))
            allOps.append(ops)
            base = base.after(version, result, frameBytes: frame.count)
            recordBytes += frame.count + perWrite
        }
        let entry = RoomLogEntry.writes(ChainedWrites(records: records, after: room.chain ?? .unknown))
        send(entry, of: writes, prepared: (allOps, base.snapshot), for: replica)
    }

    /// Proposes `entry`, carrying `writes`, expecting the room's last sequence; its message id
    /// is the first write's (Protocol/CLUSTER.md §4).
    private func send(
        _ entry: RoomLogEntry, of writes: [ReplicatedRoom.PendingWrite], prepared: (ops: [[SnapshotOperation]], result: RoomSnapshot)?,
        for replica: ReplicatedRoom
    ) {
        replica.inFlight = ReplicatedRoom.InFlight(
            writes: writes, token: 0, expected: replica.logSequence, prepared: prepared, entry: entry)
        hub.stats.clusterRecordsProposed += 1
        hub.stats.clusterWritesProposed += UInt64(writes.count)
        publish(replica)
    }

    /// Publishes the record in flight (again, after `.pending`), under a new token: an answer
    /// to an earlier publish of it is ignored.
    func publish(_ replica: ReplicatedRoom) {
        guard var flight = replica.inFlight else { return }
        let token = nextProposalToken
        nextProposalToken += 1
        flight.token = token
        flight.pending = false
        replica.inFlight = flight
        log.propose(room: replica.name, expectedSequence: flight.expected, messageID: flight.writes[0].writeID, entry: flight.entry) {
            [weak self, weak replica] outcome in
            guard let self, let replica else { return }
            self.proposalAnswered(replica, token: token, outcome)
            self.hub.resumeSessions()
        }
    }

    /// A room loaded past `--max-rooms` (by a DROP) is unfollowed as soon as nothing here uses
    /// it, which brings the count back down.
    private func releaseIfOverLimit(_ replica: ReplicatedRoom) {
        guard replicas.count > hub.configuration.maxRooms, replica.isUnused, replicas[RoomName(replica.name)] === replica else { return }
        log.unfollow(room: replica.name)
        forgetReplica(replica, Rejection(.storageFailure, "room \(LogEscaping.line(replica.name)) is no longer followed by this node"))
    }

    private func proposalAnswered(_ replica: ReplicatedRoom, token: UInt64, _ outcome: ProposalOutcome) {
        guard var flight = replica.inFlight, flight.token == token else { return }
        switch outcome {
        case .stored(let sequence):
            flight.storedAt = sequence
            replica.inFlight = flight
            if sequence <= replica.logSequence {
                finishProposal(of: replica)
            } else {
                // Its record is owed: bounded as a stalled follow (`ReplicatedRoom.stallSeconds`).
                replica.waitingSince = hub.monotonicNow()
            }
        case .pending:
            // The same write, through another node at the same position, is being stored: its
            // outcome is this one's. Asked again at the next tick; meanwhile its record may come.
            flight.pending = true
            replica.inFlight = flight
        case .superseded:
            flight.superseded = true
            replica.inFlight = flight
            replica.waitingSince = hub.monotonicNow()
            // Validated again once the record that won has been applied here.
            if replica.logSequence > flight.expected { retryProposal(of: replica) }
        case .failed(let error):
            replica.inFlight = nil
            for write in flight.writes {
                refuse(
                    write,
                    Rejection(
                        .storageFailure,
                        "room \(LogEscaping.line(replica.name)): the cluster's log did not confirm the write (\(error)); it may still be applied: a retry with the same write id is safe"
                    ))
            }
            proposeNext(replica)
        }
    }

    /// A record at `sequence` was applied (`ours`: the very record in flight): the ACKs if the
    /// log stored the proposal there, or the proposal validated again if the log superseded it.
    func recordApplied(to replica: ReplicatedRoom, at sequence: UInt64, ours: Bool) {
        guard var flight = replica.inFlight else { return }
        flight.applied[sequence] = ours
        replica.inFlight = flight
        if let stored = flight.storedAt, stored <= sequence {
            finishProposal(of: replica)
        } else if flight.superseded {
            retryProposal(of: replica)
        }
    }

    /// A record at `sequence` was voided (`ReplicatedRoomEngine.void`): if it is the proposal's, the log took it
    /// but no replica applies it, so the write is validated and proposed again; any other moves
    /// the room's last sequence, which a superseded proposal waits for.
    func recordVoided(in replica: ReplicatedRoom, at sequence: UInt64) {
        guard var flight = replica.inFlight else { return }
        flight.voided.insert(sequence)
        replica.inFlight = flight
        if flight.storedAt == sequence {
            retryProposal(of: replica)
        } else if flight.superseded {
            retryProposal(of: replica)
        }
    }

    /// Stored, and the record at the stored sequence applied: if it is the very record proposed,
    /// each write's ACK at the version it made (and a checkpoint when one is due), then the next
    /// writes. If it is another record, the log did not store this one there: it answered for
    /// another node's record with the same message id (the same write retried through that
    /// node), or lost it (JetStream's stores diverged). Then no write is acknowledged; each is
    /// validated again, where a retry finds its write id applied (the original's ACK) and a
    /// compare-and-set finds the version moved (`version_mismatch`): one version is never
    /// acknowledged to two writes.
    private func finishProposal(of replica: ReplicatedRoom) {
        guard let flight = replica.inFlight, let stored = flight.storedAt else { return }
        guard flight.applied[stored] == true, !flight.voided.contains(stored) else {
            retryProposal(of: replica)
            return
        }
        replica.inFlight = nil
        switch flight.entry {
        case .writes(let writes):
            for (write, record) in zip(flight.writes, writes.records) {
                hub.send(.ack(requestID: write.requestID, epoch: record.epoch, version: record.version), to: write.session)
                hub.logAnswered(write.session)
                if write.received != 0 { hub.writeAckTimer?.acknowledged(write.received) }
            }
            let interval = UInt64(hub.configuration.clusterCheckpointInterval)
            if writes.lastVersion / interval != (writes.firstVersion - 1) / interval { saveCheckpoint(of: replica) }
        case .chainedTombstone(let epoch, let version, _), .tombstone(let epoch, let version):
            let write = flight.writes[0]
            hub.send(.ack(requestID: write.requestID, epoch: epoch, version: version), to: write.session)
            hub.logAnswered(write.session)
            // The next incarnation's first checkpoint (empty, at the tombstone's sequence at
            // the earliest): its versions count from 0 again, so without it a room dropped
            // more often than every checkpoint interval would never be checkpointed, and a
            // follow would replay records the stream's retention no longer holds.
            saveCheckpoint(of: replica)
        case .write:
            preconditionFailure("a node proposes chained records only")
        }
        proposeNext(replica)
    }

    /// The log superseded the proposal and the room has moved past what it expected (or the
    /// record at its sequence is another): its writes go first again and are validated from
    /// scratch against the room as it now is (a compare-and-set now fails, a write id now
    /// applied gets its original's ACK). Losing a race is not a failure: a write is refused only
    /// when it has been losing them for `ReplicatedRoom.retryWindow`.
    private func retryProposal(of replica: ReplicatedRoom) {
        guard let flight = replica.inFlight else { return }
        replica.inFlight = nil
        hub.stats.clusterProposalsRetried += 1
        let now = hub.monotonicNow()
        var again: [ReplicatedRoom.PendingWrite] = []
        for write in flight.writes {
            if now - write.queuedAt >= ReplicatedRoom.retryWindow {
                refuse(
                    write,
                    Rejection(
                        .storageFailure,
                        "room \(LogEscaping.line(replica.name)): other nodes' writes kept winning the room's next version for \(ReplicatedRoom.retryWindow); nothing was applied"
                    ))
            } else {
                again.append(write)
            }
        }
        replica.requeueFirst(again)
        proposeNext(replica)
    }

    /// Refuses every write of `replica`, the one in flight included (its completion is then
    /// ignored).
    func refuseWrites(of replica: ReplicatedRoom, _ rejection: Rejection) {
        if let flight = replica.inFlight {
            replica.inFlight = nil
            for write in flight.writes { refuse(write, rejection) }
        }
        if let barrier = replica.writeBarrier, case .write(let write) = barrier.waiter {
            replica.writeBarrier = nil
            barrier.ended = true
            refuse(write, rejection)
        }
        while let write = replica.dequeue() { refuse(write, rejection) }
    }

    /// REJECT for `write`; `awaited`: it was queued, so its session waits for this answer.
    func refuse(_ write: ReplicatedRoom.PendingWrite, _ rejection: Rejection, awaited: Bool = true) {
        if case .write = write.kind { hub.countRejectedWrite(rejection.code) }
        hub.send(rejection.message(requestID: write.requestID), to: write.session)
        if awaited { hub.logAnswered(write.session) }
    }

    /// A write answered without the log (`Room.propose`'s `.settled`, or `Room.unchanged`).
    private func settle(_ write: ReplicatedRoom.PendingWrite, _ outcome: Room.WriteOutcome, in room: Room) {
        switch outcome {
        case .unchanged(let version), .duplicate(let version):
            hub.send(.ack(requestID: write.requestID, epoch: room.epoch, version: version), to: write.session)
            hub.logAnswered(write.session)
            if write.received != 0 { hub.writeAckTimer?.acknowledged(write.received) }
        case .rejected(let rejection):
            refuse(write, rejection)
        case .applied:
            preconditionFailure("Room.propose applies nothing")
        }
    }
}
