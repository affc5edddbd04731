import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Cluster mode's write path: a write is validated against the replica without changing it
// (`Room.propose`), its record proposed to the room's log expecting the room's last sequence,
// and the room changes only when the log delivers the record (ReplicatedRoomEngine+Records.swift), on
// every node alike. The writer's ACK needs both the log's `.stored(sequence)` and the record at
// that sequence applied here, in either order. One proposal per room is in flight; the other
// writes wait in a bounded FIFO, which keeps each client's order.

extension ReplicatedRoomEngine {
    /// MUTATE, REPLACE or REPLACE_SECTION, admitted by the hub: into the room's queue.
    func write(_ write: AdmittedWrite, from session: Session) {
        submit(
            ReplicatedRoom.PendingWrite(
                requestID: write.requestID, session: session, writeID: write.writeID, kind: .write(write.request), received: write.received),
            to: write.roomName)
    }

    /// DROP (admitted by the hub: the name and the `admin` right): a tombstone record, through
    /// the room's queue like a write, answered with the dropped incarnation's last position. The
    /// room is loaded even at `--max-rooms`, as a single node drops a room it does not hold
    /// without loading it; it is let go once answered (`releaseIfOverLimit`).
    func drop(requestID: UInt64, roomName: String, from session: Session) {
        submit(ReplicatedRoom.PendingWrite(requestID: requestID, session: session, writeID: [], kind: .drop), to: roomName)
    }

    private func submit(_ write: ReplicatedRoom.PendingWrite, to roomName: String) {
        let replica: ReplicatedRoom
        let isDrop = if case .drop = write.kind { true } else { false }
        switch self.replica(named: roomName, beyondLimit: isDrop) {
        case .success(let found): replica = found
        case .failure(let rejection):
            refuse(write, rejection)
            return
        }
        if replica.phase == .broken {
            refuse(
                write,
                Rejection(.storageFailure, "room \(LogEscaping.line(roomName)): this node is following the cluster's log again; retry"))
            return
        }
        guard replica.enqueue(write) else {
            refuse(
                write,
                Rejection(
                    .storageFailure,
                    "room \(LogEscaping.line(roomName)): \(ReplicatedRoom.maxWaiting) writes already wait for the cluster's log; nothing was applied"
                ))
            return
        }
        hub.awaitLog(write.session)
        proposeNext(replica)
    }

    /// Proposes the first waiting write that needs the log, answering the ones before it that
    /// do not (refused, duplicates, and, after a read barrier, writes that change nothing and
    /// DROPs of a room at version 0). Nothing while the room loads, while a proposal or a
    /// barrier is in flight, or while its follow is broken.
    func proposeNext(_ replica: ReplicatedRoom) {
        guard replica.phase == .current, replica.inFlight == nil, replica.writeBarrier == nil else { return }
        while let room = replica.room, let write = replica.dequeue() {
            // A write whose client has gone is dropped unanswered and unapplied.
            guard !write.session.isEnded else { continue }
            let entry: RoomLogEntry
            var prepared: (ops: [SnapshotOperation], result: Snapshot)?
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
                entry = .tombstone(epoch: room.epoch, version: room.version)
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
                    entry = .write(
                        WriteRecord(
                            room: room.name, epoch: room.epoch, version: version, writeID: write.writeID, fingerprint: fingerprint,
                            diffFrame: frame))
                    prepared = (ops, result)
                }
            }
            let token = nextProposalToken
            nextProposalToken += 1
            replica.inFlight = ReplicatedRoom.InFlight(
                write: write, token: token, expected: replica.logSequence, prepared: prepared, entry: entry)
            log.propose(room: replica.name, expectedSequence: replica.logSequence, messageID: write.writeID, entry: entry) {
                [weak self, weak replica] outcome in
                guard let self, let replica else { return }
                self.proposalAnswered(replica, token: token, outcome)
                self.hub.resumeSessions()
            }
            return
        }
        releaseIfOverLimit(replica)
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
        case .superseded:
            flight.superseded = true
            replica.inFlight = flight
            replica.waitingSince = hub.monotonicNow()
            // Validated again once the record that won has been applied here.
            if replica.logSequence > flight.expected { retryProposal(of: replica) }
        case .failed(let error):
            replica.inFlight = nil
            refuse(
                flight.write,
                Rejection(
                    .storageFailure,
                    "room \(LogEscaping.line(replica.name)): the cluster's log did not confirm the write (\(error)); it may still be applied: a retry with the same write id is safe"
                ))
            proposeNext(replica)
        }
    }

    /// A record at `sequence` was applied: the ACK if it is the proposal's, or the proposal
    /// validated again if the log superseded it.
    func recordApplied(to replica: ReplicatedRoom, at sequence: UInt64, epoch: UInt64, version: UInt64) {
        guard var flight = replica.inFlight else { return }
        flight.applied[sequence] = (epoch, version)
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

    /// Stored and applied: the writer's ACK (at the version the record made, or, for a repeat of
    /// a write id the log had stored, the original's), then the next write. A record the log
    /// stored under this write's message id but made by another write with the same id (its
    /// fingerprint differs) is `write_id_conflict`, as the room's window would have answered.
    private func finishProposal(of replica: ReplicatedRoom) {
        guard let flight = replica.inFlight, let stored = flight.storedAt else { return }
        if flight.voided.contains(stored) {
            retryProposal(of: replica)
            return
        }
        replica.inFlight = nil
        let write = flight.write
        if let room = replica.room, case .write(let record) = flight.entry, let fingerprint = record.fingerprint,
            case .rejected(let conflict)? = room.precheck(expectedVersion: nil, writeID: record.writeID, fingerprint: fingerprint)
        {
            refuse(write, conflict)
        } else if let (epoch, version) = flight.applied[stored] {
            hub.send(.ack(requestID: write.requestID, epoch: epoch, version: version), to: write.session)
            hub.logAnswered(write.session)
            if write.received != 0 { hub.writeAckTimer?.acknowledged(write.received) }
            switch flight.entry {
            case .write: if version % UInt64(hub.configuration.clusterCheckpointInterval) == 0 { saveCheckpoint(of: replica) }
            // The next incarnation's first checkpoint (empty, at the tombstone's sequence at
            // the earliest): its versions count from 0 again, so without it a room dropped
            // more often than every checkpoint interval would never be checkpointed, and a
            // follow would replay records the stream's retention no longer holds.
            case .tombstone: saveCheckpoint(of: replica)
            }
        } else if let room = replica.room, let original = room.writeIDs.entry(of: write.writeID) {
            // The log had this write id stored before the proposal (a retry the replica had
            // applied before this node validated it: only when its id had left the window).
            hub.send(.ack(requestID: write.requestID, epoch: room.epoch, version: original.version), to: write.session)
            hub.logAnswered(write.session)
        } else {
            refuse(
                write,
                Rejection(
                    .storageFailure,
                    "room \(LogEscaping.line(replica.name)): the cluster's log holds this write id at sequence \(stored), older than this node's history of the room"
                ))
        }
        proposeNext(replica)
    }

    /// The log superseded the proposal and the room has moved past what it expected: the write
    /// goes first again and is validated from scratch (a compare-and-set now fails, a write id
    /// now in the window gets its original's ACK), at most `ReplicatedRoom.maxAttempts` times.
    private func retryProposal(of replica: ReplicatedRoom) {
        guard var write = replica.inFlight?.write else { return }
        replica.inFlight = nil
        write.attempts += 1
        if write.attempts >= ReplicatedRoom.maxAttempts {
            refuse(
                write,
                Rejection(
                    .storageFailure,
                    "room \(LogEscaping.line(replica.name)): concurrent writes won \(write.attempts) times; nothing was applied"))
        } else {
            replica.requeueFirst(write)
        }
        proposeNext(replica)
    }

    /// Refuses every write of `replica`, the one in flight included (its completion is then
    /// ignored).
    func refuseWrites(of replica: ReplicatedRoom, _ rejection: Rejection) {
        if let flight = replica.inFlight {
            replica.inFlight = nil
            refuse(flight.write, rejection)
        }
        if let barrier = replica.writeBarrier, case .write(let write) = barrier.waiter {
            replica.writeBarrier = nil
            barrier.ended = true
            refuse(write, rejection)
        }
        while let write = replica.dequeue() { refuse(write, rejection) }
    }

    func refuse(_ write: ReplicatedRoom.PendingWrite, _ rejection: Rejection) {
        if case .write = write.kind { hub.countRejectedWrite(rejection.code) }
        hub.send(rejection.message(requestID: write.requestID), to: write.session)
        hub.logAnswered(write.session)
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
