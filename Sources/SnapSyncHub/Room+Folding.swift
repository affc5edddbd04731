import SnapSyncModel
import SnapSyncWire
import SnapSyncStore

/// A version 3 catch-up folded into one DIFF (PROTOCOL.md §11.12): the frame a replica at
/// `from` gets, in place of the DIFFs of every version after it, to reach `to`.
struct FoldedCatchup {
    let epoch: UInt64
    let from: UInt64
    let to: UInt64
    /// The DIFF frame, at version `to`, with the room's chain at `to` at its end.
    let frame: OutputChunk
    /// The room's state digest at `to`, which the replica checks its state against.
    let digest: SnapshotDigest
    /// The room's chain at `to`: a fold computed off the loop is sent only to a room that still
    /// has this chain there (the same history, whatever slept, woke or was written meanwhile).
    let chain: RoomChain

    /// `job`'s outcome as a shared frame.
    init(job: FoldJob, outcome: FoldJob.Outcome) {
        (epoch, from, to, frame) = (job.epoch, job.from, job.to, .frozen(outcome.frame))
        (digest, chain) = (outcome.digest, job.chain)
    }
}

extension Room {
    /// What the memory budget counts for the resume base (`ResumeBase.byteCount`).
    var resumeBaseBytes: Int { resumeBase?.byteCount ?? 0 }

    /// Whether the room can rebuild its state at `version`: the base reaches back to it.
    func canFold(from version: UInt64) -> Bool {
        guard let resumeBase else { return false }
        return version >= resumeBase.version && version <= self.version
    }

    /// How the base rebuilds the state at `target`; nil when it does not reach back there.
    private func rebuild(at target: UInt64) -> FoldJob.Rebuild? {
        resumeBase?.rebuild(at: target, newest: version) { after, count in
            history.frames(after: after).map { $0.prefix(count).map(\.array) }
        }
    }

    /// The room's state at `version`, rebuilt by the resume base; nil when the base does not
    /// reach back to `version`.
    /// - Complexity: O(n) for the copy, plus the undos or the DIFFs.
    func state(atVersion target: UInt64) -> RoomSnapshot? {
        rebuild(at: target)?.state(before: snapshot)
    }

    /// What a fold of a replica at `from` to the room now is computed from (`FoldJob`); nil when
    /// the base does not reach back to `from`.
    /// - Complexity: `ResumeBase.rebuild`'s; the snapshot is shared (a write to the room while
    ///   the job holds it copies the room once).
    func foldJob(from: UInt64) -> FoldJob? {
        guard from < version, let rebuild = rebuild(at: from) else { return nil }
        return FoldJob(
            room: name, epoch: epoch, from: from, to: version, rebuild: rebuild, target: snapshot, chain: chain ?? .unknown,
            knownDigest: isDigestKnown ? digest : nil, limits: limits)
    }

    /// The catch-up of a replica at `from` folded into one DIFF to the room's version, computed
    /// here (`FoldJob.run`): the ops a REPLACE from the room at `from` to the room now would
    /// apply, chained and with the room's digest; nil when the base does not reach back to
    /// `from` or the DIFF would not fit the clients' frame limit. The last one is kept
    /// (`lastFold`): a crowd resuming from where a broadcast left them costs one fold.
    /// - Complexity: O(1) when it is the last one; else `FoldJob.run`'s, O(n) in the room.
    func foldedCatchup(from: UInt64) -> FoldedCatchup? {
        if let lastFold, lastFold.from == from, lastFold.to == version { return lastFold }
        guard let job = foldJob(from: from), let outcome = job.run() else { return nil }
        return keep(outcome, of: job)
    }

    /// The fold `outcome` of `job` as a shared frame, kept as `lastFold` while the room is still
    /// at the version it folds to.
    func keep(_ outcome: FoldJob.Outcome, of job: FoldJob) -> FoldedCatchup {
        let fold = FoldedCatchup(job: job, outcome: outcome)
        if epoch == job.epoch && version == job.to { lastFold = fold }
        return fold
    }
}

extension Room {
    /// Proves the room is consistent: its snapshot's invariants, and its resume base (when it
    /// keeps one) at a version its history reaches, from which the history's DIFFs rebuild
    /// exactly the room's state. Tests call it after every write.
    /// - Complexity: O(n log n) plus O(n + frames) for the rebuild.
    func checkInvariants() throws(InvariantViolation) {
        try snapshot.checkInvariants()
        try presence.checkInvariants()
        // Every member has a live presence entry; every watcher is a member.
        for member in members.sessions where presence.live(member.id) == nil {
            throw InvariantViolation(description: "room \(name): member \(member.id) has no presence entry")
        }
        for (id, watcher) in presenceWatchers where watcher.session.id != id || watcher.session.memberships[name] !== self || watcher.since > presenceFrames {
            throw InvariantViolation(description: "room \(name): watcher \(id) is not a member")
        }
        for (id, member) in windows {
            guard member.session.id == id, member.session.memberships[name] === self else {
                throw InvariantViolation(description: "room \(name): windowed member \(id) is not a member")
            }
            let expected = snapshot.windowSnapshot(member.window)
            guard member.snapshot == expected else {
                throw InvariantViolation(description: "room \(name): windowed member \(id) holds another window than \(member.window)")
            }
        }
        try checkWindowIndex()
        guard let resumeBase else { return }
        guard resumeBase.version >= history.baseVersion, resumeBase.version <= version, resumeBase.reaches(version) else {
            throw InvariantViolation(
                description: "room \(name): the resume base reaches from \(resumeBase.version), outside the history's \(history.baseVersion)...\(version)")
        }
        // The oldest state the base rebuilds, taken forward again by the history's DIFFs, is the
        // room: undos and DIFFs agree at every version in between.
        guard var state = state(atVersion: resumeBase.version), let frames = history.frames(after: resumeBase.version) else {
            throw InvariantViolation(description: "room \(name): the resume base does not reach its own version \(resumeBase.version)")
        }
        try state.checkInvariants()
        for frame in frames {
            guard HistoryBase.apply(diffFrame: frame.bytes, to: &state) else {
                throw InvariantViolation(description: "room \(name): a DIFF of the history does not apply to the state the resume base rebuilds")
            }
        }
        guard state == snapshot else {
            throw InvariantViolation(
                description: "room \(name): the resume base at version \(resumeBase.version) and the history's DIFFs do not rebuild the room at \(version)")
        }
    }
}
