import Logging
import SnapSyncAuth
import SnapSyncStore
import SnapSyncWire

// A room is created by its first write (or a SET_TTL before any write), and from then on costs
// disk until it ends: the quotas below are checked there, and only there, so a room that
// exists is never refused for them (PROTOCOL.md §6, quota_exceeded). Checked in this order,
// the first that fails answers: the rooms the store holds (`--max-stored-rooms`), the data
// directory's size (`--max-data-bytes`), the free space kept for the rooms that exist
// (`newRoomFreeBytes`), then the principal's creations per minute.

/// Why a new room was refused (STATS `rooms_refused`; the metric's `reason` label).
package enum RoomCreationRefusal: String, CaseIterable, Sendable {
    case storedRooms = "stored_rooms"
    case dataBytes = "data_bytes"
    case freeSpace = "free_space"
    case principal = "principal"
}

extension Hub {
    /// Whether `session` may create the room `name`, which `storedRooms` rooms already hold
    /// disk beside: nil when it may (one creation is taken from its principal's allowance),
    /// else the REJECT quota_exceeded to answer, counted and logged.
    /// - Complexity: O(1).
    func admitRoomCreation(_ name: String, storedRooms: Int, for session: Session) -> Rejection? {
        let configuration = self.configuration
        let room = LogEscaping.line(name)
        let refusal: (RoomCreationRefusal, String)?
        if storedRooms >= configuration.maxStoredRooms {
            refusal = (.storedRooms, "room \(room) cannot be created: this server holds \(storedRooms) rooms, its limit (--max-stored-rooms)")
        } else if configuration.maxDataBytes > 0, let usage = dataUsage, usage.bytes >= configuration.maxDataBytes {
            refusal = (
                .dataBytes,
                "room \(room) cannot be created: this server's data takes \(usage.bytes) bytes, its limit is \(configuration.maxDataBytes) (--max-data-bytes)"
            )
        } else if let usage = dataUsage, usage.freeBytes < configuration.newRoomFreeBytes {
            refusal = (
                .freeSpace,
                "room \(room) cannot be created: the server's disk has \(usage.freeBytes) bytes free, which it keeps for the rooms that exist"
            )
        } else if configuration.roomCreationsPerMinute > 0,
            !roomCreations.take(principalName(of: session), perMinute: configuration.roomCreationsPerMinute, now: monotonicNow())
        {
            refusal = (.principal, principalRefusal(room, for: session))
        } else {
            refusal = nil
        }
        guard let (reason, message) = refusal else { return nil }
        return refuseRoomCreation(room, reason, message, for: session)
    }

    /// Cluster mode, where the log's stream limits bound the rooms and only the principal's
    /// creations per minute are the node's: whether `session`'s principal has a creation left
    /// (nothing taken).
    func mayCreateRoom(_ session: Session) -> Bool {
        let perMinute = configuration.roomCreationsPerMinute
        return perMinute == 0 || roomCreations.hasAllowance(principalName(of: session), perMinute: perMinute, now: monotonicNow())
    }

    /// Cluster mode: takes one creation from `session`'s principal (a room's first write,
    /// proposed).
    func chargeRoomCreation(_ session: Session) {
        let perMinute = configuration.roomCreationsPerMinute
        guard perMinute > 0 else { return }
        _ = roomCreations.take(principalName(of: session), perMinute: perMinute, now: monotonicNow())
    }

    /// Cluster mode: the REJECT quota_exceeded of a principal out of creations, counted and
    /// logged.
    func refusePrincipalsRoomCreation(_ name: String, for session: Session) -> Rejection {
        let room = LogEscaping.line(name)
        return refuseRoomCreation(room, .principal, principalRefusal(room, for: session), for: session)
    }

    private func principalRefusal(_ room: String, for session: Session) -> String {
        "room \(room) cannot be created: \(LogEscaping.line(principalName(of: session))) created \(configuration.roomCreationsPerMinute) rooms in the last minute, its limit (--room-creations-per-minute): retry later"
    }

    private func refuseRoomCreation(_ room: String, _ reason: RoomCreationRefusal, _ message: String, for session: Session) -> Rejection {
        stats.roomsRefused[reason, default: 0] += 1
        logLimited(
            .notice, cause: "new room refused: \(reason.rawValue)", "new room refused (quota_exceeded)",
            metadata: session.logMetadata(["room": "\(room)", "reason": "\(reason.rawValue)", "message": "\(message)"]))
        return Rejection(.quotaExceeded, message)
    }

    /// Who a room creation is counted against: the token's or client certificate's subject,
    /// else the name the client gave in HELLO.
    func principalName(of session: Session) -> String {
        if let principal = session.principal { return "sub \(principal.subject)" }
        return "client \(session.clientName)"
    }
}
