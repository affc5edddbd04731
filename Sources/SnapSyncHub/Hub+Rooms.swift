import Logging
import SnapSyncModel
import SnapSyncWire

// The hub's rooms, whichever engine holds them: resident rooms by name (`Hub.rooms`), their
// items and bytes counted, the memberless ones ordered by idle time (`IdleRooms`), and the end
// of a room for its members.

extension Hub {
    /// Makes `room` a resident room of the hub, counted in its budgets; it is not yet idle
    /// (`roomBecameIdle`).
    func install(_ room: Room) {
        room.budget = roomBudget
        rooms[RoomName(room.name)] = room
        roomBudget.update(room)
        totalItems += room.snapshot.numberOfItems
    }

    /// Takes `room` out of the hub (its members must have left): the counterpart of `install`.
    func forget(_ room: Room) {
        idleRooms.remove(room)
        if rooms[RoomName(room.name)] === room { rooms[RoomName(room.name)] = nil }
        totalItems -= room.snapshot.numberOfItems
        roomBudget.release(room)
        snapshotEncodings.forget(room)
    }

    /// Ends `room`: each member is sent LEFT `code` and is no longer one, and the hub forgets it
    /// (its name is free). The engine has recorded the end first (a tombstone in the store, or
    /// the log's tombstone record); the LEFTs and any answer leave after the pass's commit.
    /// - Complexity: O(members).
    func endRoom(_ room: Room, code: ErrorCode, _ message: String) {
        // Copied first: removeMember reorders the array.
        for member in room.members.sessions {
            removeMember(member, from: room, reason: .removed)
            send(.left(room: room.name, code: code.rawValue, message: message), to: member)
        }
        // Out of the idle list first: it links rooms unowned, so a dangling link would outlive it.
        idleRooms.remove(room)
        rooms[RoomName(room.name)] = nil
        totalItems -= room.snapshot.numberOfItems
        roomBudget.release(room)
        snapshotEncodings.forget(room)
    }

    /// A write (or SET_TTL) happened: the room's idle time starts again, and a memberless room
    /// moves to the back of the idle list, which stays ordered by `idleSince`.
    func touch(_ room: Room) {
        room.idleSince = monotonicNow()
        if room.isIdle { idleRooms.append(room, now: room.idleSince) }
    }

    /// Links a room that has just become memberless (created, woken, restored, or left by its
    /// last member) into `idleRooms`, whose order the local engine's sleep reads (the replicated
    /// engine reads the room's `idleSince` alone).
    func roomBecameIdle(_ room: Room) {
        idleRooms.append(room, now: monotonicNow())
    }

    /// Sends `frames`, the DIFFs of `room`'s history after `version` (a CATCHUP's), to
    /// `session`: as they are, or, to a version 3 session, each with the room's chain after it.
    /// - Complexity: O(frames); a copy of each for version 3.
    func sendHistory(_ frames: [OutputChunk], after version: UInt64, of room: Room, to session: Session) {
        guard ProtocolVersion.hasChain(version: session.protocolVersion) else {
            for frame in frames { send(shared: frame, to: session) }
            return
        }
        for (frame, chain) in zip(frames, room.chains(after: version)) {
            send(shared: .frozen(RoomChain.chainedDiffFrame(frame.bytes, chain: chain)), to: session)
        }
    }

    /// "room R holds 50 items, over --max-items-per-room 40: ..." for a room recovered, woken or loaded from a checkpoint.
    static func overLimit(room: String, snapshot: RoomSnapshot, _ violation: BatchError.Violation) -> ServerError {
        let (what, flag, needed): (String, String, Int)
        switch violation {
        case .snapshotTooLarge(let limit):
            (what, flag, needed) = (
                "encodes to \(snapshot.canonicalByteCount) bytes, over --max-snapshot-bytes \(limit)",
                "--max-snapshot-bytes", snapshot.canonicalByteCount
            )
        case .tooManySections(let limit):
            (what, flag, needed) = (
                "holds \(snapshot.numberOfSections) sections, over --max-sections-per-room \(limit)",
                "--max-sections-per-room", snapshot.numberOfSections
            )
        case .tooManyItems(let limit):
            (what, flag, needed) = (
                "holds \(snapshot.numberOfItems) items, over --max-items-per-room \(limit)",
                "--max-items-per-room", snapshot.numberOfItems
            )
        case .identifierTooLong(let id, let limit):
            (what, flag, needed) = (
                "holds the identifier \(id) of \(id.count) bytes, over --max-identifier-bytes \(limit)",
                "--max-identifier-bytes", id.count
            )
        case .payloadTooLarge(let id, let size, let limit):
            (what, flag, needed) = (
                "holds a payload of \(size) bytes (of \(id)), over --max-payload-bytes \(limit)",
                "--max-payload-bytes", size
            )
        case .outlineTooDeep(let id, let limit):
            let level = snapshot.level(of: id) ?? limit
            (what, flag, needed) = (
                "holds the item \(id) at outline level \(level), over --max-outline-depth \(limit)",
                "--max-outline-depth", level + 1
            )
        default:
            (what, flag, needed) = ("breaks a content limit: \(violation)", "the limit flags", 0)
        }
        return ServerError(
            "cannot serve the recovered rooms: room \(LogEscaping.line(room)) \(what); start with \(flag) "
                + "\(needed) or more (or with the limits it was written under, and shrink the room first)")
    }
}
