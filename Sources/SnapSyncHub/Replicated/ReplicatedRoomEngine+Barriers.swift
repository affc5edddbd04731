import Logging
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Cluster mode: read barriers. A node's replica may be behind the room's log (records in
// flight, a follow that broke), and most answers from it are sound all the same (a prefix of the
// room's one order). Some are not: a client that saw version 12 through another node and resumes
// here, at version 10, would be sent a resync where CATCHUP was due; a write that changes
// nothing here may change something, or fail, against the log's state; a room at version 0 here
// may have been written. Such a request waits for a
// `ReadBarrier`: the subject's last sequence as the log's leader knows it, then the replica
// applied up to it; it is given up after `ReplicatedRoom.stallSeconds` (Protocol/CLUSTER.md §9).
// The session's later requests wait meanwhile (`awaitLog`), so its answers keep their order.

extension ReplicatedRoomEngine {
    /// Whether a JOIN resuming from `resume` must wait for a barrier before `room` answers it:
    /// the position is ahead of the replica in its epoch, or in another epoch (one this replica
    /// may not have reached yet: it knows no other).
    /// - Complexity: O(1).
    static func resumeNeedsBarrier(_ resume: ResumePoint?, room: Room) -> Bool {
        guard let resume else { return false }
        return resume.epoch != room.epoch || resume.version > room.version
    }

    /// A JOIN of the loaded `replica`, its session waiting for the log (`awaitLog`): answered now,
    /// or after a barrier when its resume needs one.
    func answerLoadedJoin(_ join: ReplicatedRoom.PendingJoin, of replica: ReplicatedRoom, room: Room) {
        if !join.session.isEnded && join.session.state != .closing && Self.resumeNeedsBarrier(join.resume, room: room) {
            startBarrier(.join(join), for: replica)
            return
        }
        completeWaitingJoin(join, room: room)
    }

    /// Answers a JOIN that waited for the log, as `join` would have at once, and lets its session go on.
    private func completeWaitingJoin(_ join: ReplicatedRoom.PendingJoin, room: Room) {
        defer { hub.logAnswered(join.session) }
        guard !join.session.isEnded && join.session.state != .closing else { return }
        // Checked again: other JOINs of this connection may have completed meanwhile.
        let limit = hub.configuration.wire.maxRoomsPerConnection
        if join.session.memberships[room.name] == nil && join.session.memberships.count >= limit {
            hub.send(
                Rejection(.tooManyRoomsForConnection, "this connection has joined \(limit) rooms, the limit")
                    .message(requestID: join.requestID), to: join.session)
            return
        }
        hub.completeJoin(requestID: join.requestID, room: room, resume: join.resume, from: join.session)
    }

    /// Begins a barrier for `waiter`: it shares the room's `lastSequence` request in flight if
    /// it is not yet sent, else the next one (`ReadBarrierQueue`), and is answered once the
    /// replica has applied up to the answer (`releaseBarriers`), or when the log fails or is
    /// too slow.
    /// - Complexity: O(1).
    func startBarrier(_ waiter: ReadBarrier.Waiter, for replica: ReplicatedRoom) {
        let barrier = ReadBarrier(waiter, since: hub.monotonicNow())
        if case .write = waiter { replica.writeBarrier = barrier }
        if replica.barriers.add(barrier) { askLastSequence(of: replica) }
    }

    /// Sends the room's `lastSequence` request, for the barriers `replica.barriers` has asked;
    /// when it answers, the barriers that arrived meanwhile get the next one.
    private func askLastSequence(of replica: ReplicatedRoom) {
        log.lastSequence(room: replica.name) { [weak self, weak replica] result in
            guard let self, let replica else { return }
            let askAgain: Bool
            switch result {
            case .success(let last):
                askAgain = replica.barriers.answered(last)
                self.releaseBarriers(of: replica)
            case .failure(let error):
                let failed: [ReadBarrier]
                (failed, askAgain) = replica.barriers.failed()
                for barrier in failed {
                    self.endBarrier(barrier, of: replica, failure: "the cluster's log did not give the room's last sequence: \(error)")
                }
            }
            if askAgain { self.askLastSequence(of: replica) }
            self.hub.resumeSessions()
        }
    }

    /// Ends the barriers of `replica` it has passed: called when the log gives a barrier's
    /// sequence and after each event of the room's follow.
    /// - Complexity: O(1 + barriers released).
    func releaseBarriers(of replica: ReplicatedRoom) {
        if let barrier = replica.writeBarrier, let target = barrier.target, replica.logSequence >= target {
            endBarrier(barrier, of: replica, failure: nil)
        }
        guard replica.barriers.joinCount > 0 else { return }
        for barrier in replica.barriers.passedJoins(upTo: replica.logSequence) { endBarrier(barrier, of: replica, failure: nil) }
    }

    /// Gives up the barriers begun `ReplicatedRoom.stallSeconds` or more before `now`: the log's
    /// answer, or its records up to it, did not come. Called by the one-second timer.
    /// - Complexity: O(followed rooms + barriers given up), plus the barriers waiting for the
    ///   log's answer once every answered one of their room has been given up.
    func expireBarriers(now: ContinuousClock.Instant) {
        let cutoff = now - .seconds(ReplicatedRoom.stallSeconds)
        let failure = "the cluster's log did not bring the replica up to date within \(ReplicatedRoom.stallSeconds) s"
        for replica in replicas.values where replica.writeBarrier != nil || replica.barriers.joinCount > 0 {
            if let barrier = replica.writeBarrier, barrier.since <= cutoff { endBarrier(barrier, of: replica, failure: failure) }
            guard replica.barriers.joinCount > 0 else { continue }
            for barrier in replica.barriers.expiredJoins(beganBy: cutoff) { endBarrier(barrier, of: replica, failure: failure) }
        }
    }

    /// Takes `barrier` out of `replica` and answers its waiter: a JOIN as usual, from the replica
    /// as it is (after a failure too: reads go on without the log, as for a room whose follow
    /// broke); a write is validated again, first in the queue, or after a failure refused
    /// `storage_failure` (nothing was applied: a retry is safe). Nothing when the barrier has
    /// ended already.
    private func endBarrier(_ barrier: ReadBarrier, of replica: ReplicatedRoom, failure: String?) {
        switch barrier.waiter {
        case .join(let join):
            guard !barrier.ended else { return }
            barrier.ended = true
            replica.barriers.joinEnded()
            if let failure {
                hub.logger.debug(
                    "JOIN answered from a replica that may be behind",
                    metadata: ["room": "\(LogEscaping.line(replica.name))", "reason": "\(failure)"])
            }
            guard let room = replica.room else {
                hub.send(
                    Rejection(.storageFailure, "room \(LogEscaping.line(replica.name)) cannot be loaded from the cluster's log")
                        .message(requestID: join.requestID), to: join.session)
                hub.logAnswered(join.session)
                return
            }
            completeWaitingJoin(join, room: room)
        case .write(var write):
            guard replica.writeBarrier === barrier else { return }
            replica.writeBarrier = nil
            barrier.ended = true
            if let failure {
                refuse(
                    write,
                    Rejection(
                        .storageFailure,
                        "room \(LogEscaping.line(replica.name)): this node could not make sure its replica is up to date with the cluster's log (\(failure)); nothing was applied"
                    ))
            } else {
                write.barrierPassed = true
                replica.requeueFirst([write])
            }
            proposeNext(replica)
        }
    }

    /// Refuses with `rejection` the JOINs of `replica` that wait for a read barrier (it is being
    /// forgotten: `forgetReplica`); the write barrier is refused with its writes
    /// (`refuseWrites`).
    /// - Complexity: O(barriers of the room).
    func refuseBarriers(of replica: ReplicatedRoom, _ rejection: Rejection) {
        for barrier in replica.barriers.removeAllJoins() {
            barrier.ended = true
            guard case .join(let join) = barrier.waiter else { continue }
            hub.send(rejection.message(requestID: join.requestID), to: join.session)
            hub.logAnswered(join.session)
        }
    }

    /// Whether `outcome`, a refusal of `request` by the replica, is a compare-and-set expecting a
    /// version ahead of it: the client saw that version through another node (or is wrong), so
    /// it is decided after a barrier.
    /// - Complexity: O(1).
    static func expectsAheadOfReplica(_ request: Room.WriteRequest, _ outcome: Room.WriteOutcome, room: Room) -> Bool {
        guard case .rejected(let rejection) = outcome, rejection.code == .versionMismatch else { return false }
        let expected: UInt64?
        switch request {
        case .mutate(_, let version), .replace(_, let version), .replaceSection(_, _, let version): expected = version
        }
        return (expected ?? 0) > room.version
    }
}
