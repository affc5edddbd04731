import SnapSyncModel
import SnapSyncWire

// Resuming with one DIFF (PROTOCOL.md §11.12, the folded CATCHUP): a version 3 replica whose
// resume the history can serve gets the net change since its version as one DIFF, computed from
// the room's resume base (ResumeBase.swift, Room+Folding.swift), whenever that is smaller than
// the DIFFs it missed. What it saves grows with the versions missed; what it costs is O(n) in
// the room, on the loop, so it is tried only where it can pay, and large rooms are bounded.

extension Hub {
    /// `answer`, or the same catch-up folded into one DIFF when `session` speaks version 3, the
    /// room's base reaches back to the resume, the room is at most `foldMaxBytes`, and the
    /// folded DIFF is smaller than the replayed ones (and their chains).
    /// - Complexity: O(frames replayed) to weigh the replay; when a fold is computed, O(n) in
    ///   the room plus the DIFFs from its base; for rooms over `foldFreeBytes`, at most one
    ///   such fold per `foldInterval` in the whole daemon (a resume in between is replayed: the
    ///   answer is still right, only larger), so that resumes cannot keep the loop folding.
    func folding(_ answer: Room.JoinAnswer, of room: Room, for session: Session) -> Room.JoinAnswer {
        guard ProtocolVersion.hasChain(version: session.protocolVersion), case .catchup(let from, let to, let frames) = answer,
            to - from >= 2, room.canFold(from: from), room.snapshot.canonicalByteCount <= configuration.foldMaxBytes
        else { return answer }
        let replayBytes = frames.reduce(0) { $0 + $1.count + RoomChain.byteCount }
        guard replayBytes >= configuration.foldMinimumReplayBytes else { return answer }
        let isCurrent = room.lastFold.map { $0.from == from && $0.to == to } ?? false
        if !isCurrent && room.snapshot.canonicalByteCount > configuration.foldFreeBytes {
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

    /// Queues a folded catch-up: the CATCHUP naming the state digest, then its one DIFF.
    func sendFolded(_ fold: FoldedCatchup, requestID: UInt64, of room: Room, to session: Session) {
        send(
            .catchup(
                requestID: requestID, room: room.name, epoch: room.epoch, fromVersion: fold.from, toVersion: fold.to,
                form: .folded(digest: fold.digest)), to: session)
        send(shared: fold.frame, to: session)
    }
}
