// The local engine's side of the store (SnapSyncStore): loading recovered rooms, the store's
// maintenance from the one-second timer, and the images of the rooms the store asks to
// checkpoint.

internal import Logging
internal import SnapSyncModel
package import SnapSyncStore
import SnapSyncWire

extension LocalRoomEngine {
    /// Puts the rooms recovered from the data directory in place, each at its epoch and version
    /// with its history (so a client resuming inside it gets CATCHUP) and its write ids (so a
    /// retried write is still recognised). Call before `start()`.
    ///
    /// - Throws: `ServerError` naming the first room that breaks a content limit lowered since
    ///   it was written, the flag and the value that would admit it (PROTOCOL.md §12): such a
    ///   room could not be served (a conforming client refuses its SNAPSHOT), so the daemon does
    ///   not start, as it does not start on a damaged data directory. Nothing is restored then.
    package func restore(_ recovered: [RecoveredRoom]) throws(ServerError) {
        let limits = hub.configuration.wire.model
        // A restart starts every room's idle time again (PROTOCOL.md §9), asleep or not.
        let now = hub.monotonicNow()
        for r in recovered {
            if let violation = r.snapshot.firstLimitViolation(limits) {
                throw Hub.overLimit(room: r.name, snapshot: r.snapshot, violation)
            }
        }
        for r in recovered {
            let room = Room(recovered: r, configuration: hub.configuration, idleSince: now)
            room.budget = hub.roomBudget
            if let ttl = r.ttlSeconds, ttl > 0 { lifecycle.roomsMayHaveTTL = true }
            hub.rooms[RoomName(r.name)] = room
            hub.roomBudget.update(room)
            hub.totalItems += r.snapshot.numberOfItems
            hub.roomBecameIdle(room)
        }
        hub.sleepingRoomCount = sleepStore?.sleepingRoomCount ?? 0
        // Rooms left asleep expire like the others: their idle time starts now.
        sleepStore?.forEachSleepingRoom { name, seconds in
            if let seconds, seconds > 0 { lifecycle.roomsMayHaveTTL = true }
            let ttl: Duration? =
                switch seconds {
                case .some(0): nil
                case .some(let seconds): .seconds(seconds)
                case .none: hub.configuration.roomTTL
                }
            if let ttl { sleepingExpiries.set(RoomName(name), deadline: now + ttl) }
        }
    }

    /// Evicts the rooms idle for `--room-idle` (LocalRoomEngine+Sleep.swift); then the idle `everysec`
    /// fdatasync, segment switches, and the checkpoints of the rooms the store says are due
    /// (usually none). A failure is fatal, like a failed commit.
    package func maintainStore() {
        sleepIdleRooms(now: hub.monotonicNow())
        do throws(StoreError) {
            let due = try store.maintain()
            if !due.isEmpty { try store.checkpoint(roomImages(due)) }
        } catch {
            hub.fail(ServerError("store maintenance failed: \(error); stopping"))
        }
    }

    /// The largest room whose resume base its checkpoints hold (`Room.image`): the largest
    /// the hub folds; nil when it folds none.
    var baseBytesKept: Int? { hub.configuration.foldResumes ? hub.configuration.foldMaxBytes : nil }

    /// The images of the rooms `names`, built one at a time as the store reads them (it stops
    /// once its checkpoint budget is spent, and nothing is copied for the rooms after that).
    /// A room the server does not hold is skipped, with a warning. Read it on the loop's
    /// thread, or after `run()` has returned.
    /// - Complexity: O(history frames) per image read: the frames are copied, the snapshot is
    ///   shared.
    package func roomImages(_ names: [String]) -> some Sequence<RoomImage> {
        names.lazy.compactMap { [self] name -> RoomImage? in
            guard let room = hub.rooms[RoomName(name)] else {
                hub.logger.warning("store: room \(LogEscaping.line(name)) has logged writes but the daemon no longer has it; its log is kept")
                return nil
            }
            return room.image(keepingBaseUpTo: baseBytesKept)
        }
    }

}
