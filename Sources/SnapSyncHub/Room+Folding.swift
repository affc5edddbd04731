import SnapSyncModel
import SnapSyncWire

/// A version 3 catch-up folded into one DIFF (PROTOCOL.md §11.12): the frame a replica at
/// `from` gets, in place of the DIFFs of every version after it, to reach `to`.
struct FoldedCatchup {
    let from: UInt64
    let to: UInt64
    /// The DIFF frame, at version `to`, with the room's chain at `to` at its end.
    let frame: OutputChunk
    /// The room's state digest at `to`, which the replica checks its state against.
    let digest: SnapshotDigest
}

extension Room {
    /// What the memory budget counts for the resume base: its canonical encoding once it has
    /// parted from the room's snapshot (a write since it was taken), nothing before.
    var resumeBaseBytes: Int {
        guard let resumeBase, resumeBase.version < version else { return 0 }
        return resumeBase.snapshot.canonicalByteCount
    }

    /// Whether the room can rebuild its state at `version`: the base reaches back to it.
    func canFold(from version: UInt64) -> Bool {
        guard let resumeBase else { return false }
        return version >= resumeBase.version && version <= self.version
    }

    /// The room's state at `version`, rebuilt from the resume base and the history's DIFFs after
    /// it; nil when the base does not reach back to `version`.
    /// - Complexity: O(n) for the copy of the base the first apply makes, plus the DIFFs.
    func state(atVersion target: UInt64) -> Snapshot? {
        guard canFold(from: target), let base = resumeBase, let frames = history.frames(after: base.version) else { return nil }
        var state = base.snapshot
        for frame in frames.prefix(Int(target - base.version)) {
            guard ResumeBase.applying(frame.bytes, to: &state) else { return nil }
        }
        return state
    }

    /// The catch-up of a replica at `from` folded into one DIFF to the room's version: the ops a
    /// REPLACE from the room at `from` to the room now would apply, chained and with the room's
    /// digest; nil when the base does not reach back to `from` or the DIFF would not fit the
    /// clients' frame limit. The last one is kept (`lastFold`): a crowd resuming from where a
    /// broadcast left them costs one fold.
    /// - Complexity: O(1) when it is the last one; else O(n) in the room (a copy of the base,
    ///   the diff, the digest) plus the DIFFs since the base.
    func foldedCatchup(from: UInt64) -> FoldedCatchup? {
        if let lastFold, lastFold.from == from, lastFold.to == version { return lastFold }
        guard from < version, let old = state(atVersion: from) else { return nil }
        // Limited: every prefix of the DIFF applies under the room's limits, as replicas check.
        let ops = old.difference(to: snapshot, limits: limits.model)
        var frame: [UInt8] = []
        let size = FrameEncoder().encodeDiff(room: name, epoch: epoch, version: version, ops: ops, into: &frame)
        guard checkFrameSize(size + RoomChain.byteCount) == nil else { return nil }
        let chained = frame.withUnsafeBytes { RoomChain.chainedDiffFrame($0, chain: chain ?? .unknown) }
        let fold = FoldedCatchup(from: from, to: version, frame: .frozen(chained), digest: digest)
        lastFold = fold
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
        guard let resumeBase else { return }
        guard resumeBase.version >= history.baseVersion, resumeBase.version <= version else {
            throw InvariantViolation(
                description: "room \(name): the resume base is at version \(resumeBase.version), outside the history's \(history.baseVersion)...\(version)")
        }
        try resumeBase.snapshot.checkInvariants()
        guard state(atVersion: version) == snapshot else {
            throw InvariantViolation(
                description: "room \(name): the resume base at version \(resumeBase.version) and the history's DIFFs do not rebuild the room at \(version)")
        }
    }
}
