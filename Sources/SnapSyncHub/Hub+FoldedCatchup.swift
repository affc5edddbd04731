import SnapSyncModel
import SnapSyncWire

// Resuming with one DIFF (PROTOCOL.md §11.12, the folded CATCHUP): a version 3 replica whose
// resume the history can serve gets the net change since its version as one DIFF, computed from
// the room's resume base (ResumeBase.swift, Room+Folding.swift), whenever that is smaller than
// the DIFFs it missed. What it saves grows with the versions missed; what it costs is O(n) in
// the room, so it is tried only where it can pay, and bounded for large rooms as VERIFY is.

extension Hub {
    /// The smallest answer to a resume the history can serve: `answer` (the DIFFs since the
    /// resume), the same catch-up folded into one DIFF, or the room's SNAPSHOT (`resync`) when
    /// the DIFFs would be larger than it and cannot be folded (PROTOCOL.md §9: a window of
    /// 16,384 versions can hold far more DIFF bytes than a small room's state).
    ///
    /// Folded when `session` speaks version 3, the room's base reaches back to the resume, the
    /// room is at most `foldMaxBytes`, and the folded DIFF is smaller than the replayed ones
    /// (with their chains).
    /// - Complexity: O(frames replayed) to weigh the replay; when a fold is computed, O(n) in
    ///   the room plus the DIFFs from its base; for rooms over `foldFreeBytes`, at most one
    ///   such fold per `foldInterval` in the whole daemon (a resume in between is replayed: the
    ///   answer is still right, only larger), so that resumes cannot keep the loop folding.
    func cheapestAnswer(_ answer: Room.JoinAnswer, of room: Room, for session: Session) -> Room.JoinAnswer {
        guard case .catchup(let from, let to, let frames) = answer, to > from else { return answer }
        let chained = ProtocolVersion.hasChain(version: session.protocolVersion)
        let replayBytes = frames.reduce(0) { $0 + $1.count + (chained ? RoomChain.byteCount : 0) }
        if chained, let fold = fold(from: from, to: to, replayBytes: replayBytes, of: room) { return .folded(fold) }
        // A SNAPSHOT frame is the canonical encoding plus a header of well under 256 bytes. Only
        // a replay of some size is worth a resync, which makes a replica start over: below 64 KiB
        // the DIFFs are sent whatever the room's size, as before the window grew.
        if replayBytes > max(room.snapshot.canonicalByteCount + 256, 64 * 1024) {
            stats.resumesSentSnapshot += 1
            return .snapshot(reason: .resync)
        }
        return answer
    }

    /// The catch-up from `from` to `to` folded, when that pays and the loop's budget allows.
    private func fold(from: UInt64, to: UInt64, replayBytes: Int, of room: Room) -> FoldedCatchup? {
        let size = room.snapshot.canonicalByteCount
        guard to - from >= 2, room.canFold(from: from), replayBytes >= configuration.foldMinimumReplayBytes, size <= configuration.foldMaxBytes
        else { return nil }
        let isCurrent = room.lastFold.map { $0.from == from && $0.to == to } ?? false
        if !isCurrent && size > configuration.foldFreeBytes {
            let now = monotonicNow()
            if let last = lastLargeFold, now - last < configuration.foldInterval {
                stats.foldsDeferred += 1
                return nil
            }
            lastLargeFold = now
        }
        guard let fold = room.foldedCatchup(from: from), fold.frame.count + 1 + SnapshotDigest.byteCount < replayBytes else { return nil }
        stats.foldedCatchups += 1
        return fold
    }

    /// Queues a folded catch-up: the CATCHUP naming the state digest, then its one DIFF.
    func sendFolded(_ fold: FoldedCatchup, requestID: UInt64, of room: Room, to session: Session) {
        send(
            .catchup(
                requestID: requestID, room: room.name, epoch: room.epoch, fromVersion: fold.from, toVersion: fold.to,
                form: .folded(digest: fold.digest)), to: session)
        send(shared: fold.frame, to: session)
    }
}
