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
    /// - Complexity: O(1) for version 2; for version 1, O(bytes of the DIFFs it would be sent),
    ///   each decoded once as version 1 decodes it.
    func answerJoin(_ room: Room, resume: RoomPosition?, for session: Session) -> Room.JoinAnswer {
        let answer = room.answerJoin(resume: resume)
        guard !ProtocolVersion.hasOutlines(session.protocolVersion), case .catchup(_, _, let frames) = answer else { return answer }
        let permissive = Self.replayLimits
        for frame in frames {
            let readable = (try? FrameDecoder.decode(frame: frame.bytes, limits: permissive, accepting: .server, version: session.protocolVersion)) != nil
            if !readable { return .snapshot(reason: .resync) }
        }
        return answer
    }

    /// Rule 3: `member` (version 1) is sent LEFT `outline_unsupported` in place of `room`'s DIFF,
    /// and is no longer a member.
    func leaveForOutline(_ member: Session, room: Room) {
        removeMember(member, from: room)
        send(
            .left(
                room: room.name, code: ErrorCode.outlineUnsupported.rawValue,
                message: "room \(LogEscaping.line(room.name)) became an outline, which protocol version \(member.protocolVersion) cannot show"),
            to: member)
    }

    /// History frames were checked against the room's limits when written; reading them back
    /// only asks whether version 1 has their ops.
    private static let replayLimits: WireLimits = {
        var limits = WireLimits()
        limits.maxFrameBytes = Int(UInt32.max)
        limits.model = .unlimited
        return limits
    }()
}
