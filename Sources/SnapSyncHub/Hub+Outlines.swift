import SnapSyncModel
import SnapSyncWire

// What a version 1 connection sees of outlines (PROTOCOL.md §8.2): it never joins an outline
// room, never resumes across a DIFF with a version 2 op, and is sent LEFT `outline_unsupported`
// when a write makes its room an outline. Version 2 sessions are not affected.

extension Hub {
    /// Rule 1: a version 1 session's JOIN of an outline room is refused.
    /// - Complexity: O(1).
    func refuseOutline(_ room: Room, to session: Session) -> Rejection? {
        guard !ProtocolVersion.hasOutlines(session.protocolVersion), room.snapshot.isOutline else { return nil }
        return Rejection(
            .outlineUnsupported,
            "room \(LogEscaping.line(room.name)) is an outline, which protocol version \(session.protocolVersion) cannot show; join with version 2")
    }

    /// How to answer `session`'s JOIN of `room` (`Room.answerJoin`), with rule 2: a version 1
    /// session gets SNAPSHOT `resync` instead of a CATCHUP whose DIFFs it could not read.
    /// - Complexity: O(1), but for the first version 1 resume of a room (resident), which scans
    ///   its history once (`outlineOpVersion(of:)`).
    func answerJoin(_ room: Room, resume: ResumePoint?, for session: Session) -> Room.JoinAnswer {
        let answer = room.answerJoin(resume: resume)
        guard !ProtocolVersion.hasOutlines(session.protocolVersion), case .catchup(let from, _, _) = answer else { return answer }
        return outlineOpVersion(of: room) > from ? .snapshot(reason: .resync) : answer
    }

    /// The newest version of `room`'s history whose DIFF holds a version 2 op (0: none), decoded
    /// once and then kept up to date by `Room.commit`.
    /// - Complexity: O(bytes of the history) the first time, O(1) after.
    private func outlineOpVersion(of room: Room) -> UInt64 {
        if let known = room.lastOutlineOpVersion { return known }
        var newest: UInt64 = 0
        let base = room.history.baseVersion
        for (offset, frame) in (room.history.frames(after: base) ?? []).enumerated() {
            let message = try? FrameDecoder.decode(frame: frame.bytes, limits: .permissive, accepting: .server)
            if case .diff(_, _, _, let ops, _)? = message, ops.contains(where: \.isOutlineOperation) {
                newest = base + UInt64(offset) + 1
            }
        }
        room.lastOutlineOpVersion = newest
        return newest
    }

    /// Rule 3: `member` (version 1) is sent LEFT `outline_unsupported` in place of `room`'s DIFF,
    /// and is no longer a member.
    func leaveForOutline(_ member: Session, room: Room) {
        removeMember(member, from: room, reason: .removed)
        send(
            .left(
                room: room.name, code: ErrorCode.outlineUnsupported.rawValue,
                message: "room \(LogEscaping.line(room.name)) became an outline, which protocol version \(member.protocolVersion) cannot show"),
            to: member)
    }
}
