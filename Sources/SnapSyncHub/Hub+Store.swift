// The server's side of the store (SnapSyncStore): loading recovered rooms, the store's
// maintenance from the one-second timer, and the images of the rooms the store asks to
// checkpoint.

internal import Logging
internal import SnapSyncModel
package import SnapSyncStore
import SnapSyncWire

extension Hub {
    /// Puts the rooms recovered from the data directory in place, each at its epoch and version
    /// with its history (so a client resuming inside it gets CATCHUP) and its write ids (so a
    /// retried write is still recognised). Call before `start()`.
    ///
    /// - Throws: `ServerError` naming the first room that breaks a content limit lowered since
    ///   it was written, the flag and the value that would admit it (PROTOCOL.md §12): such a
    ///   room could not be served (a conforming client refuses its SNAPSHOT), so the daemon does
    ///   not start, as it does not start on a damaged data directory. Nothing is restored then.
    package func restore(_ recovered: [RecoveredRoom]) throws(ServerError) {
        let limits = configuration.wire.model
        // A restart starts every room's idle time again (PROTOCOL.md §9), asleep or not.
        let now = monotonicNow()
        for r in recovered {
            if let violation = r.snapshot.firstLimitViolation(limits) {
                throw Self.overLimit(room: r.name, snapshot: r.snapshot, violation)
            }
        }
        for r in recovered {
            let room = Room(
                name: r.name, epoch: r.epoch, version: r.version, snapshot: r.snapshot,
                limits: configuration.wire, maxHistoryBytes: configuration.historyBytes, history: r.history,
                idleSince: now)
            room.budget = roomBudget
            room.ttlSeconds = r.ttlSeconds
            if let ttl = r.ttlSeconds, ttl > 0 { lifecycle.roomsMayHaveTTL = true }
            rooms[RoomName(r.name)] = room
            roomBudget.update(room)
            totalItems += r.snapshot.numberOfItems
            roomBecameIdle(room)
        }
        sleepingRoomCount = sleepStore?.sleepingRoomCount ?? 0
        // Rooms left asleep expire like the others: their idle time starts now.
        sleepStore?.forEachSleepingRoom { name, seconds in
            if let seconds, seconds > 0 { lifecycle.roomsMayHaveTTL = true }
            let ttl: Duration? =
                switch seconds {
                case .some(0): nil
                case .some(let seconds): .seconds(seconds)
                case .none: configuration.roomTTL
                }
            if let ttl { sleepingExpiries.set(RoomName(name), deadline: now + ttl) }
        }
    }

    /// Evicts the rooms idle for `--room-idle` (Hub+Sleep.swift); then the idle `everysec`
    /// fdatasync, segment switches, and the checkpoints of the rooms the store says are due
    /// (usually none). A failure is fatal, like a failed commit.
    package func maintainStore() {
        sleepIdleRooms(now: monotonicNow())
        do throws(StoreError) {
            let due = try store.maintain()
            if !due.isEmpty { try store.checkpoint(roomImages(due)) }
        } catch {
            fail(ServerError("store maintenance failed: \(error); stopping"))
        }
    }

    /// The images of the rooms `names`, built one at a time as the store reads them (it stops
    /// once its checkpoint budget is spent, and nothing is copied for the rooms after that).
    /// A room the server does not hold is skipped, with a warning. Read it on the loop's
    /// thread, or after `run()` has returned.
    /// - Complexity: O(history frames) per image read: the frames are copied, the snapshot is
    ///   shared.
    package func roomImages(_ names: [String]) -> some Sequence<RoomImage> {
        names.lazy.compactMap { [self] name -> RoomImage? in
            guard let room = rooms[RoomName(name)] else {
                logger.warning("store: room \(LogEscaping.line(name)) has logged writes but the daemon no longer has it; its log is kept")
                return nil
            }
            let frames = room.history.frames(after: room.historyBaseVersion) ?? []
            return RoomImage(
                room: name, epoch: room.epoch, version: room.version, snapshot: room.snapshot,
                diffFrames: frames.map(\.array))
        }
    }

    /// "room R holds 50 items, over --max-items-per-room 40: ..." for `restore`.
    static func overLimit(room: String, snapshot: Snapshot, _ violation: Violation) -> ServerError {
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
