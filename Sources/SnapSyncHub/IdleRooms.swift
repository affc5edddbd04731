/// The memberless rooms, longest idle first: the candidates for sleeping (LocalRoomEngine+Sleep.swift).
///
/// A room is appended when it is created or woken (before any member joins), when its last
/// member leaves, and again (moved to the end) when a write is applied to it while it has no
/// member; it is removed when a member joins or when it is evicted. So the rooms are in the
/// order of the moment they last had a member or a write, the first being the one idle the
/// longest: the sweep evicts from the front and stops at the first room not idle long enough,
/// and a full daemon evicts the first one early.
///
/// The links live in the rooms (intrusive), unowned: every linked room is resident, owned by
/// `Hub.rooms`, and is removed from here before it leaves it. Unowned links also keep the
/// release of a long list from recursing once per room.
/// - Complexity: every operation O(1).
struct IdleRooms {
    private(set) unowned(unsafe) var first: Room?
    private unowned(unsafe) var last: Room?
    private(set) var count = 0

    /// Puts `room` at the end, idle since `now` (moving it if it is linked already).
    mutating func append(_ room: Room, now: ContinuousClock.Instant) {
        remove(room)
        room.idleSince = now
        room.idlePrevious = last
        room.idleNext = nil
        if let last { last.idleNext = room } else { first = room }
        last = room
        room.isIdle = true
        count += 1
    }

    /// Unlinks `room`, if it is linked.
    mutating func remove(_ room: Room) {
        guard room.isIdle else { return }
        if let previous = room.idlePrevious { previous.idleNext = room.idleNext } else { first = room.idleNext }
        if let next = room.idleNext { next.idlePrevious = room.idlePrevious } else { last = room.idlePrevious }
        room.idlePrevious = nil
        room.idleNext = nil
        room.isIdle = false
        count -= 1
    }
}
