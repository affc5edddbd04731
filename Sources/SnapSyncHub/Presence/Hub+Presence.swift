// Date only: FoundationEssentials, not all of Foundation, where it exists.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import SnapSyncAuth
package import SnapSyncWire
import DequeModule

// Presence (PROTOCOL.md §9, "Presence"; §11.24–§11.28): membership feeds each room's
// `RoomPresence`; watchers get its view, then one PRESENCE_DIFF per room per presence interval,
// encoded once and shared. Nothing here is logged or stored: presence ends with the process.

/// Cluster mode: carries a node's presence changes to the other nodes, and asks them for
/// theirs (SnapSyncCluster's `PresenceExchange`). The hub calls it on the loop thread.
package protocol PresenceRelay: AnyObject {
    /// A local member of `room` joined or changed its state (`member`), or left (`member` nil,
    /// for `reason`).
    func localPresenceChanged(room: String, memberID: UInt64, member: PresenceMember?, reason: PresenceDeparture)
    /// The node now has members of `room` (`active`), or no longer has: it follows the other
    /// nodes' presence of the room only while it has.
    func presenceInterest(room: String, active: Bool)
}

extension Hub {
    /// The longest a room's presence waits between two PRESENCE_DIFFs, whatever its watchers.
    static let maxPresenceInterval: Duration = .seconds(1)
    /// Watchers per step of the presence interval: a room with n watchers waits
    /// `presenceInterval` × ⌈n / this⌉, so its presence costs at most about 20,000 deliveries a
    /// second at the default interval, however large it is.
    static let presenceWatchersPerStep = 1_000
    /// Watchers handed a PRESENCE_DIFF per turn of the presence timer, all rooms together: a
    /// large room's frame reaches its watchers over several loop passes, so that one pass never
    /// writes to more sockets than this for presence (a bystander waits for at most one such
    /// slice). 32 measured best against 1,000 and 64 (docs/benchmarks.md, "Presence"); a frame
    /// still reaches 10,000 watchers in about 313 passes, well within the room's interval.
    static let presenceDeliveriesPerPass = 32

    // MARK: Membership

    /// `session` became a member of `room`: its entry, with no state yet.
    func memberJoinedPresence(_ session: Session, room: Room) {
        let member = PresenceMember(
            memberID: session.id, principal: session.principal?.subject ?? session.clientName,
            joinedAt: UInt64(max(0, (wallClock().timeIntervalSince1970 * 1000).rounded(.down))))
        room.presence.upsert(member)
        if room.members.count == 1 { presenceRelay?.presenceInterest(room: room.name, active: true) }
        presenceRelay?.localPresenceChanged(room: room.name, memberID: member.memberID, member: member, reason: .left)
        presenceChanged(in: room)
    }

    /// `session` is no longer a member of `room`: out of its memberships, not yet out of
    /// `room.members` (Membership.swift).
    func memberLeftPresence(_ session: Session, room: Room, reason: PresenceDeparture) {
        room.presenceWatchers[session.id] = nil
        room.presence.remove(session.id, reason: reason)
        presenceRelay?.localPresenceChanged(room: room.name, memberID: session.id, member: nil, reason: reason)
        // `room.members` still holds the leaver here: it was the last when the count is 1.
        if room.members.count == 1 { presenceRelay?.presenceInterest(room: room.name, active: false) }
        presenceChanged(in: room)
    }

    // MARK: Other nodes' members (cluster mode)

    /// Another node's member of `roomName` joined or changed its state. Ignored when the room
    /// is not resident here: the node follows a room's presence only while it has members of
    /// it, and then asks for the room's whole presence (`PresenceRelay.presenceInterest`).
    package func remotePresenceChanged(room roomName: String, _ member: PresenceMember) {
        guard let room = rooms[RoomName(roomName)], room.presence.live(member.memberID) != member else { return }
        room.presence.upsert(member)
        presenceChanged(in: room)
    }

    /// Another node's member of `roomName` left, or its node was lost (`nodeLost`).
    package func remotePresenceLeft(room roomName: String, memberID: UInt64, reason: PresenceDeparture) {
        guard let room = rooms[RoomName(roomName)], room.presence.live(memberID) != nil,
            sessions[memberID] == nil
        else { return }
        room.presence.remove(memberID, reason: reason)
        presenceChanged(in: room)
    }

    /// The live presence of `roomName` on this node: its local members' entries, for a node
    /// that asks (cluster mode). Empty when the room is not resident.
    package func localPresence(room roomName: String) -> [PresenceMember] {
        guard let room = rooms[RoomName(roomName)] else { return [] }
        return room.members.sessions.compactMap { room.presence.live($0.id) }
    }

    /// Member ids of `roomName` this node holds for other nodes (cluster mode): the entries
    /// whose session is not local.
    package func remotePresenceIDs(room roomName: String) -> [UInt64] {
        guard let room = rooms[RoomName(roomName)] else { return [] }
        return room.presence.liveIDs.filter { sessions[$0] == nil }
    }

    // MARK: Requests

    /// PRESENCE_WATCH (§11.24).
    func watchPresence(requestID: UInt64, roomName: String, watch: Bool, from session: Session) {
        guard let room = presenceRoom(requestID: requestID, roomName: roomName, for: session) else { return }
        guard watch else {
            room.presenceWatchers[session.id] = nil
            send(.ack(requestID: requestID, epoch: 0, version: 0), to: session)
            return
        }
        publishIfUnwatched(room)
        room.presenceWatchers[session.id] = (session, room.presenceFrames)
        sendPresencePage(requestID: requestID, of: room, after: 0, limit: configuration.wire.presenceView, to: session)
    }

    /// PRESENCE_LIST (§11.25).
    func listPresence(requestID: UInt64, roomName: String, after: UInt64, limit: UInt64, from session: Session) {
        guard let room = presenceRoom(requestID: requestID, roomName: roomName, for: session) else { return }
        publishIfUnwatched(room)
        let view = configuration.wire.presenceView
        sendPresencePage(requestID: requestID, of: room, after: after, limit: limit == 0 ? view : Int(min(limit, UInt64(view))), to: session)
    }

    /// The PRESENCE answering a watch or a list: the room's count and a page of its published
    /// members. O(log n + limit).
    private func sendPresencePage(requestID: UInt64, of room: Room, after: UInt64, limit: Int, to session: Session) {
        let page = room.presence.page(after: after, limit: limit)
        stats.presenceFramesOut += 1
        send(
            .presence(requestID: requestID, room: room.name, count: UInt64(room.presence.count), members: page.members, next: page.next),
            to: session)
    }

    /// SET_PRESENCE (§11.26): bounded in size and, per connection, in rate (a token bucket of
    /// `presenceUpdatesPerSecond`, refilled continuously).
    func setPresence(requestID: UInt64, roomName: String, state: [UInt8], from session: Session) {
        guard let room = presenceRoom(requestID: requestID, roomName: roomName, for: session) else { return }
        let limit = configuration.wire.maxPresenceBytes
        guard state.count <= limit else {
            send(
                Rejection(.payloadTooLarge, "presence state of \(state.count) bytes for room \(LogEscaping.line(roomName)), over the limit of \(limit)")
                    .message(requestID: requestID), to: session)
            return
        }
        let rate = Double(configuration.presenceUpdatesPerSecond)
        let now = monotonicNow()
        var allowance = session.presenceUpdates ?? TokenBucket(capacity: rate, now: now)
        let allowed = allowance.take(capacity: rate, perSecond: rate, now: now)
        session.presenceUpdates = allowance
        guard allowed else {
            stats.requestsBusy += 1
            stats.presenceUpdatesRefused += 1
            send(
                Rejection(
                    .busy,
                    "presence updates on this connection passed \(configuration.presenceUpdatesPerSecond) a second; the state of room \(LogEscaping.line(roomName)) is unchanged"
                ).message(requestID: requestID), to: session)
            return
        }
        stats.presenceUpdates += 1
        if room.presence.live(session.id)?.state != state {
            room.presence.setState(session.id, state)
            presenceRelay?.localPresenceChanged(room: room.name, memberID: session.id, member: room.presence.live(session.id), reason: .left)
            presenceChanged(in: room)
        }
        send(.ack(requestID: requestID, epoch: 0, version: 0), to: session)
    }

    /// A room nobody watches owes no one a PRESENCE_DIFF: its pending changes are published
    /// before it is read, so that a PRESENCE describes it as of now (§9, "Order").
    private func publishIfUnwatched(_ room: Room) {
        if room.presenceWatchers.isEmpty { room.presence.applyPending() }
    }

    /// The joined room a presence request names, or nil after answering REJECT `not_joined`.
    private func presenceRoom(requestID: UInt64, roomName: String, for session: Session) -> Room? {
        if let room = session.memberships[roomName] { return room }
        send(
            Rejection(.notJoined, "this connection has not joined room \(LogEscaping.line(roomName)), whose presence only members see")
                .message(requestID: requestID), to: session)
        return nil
    }

    // MARK: Coalescing

    /// `room`'s presence changed: it waits for its next interval in the queue, watched or not,
    /// so that a storm of joins costs one merge of the room's ids per interval, not one per join.
    func presenceChanged(in room: Room) {
        guard !room.isPresenceQueued else { return }
        room.isPresenceQueued = true
        presenceQueue.append(room)
        if !isPresenceTimerArmed {
            isPresenceTimerArmed = true
            presenceTimerNeeded(configuration.presenceInterval)
        }
    }

    /// The presence interval of a room with `watchers` watchers (§9, "Coalescing").
    func presenceInterval(watchers: Int) -> Duration {
        let steps = max(1, (watchers + Self.presenceWatchersPerStep - 1) / Self.presenceWatchersPerStep)
        return min(Self.maxPresenceInterval, configuration.presenceInterval * steps)
    }

    /// The presence timer fired: the deliveries under way go on, then each queued room whose
    /// interval has passed (and whose previous frame has reached all its watchers) makes its
    /// PRESENCE_DIFF; at most `presenceDeliveriesPerPass` watchers are handed a frame in all.
    /// Returns when to fire again: at once (the next loop pass, after this one's flush) while
    /// deliveries remain, else when the next queued room is due; nil when nothing waits.
    /// - Complexity: O(queued rooms) plus each flushed room's `RoomPresence.flush`, plus the
    ///   deliveries (O(1) each, a shared frame).
    package func flushPresence(now: ContinuousClock.Instant) -> Duration? {
        isPresenceTimerArmed = false
        var budget = deliverPresence(budget: Self.presenceDeliveriesPerPass)
        var next: Duration?
        var waiting: [Room] = []
        for room in presenceQueue {
            let interval = presenceInterval(watchers: room.presenceWatchers.count)
            if room.isPresenceDelivering {
                waiting.append(room)
                continue
            }
            if let last = room.presenceFlushedAt, now - last < interval {
                waiting.append(room)
                next = min(next ?? interval, interval - (now - last))
                continue
            }
            room.isPresenceQueued = false
            makePresenceDiff(of: room, now: now)
            if budget > 0 { budget = deliverPresence(budget: budget) }
        }
        presenceQueue = waiting
        if !presenceDeliveries.isEmpty { next = .zero }
        isPresenceTimerArmed = next != nil
        return next
    }

    /// Publishes `room`'s pending presence and, when its watchers see a change, queues its
    /// PRESENCE_DIFF, encoded once, for every watcher it has now.
    private func makePresenceDiff(of room: Room, now: ContinuousClock.Instant) {
        guard !room.presenceWatchers.isEmpty else {
            room.presence.applyPending()
            return
        }
        guard let (count, changes) = room.presence.flush(view: configuration.wire.presenceView) else { return }
        room.presenceFlushedAt = now
        room.presenceFrames += 1
        room.isPresenceDelivering = true
        stats.presenceChanges += UInt64(changes.count)
        presenceDeliveries.append(
            PresenceDelivery(
                room: room, sequence: room.presenceFrames,
                frame: .frozen(FrameEncoder().encode(.presenceDiff(room: room.name, count: UInt64(count), changes: changes))),
                watchers: room.presenceWatchers.values.map(\.session)))
    }

    /// Hands queued PRESENCE_DIFFs to their watchers, oldest first, at most `budget` of them;
    /// returns what is left of it. A watcher that stopped watching since, or that started after
    /// the frame was made (its PRESENCE already holds the change), is skipped.
    private func deliverPresence(budget: Int) -> Int {
        var budget = budget
        while budget > 0, !presenceDeliveries.isEmpty {
            let room = presenceDeliveries[presenceDeliveries.startIndex].room
            let sequence = presenceDeliveries[presenceDeliveries.startIndex].sequence
            let frame = presenceDeliveries[presenceDeliveries.startIndex].frame
            while budget > 0, let watcher = presenceDeliveries[presenceDeliveries.startIndex].nextWatcher() {
                guard let watch = room.presenceWatchers[watcher.id], watch.session === watcher, watch.since < sequence else { continue }
                budget -= 1
                stats.presenceFramesOut += 1
                send(shared: frame, to: watcher, type: .presenceDiff)
            }
            guard presenceDeliveries[presenceDeliveries.startIndex].isDone else { break }
            room.isPresenceDelivering = false
            presenceDeliveries.removeFirst()
        }
        return budget
    }
}

/// One PRESENCE_DIFF on its way to the watchers its room had when it was made.
struct PresenceDelivery {
    let room: Room
    /// The room's frame number (`Room.presenceFrames`).
    let sequence: UInt64
    let frame: OutputChunk
    private let watchers: [Session]
    private var nextIndex = 0

    init(room: Room, sequence: UInt64, frame: OutputChunk, watchers: [Session]) {
        self.room = room
        self.sequence = sequence
        self.frame = frame
        self.watchers = watchers
    }

    var isDone: Bool { nextIndex == watchers.count }

    mutating func nextWatcher() -> Session? {
        guard nextIndex < watchers.count else { return nil }
        defer { nextIndex += 1 }
        return watchers[nextIndex]
    }
}
