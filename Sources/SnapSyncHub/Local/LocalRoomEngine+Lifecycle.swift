import Logging
import SnapSyncAuth
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Rooms that end (PROTOCOL.md §9, "Rooms that end" and "Expiry"): DROP deletes a room,
// SET_TTL gives it a time-to-live, and a room whose TTL passed with no member and no write
// expires. An ended room's members get LEFT, its state goes, its name is free (the next use
// creates a room with a new epoch), and the store logs a tombstone so that no restart brings
// it back.

/// What the expiry sweep needs besides the rooms.
struct RoomLifecycle {
    /// Some room may carry a TTL of its own (SET_TTL, or one restored): without it and without
    /// `--room-ttl`, the sweep has nothing to look at. Never reset: a false positive costs a
    /// scan, a false negative a room that never expires.
    var roomsMayHaveTTL = false
    /// The sweep found the disk full: logged once until a sweep succeeds again.
    var sweepBlockedBySpace = false
    /// Rooms one sweep ends at most, resident and sleeping each, so that rooms expiring together
    /// (a million rooms restored at one instant, with `--room-ttl`) are spread over ticks
    /// instead of holding the loop: each costs a tombstone now and its checkpoint's reclaim
    /// (an unlink) at the next tick. The rest go at the next sweeps, a second later each.
    static let maxExpiriesPerSweep = 1024
}

extension LocalRoomEngine {
    /// DROP (admitted: the name, the `admin` right), then storage; every member gets LEFT
    /// room_deleted, then the ACK carries the dropped room's last position (0, 0: there was no
    /// such room).
    func drop(requestID: UInt64, roomName: String, from session: Session) {
        guard let room = hub.rooms[RoomName(roomName)] else {
            dropStoredOnly(requestID: requestID, roomName: roomName, from: session)
            return
        }
        if let rejection = prepareStore(forRequest: "drop", room: room.name) {
            hub.send(rejection.message(requestID: requestID), to: session)
            return
        }
        let (epoch, version) = (room.epoch, room.version)
        end(room, code: .roomDeleted, "room \(LogEscaping.line(room.name)) was deleted")
        hub.stats.roomsDeleted += 1
        hub.logger.debug(
            "room dropped", metadata: session.logMetadata(["room": "\(LogEscaping.line(roomName))", "epoch": "\(epoch)", "version": "\(version)"]))
        hub.send(.ack(requestID: requestID, epoch: epoch, version: version), to: session)
    }

    /// DROP of a room not in memory: one the store still holds (a room kept on disk only) is
    /// ended there, with its tombstone; with none, there is nothing to drop: ACK (0, 0).
    private func dropStoredOnly(requestID: UInt64, roomName: String, from session: Session) {
        guard let (epoch, version) = store.position(of: roomName) else {
            hub.send(.ack(requestID: requestID, epoch: 0, version: 0), to: session)
            return
        }
        if let rejection = prepareStore(forRequest: "drop", room: roomName) {
            hub.send(rejection.message(requestID: requestID), to: session)
            return
        }
        store.drop(room: roomName, epoch: epoch, version: version)
        sleepingExpiries.remove(RoomName(roomName))
        hub.sleepingRoomCount = sleepStore?.sleepingRoomCount ?? 0
        hub.stats.roomsDeleted += 1
        hub.send(.ack(requestID: requestID, epoch: epoch, version: version), to: session)
    }

    /// SET_TTL (admitted: the name, the `write` right): the room (created if new), storage;
    /// then the TTL is the room's (and logged), its idle time starts again, and the ACK carries
    /// its position.
    /// Never: this engine answers every write at once.
    func queuesWrite(toRoom roomName: String) -> Bool { false }

    func setTTL(requestID: UInt64, roomName: String, seconds: UInt64, from session: Session) {
        guard let room = room(named: roomName, requestID: requestID, countedAsWrite: false, for: session) else { return }
        if let rejection = admitCreation(of: room, for: session) ?? prepareStore(forRequest: "SET_TTL", room: room.name) {
            hub.send(rejection.message(requestID: requestID), to: session)
            return
        }
        room.ttlSeconds = seconds
        hub.touch(room)
        if seconds > 0 { lifecycle.roomsMayHaveTTL = true }
        store.setTTL(room: room.name, epoch: room.epoch, seconds: seconds)
        hub.send(.ack(requestID: requestID, epoch: room.epoch, version: room.version), to: session)
    }

    /// The TTL `room` expires by: its own (0: never), else `--room-ttl`; nil: never.
    func timeToLive(of room: Room) -> Duration? {
        switch room.ttlSeconds {
        case .some(0): nil
        case .some(let seconds): .seconds(seconds)
        case .none: hub.configuration.roomTTL
        }
    }

    /// Ends every room whose TTL has passed with no member and no write, as of `now`. Called
    /// once a second by the daemon, so a room expires up to a second after its TTL, never
    /// before (later when more than `RoomLifecycle.maxExpiriesPerSweep` are due at once). A
    /// full disk (the tombstone cannot be logged) leaves the rooms for a later sweep.
    /// - Complexity: O(1) when no room can have a TTL (no `--room-ttl`, no SET_TTL); else a
    ///   scan of the resident rooms (at most `--max-rooms`: about 1 ms per 100,000 on this
    ///   machine's estimate, not measured) plus O(log n) per sleeping room ended.
    package func expireRooms(now: ContinuousClock.Instant) {
        expireSleepingRooms(now: now)
        guard hub.configuration.roomTTL != nil || lifecycle.roomsMayHaveTTL else { return }
        var due: [Room] = []
        for room in hub.rooms.values where room.members.sessions.isEmpty {
            if let ttl = timeToLive(of: room), now - room.idleSince >= ttl {
                due.append(room)
                if due.count == RoomLifecycle.maxExpiriesPerSweep { break }
            }
        }
        for room in due {
            guard prepareExpiry(of: room.name) else { return }
            hub.logger.debug("room expired", metadata: ["room": "\(LogEscaping.line(room.name))", "epoch": "\(room.epoch)", "version": "\(room.version)"])
            end(room, code: .roomExpired, "room \(LogEscaping.line(room.name)) expired")
            hub.stats.roomsExpired += 1
        }
    }

    /// Ends the sleeping rooms whose TTL has passed (`sleepingExpiries`), in the store alone:
    /// they have no members to tell. A full disk leaves them for a later sweep.
    /// - Complexity: O(1) when none is due; O(log n) per room expired.
    private func expireSleepingRooms(now: ContinuousClock.Instant) {
        guard let sleepStore else { return }
        var ended = 0
        while ended < RoomLifecycle.maxExpiriesPerSweep, let room = sleepingExpiries.popDue(now: now) {
            let name = room.string
            guard sleepStore.isAsleep(name), let (epoch, version) = store.position(of: name) else { continue }
            guard prepareExpiry(of: name) else {
                // Tried again at a later sweep (unless the daemon is stopping).
                sleepingExpiries.set(room, deadline: now + .seconds(1))
                return
            }
            store.drop(room: name, epoch: epoch, version: version)
            hub.sleepingRoomCount = sleepStore.sleepingRoomCount
            hub.stats.roomsExpired += 1
            ended += 1
            hub.logger.debug("sleeping room expired", metadata: ["room": "\(LogEscaping.line(name))", "epoch": "\(epoch)", "version": "\(version)"])
        }
    }

    /// `prepareStore` for an expiry: false when the sweep must stop here, the disk being full
    /// (logged once until a sweep gets through again) or the store failed.
    private func prepareExpiry(of name: String) -> Bool {
        switch prepareStore(room: name, while: "logging the expiry of") {
        case .ready:
            lifecycle.sweepBlockedBySpace = false
            return true
        case .diskFull(let error):
            if !lifecycle.sweepBlockedBySpace {
                lifecycle.sweepBlockedBySpace = true
                hub.logger.warning("rooms cannot expire while the disk is full: \(error); will retry")
            }
            return false
        case .failed:
            return false
        }
    }

    /// Ends `room`: the store logs its tombstone, then the hub tells its members (LEFT `code`)
    /// and forgets it. The LEFTs and any answer leave after the pass's commit, so the tombstone
    /// is durable first.
    private func end(_ room: Room, code: ErrorCode, _ message: String) {
        store.drop(room: room.name, epoch: room.epoch, version: room.version)
        hub.endRoom(room, code: code, message)
    }
}
