import SnapSyncModel
import SnapSyncWire

// Resuming with one DIFF (PROTOCOL.md §11.12, the folded CATCHUP): a version 3 replica whose
// resume the history can serve gets the net change since its version as one DIFF, computed from
// the room's resume base (ResumeBase.swift, Room+Folding.swift), whenever that is smaller than
// the DIFFs it missed. What it saves grows with the versions missed; what it costs is O(n) in
// the room, so it is tried only where it can pay, and a large room's fold runs off the loop:
//
// - a room of at most `foldFreeBytes` is folded on the loop, at the JOIN (about 2 ms at most);
// - a larger one (up to `foldMaxBytes`) is folded by the `OffLoopWorker` while the JOIN waits as
//   a cluster JOIN waits for the log (`awaitLog`: the session's later frames are kept, in order).
//   JOINs resuming from the same version of the same room wait for the same fold, and at most
//   `maxFoldsInFlight` distinct folds run at once in the whole daemon (a resume beyond that is
//   replayed: the answer is still right, only larger). When the fold is done, each waiting JOIN
//   is handled again through the engine (the room may have been written, put to sleep, woken or
//   ended meanwhile) with the fold at hand: it is sent, followed by the DIFFs after it, if the
//   room still has the same history at the version folded to and that is smaller than the
//   replay; otherwise the JOIN is answered as any other;
// - without a worker (the hub's unit tests), a large fold runs on the loop, at most one per
//   `foldInterval` in the whole daemon.

extension Hub {
    /// A fold running off the loop: which room incarnation, from which version to which.
    struct FoldKey: Hashable {
        let room: String
        let epoch: UInt64
        let from: UInt64
        let to: UInt64
    }

    /// A JOIN that waits for a fold.
    struct FoldWaiter {
        let session: Session
        let requestID: UInt64
        let resume: ResumePoint?
    }

    /// Distinct folds running off the loop at once in the whole daemon: each holds the room's
    /// base and state (shared, copied by the room's next write) and builds a copy of the state at
    /// the replica's version, so this bounds the memory folding can take beyond the rooms'.
    static let maxFoldsInFlight = 4

    /// `answer`, or the same catch-up folded into one DIFF when `session` speaks version 3, the
    /// room's base reaches back to the resume, the room is at most `foldMaxBytes`, and the
    /// folded DIFF is smaller than the replayed ones (and their chains); nil when the JOIN now
    /// waits for a fold computed off the loop (`foldOffLoop`).
    /// - Complexity: O(frames replayed) to weigh the replay; when a fold is computed here, O(n)
    ///   in the room plus the DIFFs from its base.
    func cheapestAnswer(
        _ answer: Room.JoinAnswer, of room: Room, requestID: UInt64, resume: ResumePoint?, for session: Session
    ) -> Room.JoinAnswer? {
        let done = session.foldDone.flatMap { $0.requestID == requestID ? $0 : nil }
        if done != nil { session.foldDone = nil }
        guard ProtocolVersion.hasChain(version: session.protocolVersion), case .catchup(let from, let to, let frames) = answer,
            to - from >= 2
        else { return answer }
        if let done {
            // Handled again once its fold was computed: never folded twice.
            guard let fold = done.fold, fold.from == from, fold.epoch == room.epoch, fold.to <= to,
                room.chain(atVersion: fold.to) == fold.chain, fold.chain != .unknown
            else { return answer }
            let replaced = frames.prefix(Int(fold.to - from)).reduce(0) { $0 + $1.count + RoomChain.byteCount }
            guard fold.frame.count + 1 + SnapshotDigest.byteCount < replaced else { return answer }
            stats.foldedCatchups += 1
            return .folded(fold)
        }
        let size = room.snapshot.canonicalByteCount
        guard room.canFold(from: from), size <= configuration.foldMaxBytes else { return answer }
        let replayBytes = frames.reduce(0) { $0 + $1.count + RoomChain.byteCount }
        guard replayBytes >= configuration.foldMinimumReplayBytes else { return answer }
        let isCurrent = room.lastFold.map { $0.from == from && $0.to == to } ?? false
        if !isCurrent && size > configuration.foldFreeBytes {
            if let worker = offLoopWorker {
                return foldOffLoop(room, from: from, waiter: FoldWaiter(session: session, requestID: requestID, resume: resume), on: worker)
                    ? nil : answer
            }
            let now = monotonicNow()
            if let last = lastLargeFold, now - last < configuration.foldInterval {
                stats.foldsDeferred += 1
                return answer
            }
            lastLargeFold = now
        }
        guard let fold = room.foldedCatchup(from: from), fold.frame.count + 1 + SnapshotDigest.byteCount < replayBytes else {
            return answer
        }
        stats.foldedCatchups += 1
        return .folded(fold)
    }

    /// Hands the fold of `room` from `from` to its version to `worker`, or joins a fold of the
    /// same already running; the waiter's session waits meanwhile. False (the resume is then
    /// replayed, counted in `foldsDeferred`) when `maxFoldsInFlight` other folds are running.
    private func foldOffLoop(_ room: Room, from: UInt64, waiter: FoldWaiter, on worker: any OffLoopWorker) -> Bool {
        let key = FoldKey(room: room.name, epoch: room.epoch, from: from, to: room.version)
        if foldsInFlight[key] != nil {
            foldsInFlight[key]!.append(waiter)
            awaitLog(waiter.session)
            return true
        }
        guard foldsInFlight.count < Self.maxFoldsInFlight, let job = room.foldJob(from: from) else {
            stats.foldsDeferred += 1
            return false
        }
        foldsInFlight[key] = [waiter]
        awaitLog(waiter.session)
        worker.perform({ job.run() }) { [weak self, weak room] outcome in
            self?.foldFinished(key, job: job, outcome: outcome, room: room)
        }
        return true
    }

    /// A fold computed off the loop: every JOIN that waited for it is handled again, through
    /// the engine, with the fold at hand (`Session.foldDone`), then its session's later frames.
    private func foldFinished(_ key: FoldKey, job: FoldJob, outcome: FoldJob.Outcome?, room: Room?) {
        let waiters = foldsInFlight.removeValue(forKey: key) ?? []
        let fold = outcome.map { room?.keep($0, of: job) ?? FoldedCatchup(job: job, outcome: $0) }
        for waiter in waiters where !waiter.session.isEnded && waiter.session.state != .closing {
            let session = waiter.session, waits = session.logWaits
            session.foldDone = (waiter.requestID, fold)
            engine.join(requestID: waiter.requestID, roomName: key.room, resume: waiter.resume, from: session)
            // Answered or refused at once, the fold is done with (it may hold a large frame);
            // deferred (a cluster room loading), the JOIN's later answer takes it.
            if session.logWaits == waits { session.foldDone = nil }
        }
        for waiter in waiters { logAnswered(waiter.session) }
        resumeSessions()
    }

    /// Queues a folded catch-up: the CATCHUP naming the state digest, its one DIFF, then the
    /// room's DIFFs after the version it folds to (written while it was computed off the loop).
    func sendFolded(_ fold: FoldedCatchup, requestID: UInt64, of room: Room, to session: Session) {
        send(
            .catchup(
                requestID: requestID, room: room.name, epoch: room.epoch, fromVersion: fold.from, toVersion: fold.to,
                form: .folded(digest: fold.digest)), to: session)
        send(shared: fold.frame, to: session)
        if fold.to < room.version, let after = room.history.frames(after: fold.to) {
            sendHistory(after, after: fold.to, of: room, to: session)
        }
    }
}
