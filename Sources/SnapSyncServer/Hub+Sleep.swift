import Logging
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Sleeping rooms (#17): with a durable store and `--room-idle`, a room with no members and no
// writes for that long is evicted from memory; the store keeps it in its checkpoint, made
// current first. A JOIN, MUTATE or REPLACE naming it loads it back (one read of its
// checkpoint: its log tail is empty, the checkpoint having been made current when it went to
// sleep) with the same epoch, version, snapshot, history and write ids, so a CATCHUP and an
// idempotent retry work across a sleep. `--max-rooms` bounds resident rooms: a full daemon
// evicts its longest-idle memberless room rather than refuse a new one. With the memory store
// nothing sleeps (there is nothing to reload from).

/// How much the one-second sweep evicts per tick, so that the loop is never held for long: at
/// most `maxRooms` rooms, and no new eviction once `maxDuration` has passed (each eviction
/// writes and fsyncs one checkpoint, ~1–2 ms on this machine's disk for a small room, unless
/// the room's checkpoint is current already). Rooms left over are evicted at the next tick.
enum SleepSweep {
    static let maxRooms = 1024
    static let maxDuration: Duration = .milliseconds(50)
}

extension Hub {
    /// Links a room that has just become memberless (created, woken, restored, or left by its
    /// last member) into `idleRooms`, when rooms can sleep.
    func roomBecameIdle(_ room: Room) {
        guard sleepStore != nil else { return }
        idleRooms.append(room, now: .now)
    }

    /// The sweep, from the one-second timer: evicts the rooms idle for `--room-idle`, longest
    /// idle first, within `SleepSweep`'s bound, then lists the checkpoints written for them
    /// (and for rooms evicted early since the last tick) in one MANIFEST.
    /// - Complexity: O(1) when no room is due; else O(rooms evicted × their size), plus one
    ///   MANIFEST, O(rooms on disk).
    func sleepIdleRooms(now: ContinuousClock.Instant = .now) {
        guard let idle = configuration.roomIdle, let store = sleepStore else { return }
        var evicted = 0
        while evicted < SleepSweep.maxRooms, let room = idleRooms.first, now - room.idleSince >= idle {
            guard putToSleep(room, in: store) else { break }
            evicted += 1
            if ContinuousClock.now - now >= SleepSweep.maxDuration { break }
        }
        do {
            try store.commitEvictions()
        } catch {
            fail(ServerError("the store failed while listing evicted rooms: \(error); stopping"))
        }
    }

    /// Makes a resident slot when the daemon holds `--max-rooms` rooms: evicts the memberless
    /// room idle the longest, however briefly. False when no room can be evicted (every room
    /// has members, rooms cannot sleep, or the disk is full).
    func evictLongestIdle() -> Bool {
        guard let store = sleepStore, let room = idleRooms.first else { return false }
        return putToSleep(room, in: store)
    }

    /// Evicts `room` (memberless): the store makes its checkpoint current and keeps it asleep;
    /// its memory (and its count in `--max-room-total-bytes`) is released. A room never written
    /// (version 0) is not persisted: it is dropped, and a later JOIN creates it afresh with a
    /// new epoch, as after a restart (docs/persistence.md).
    /// - Returns: false when the room stays (a full disk, or a fatal store error: the daemon stops).
    @discardableResult
    func putToSleep(_ room: Room, in store: any SleepingRoomStore) -> Bool {
        precondition(room.members.count == 0, "only a memberless room can sleep")
        if room.version > 0 {
            let frames = room.history.frames(after: room.historyBaseVersion) ?? []
            let image = RoomImage(
                room: room.name, epoch: room.epoch, version: room.version, snapshot: room.snapshot,
                diffFrames: frames.map(\.array))
            do {
                guard try store.evict(image) else { return false }
            } catch {
                fail(ServerError("the store failed while evicting room \(LogEscaping.line(room.name)): \(error); stopping"))
                return false
            }
        }
        idleRooms.remove(room)
        rooms[RoomName(room.name)] = nil
        roomBudget.release(room)
        totalItems -= room.snapshot.numberOfItems
        snapshotEncodings.forget(room)
        sleepingRoomCount = store.sleepingRoomCount
        stats.roomsEvicted += 1
        logger.debug(
            "room evicted", metadata: ["room": "\(LogEscaping.line(room.name))", "epoch": "\(room.epoch)", "version": "\(room.version)"])
        return true
    }

    /// The sleeping room `name`, loaded back from its checkpoint and resident again, memberless;
    /// nil when no such room is asleep. The caller has made a resident slot.
    /// - Returns: REJECT `storage_failure` when its checkpoint cannot be read or is damaged, or
    ///   when it breaks a content limit lowered since it was written (it could not be served):
    ///   the room stays asleep and untouched, and the error is logged.
    /// - Complexity: one read of its checkpoint, O(size of the room) to decode and check it.
    func wake(_ name: String) -> Result<Room, Rejection>? {
        guard let store = sleepStore else { return nil }
        let loaded: RecoveredRoom
        do {
            guard let found = try store.loadSleeping(name) else { return nil }
            loaded = found
        } catch {
            logger.error("cannot wake room \(LogEscaping.line(name)): \(error)")
            return .failure(Rejection(.storageFailure, "room \(name) is asleep on disk and cannot be loaded: \(error)"))
        }
        if let violation = loaded.snapshot.firstLimitViolation(configuration.wire.model) {
            let error = Self.overLimit(room: name, snapshot: loaded.snapshot, violation)
            logger.error("cannot wake room \(LogEscaping.line(name)): \(error)")
            return .failure(Rejection(.storageFailure, "room \(name) is asleep on disk and cannot be served: \(error)"))
        }
        store.markAwake(loaded)
        let room = Room(
            name: name, epoch: loaded.epoch, version: loaded.version, snapshot: loaded.snapshot,
            limits: configuration.wire, maxHistoryBytes: configuration.historyBytes, history: loaded.history)
        room.budget = roomBudget
        rooms[RoomName(name)] = room
        roomBudget.update(room)
        totalItems += loaded.snapshot.numberOfItems
        sleepingRoomCount = store.sleepingRoomCount
        stats.roomsWoken += 1
        roomBecameIdle(room)
        logger.debug("room woken", metadata: ["room": "\(LogEscaping.line(name))", "epoch": "\(room.epoch)", "version": "\(room.version)"])
        return .success(room)
    }
}
