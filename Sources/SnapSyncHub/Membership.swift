import SnapSyncWire

// Membership: which sessions are in which room. Both sides of it, a room's member list and a
// session's joined rooms, are changed only here, together, so that they cannot disagree.

/// A room's members in join order (swap-removed on leave).
package struct RoomMembers {
    fileprivate(set) var sessions: [Session] = []

    var count: Int { sessions.count }
}

/// The rooms a session has joined, by name, each with the session's slot in `RoomMembers`, so
/// that join and leave are O(1).
package struct SessionRooms {
    fileprivate var rooms: [RoomName: (room: Room, slot: Int)] = [:]

    var count: Int { rooms.count }
    package var isEmpty: Bool { rooms.isEmpty }
    /// The names of the rooms joined, in no particular order.
    var names: [String] { rooms.keys.map(\.string) }
    /// The joined room named `name`, or nil.
    subscript(name: String) -> Room? { rooms[RoomName(name)]?.room }

    /// Calls `body` with each joined room, in no particular order.
    func forEachRoom(_ body: (Room) -> Void) {
        for (_, membership) in rooms { body(membership.room) }
    }
}

extension Hub {
    /// Adds `session` to `room`'s members, and to its presence (Hub+Presence.swift). O(1)
    /// amortised.
    func addMember(_ session: Session, to room: Room) {
        guard session.memberships.rooms[RoomName(room.name)] == nil else { return }
        // The pending versions are in the joiner's SNAPSHOT already (Hub+Broadcast.swift).
        flushBroadcast(of: room)
        session.memberships.rooms[RoomName(room.name)] = (room, room.members.sessions.count)
        room.members.sessions.append(session)
        idleRooms.remove(room)
        memberJoinedPresence(session, room: room)
    }

    /// Removes `session` from `room`'s members, if it is one, and from its presence, saying why
    /// (PRESENCE_DIFF `left`). O(1): the last member takes the leaver's slot.
    func removeMember(_ session: Session, from room: Room, reason: PresenceDeparture) {
        guard session.memberships.rooms[RoomName(room.name)] != nil else { return }
        // A leaver gets the DIFFs made while it was a member (Hub+Broadcast.swift).
        flushBroadcast(of: room)
        guard let slot = session.memberships.rooms.removeValue(forKey: RoomName(room.name))?.slot else { return }
        memberLeftPresence(session, room: room, reason: reason)
        stopWindow(of: session, in: room)
        let last = room.members.sessions.removeLast()
        if last !== session {
            room.members.sessions[slot] = last
            last.memberships.rooms[RoomName(room.name)]?.slot = slot
        }
        // A memberless room's idle time starts (its TTL, LocalRoomEngine+Lifecycle.swift; its sleep,
        // LocalRoomEngine+Sleep.swift).
        if room.members.count == 0 {
            room.idleSince = monotonicNow()
            roomBecameIdle(room)
        }
    }

    /// Removes `session` from every room it joined.
    func leaveAllRooms(_ session: Session, reason: PresenceDeparture) {
        for (_, membership) in session.memberships.rooms {
            removeMember(session, from: membership.room, reason: reason)
        }
    }
}
