import Logging
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Sleeping rooms: with a durable store and `--room-idle`, a room with no members and no
// writes for that long is evicted from memory; the store keeps it in its checkpoint, made
// current first. A JOIN, MUTATE or REPLACE naming it loads it back (one read of its
// checkpoint: its log tail is empty, the checkpoint having been made current when it went to
// sleep) with the same epoch, version, snapshot, history and write ids, so a CATCHUP and an
// idempotent retry work across a sleep. `--max-rooms` bounds resident rooms: a full daemon
// evicts its longest-idle memberless room rather than refuse a new one. With the memory store
// nothing sleeps (there is nothing to reload from).

/// How much one eviction batch takes, so that the loop is never held for long: at most
/// `maxRooms` rooms, and no new checkpoint file once `maxDuration` has passed (each evicted room
/// that was written since its checkpoint costs a file written, ~0.1–1.5 ms on this machine, and
/// the batch one syncfs of the data directory's filesystem). The hub's `sleepBatchDuration`
/// holds it, so that tests can lift it. The sweep runs one batch per one-second tick; rooms
/// left over go at the next tick. A full daemon evicts `earlyRooms(maxRooms:)` at a time, so
/// that one sync serves the next new rooms too.
enum SleepBatch {
    static let maxRooms = 1024
    static let maxDuration: Duration = .milliseconds(50)
    /// 1/16 of `--max-rooms`, at least 1 and at most 64.
    static func earlyRooms(maxRooms: Int) -> Int { max(1, min(64, maxRooms / 16)) }
}

extension LocalRoomEngine {

    /// The sweep, from the one-second timer: evicts the rooms idle for `--room-idle` as of `now`
    /// (an instant of `monotonicNow`), longest idle first, one `SleepBatch`, then lists the
    /// checkpoints written for them (and for rooms evicted early since the last tick) in one
    /// MANIFEST.
    /// - Complexity: O(1) when no room is due; else O(rooms evicted × their size), plus one
    ///   MANIFEST, O(rooms on disk).
    func sleepIdleRooms(now: ContinuousClock.Instant) {
        guard let idle = hub.configuration.roomIdle, let store = sleepStore else { return }
        evictIdleRooms(upTo: SleepBatch.maxRooms, idleSince: now - idle, in: store)
        do {
            try store.commitEvictions()
        } catch {
            hub.fail(ServerError("the store failed while listing evicted rooms: \(error); stopping"))
        }
    }

    /// Makes resident slots when the daemon holds `--max-rooms` rooms: evicts the memberless
    /// rooms idle the longest, however briefly (`SleepBatch.earlyRooms`). False when no
    /// room can be evicted (every room has members, rooms cannot sleep, or the disk is full).
    func evictLongestIdle() -> Bool {
        guard let store = sleepStore else { return false }
        return evictIdleRooms(upTo: SleepBatch.earlyRooms(maxRooms: hub.configuration.maxRooms), idleSince: nil, in: store) > 0
    }

    /// Evicts up to `limit` rooms from the front of `idleRooms` (those idle since `cutoff` or
    /// earlier, when given): the store makes the checkpoints of the written ones current and
    /// keeps them asleep; every evicted room's memory (and its count in
    /// `--max-room-total-bytes`) is released. A room never written (version 0) is not
    /// persisted: it is dropped, and a later JOIN creates it afresh with a new epoch, as after a
    /// restart (docs/persistence.md).
    /// - Returns: the rooms evicted (fewer when the batch's time ran out or the disk is full;
    ///   none when the store failed, and then the daemon stops).
    @discardableResult
    func evictIdleRooms(upTo limit: Int, idleSince cutoff: ContinuousClock.Instant?, in store: any SleepingRoomStore) -> Int {
        var candidates: [Room] = []
        var next = hub.idleRooms.first
        while let room = next, candidates.count < limit {
            if let cutoff, room.idleSince > cutoff { break }
            candidates.append(room)
            next = room.idleNext
        }
        guard !candidates.isEmpty else { return 0 }
        // A room given a TTL is kept by the store even if never written (PROTOCOL.md §11.20), so
        // it sleeps in a checkpoint at version 0 rather than being forgotten.
        let written = candidates.filter { $0.version > 0 || $0.ttlSeconds != nil }
        let kept = baseBytesKept
        let images = written.lazy.map { $0.image(keepingBaseUpTo: kept) }
        let asleep: Int
        do {
            asleep = try store.evict(images, within: sleepBatchDuration)
        } catch {
            hub.fail(ServerError("the store failed while evicting \(written.count) room(s): \(error); stopping"))
            return 0
        }
        let evicted = candidates.filter { $0.version == 0 && $0.ttlSeconds == nil } + written.prefix(asleep)
        for room in evicted { release(room) }
        // Their expiry goes on asleep: from the same idle time (LocalRoomEngine+Lifecycle.swift).
        for room in written.prefix(asleep) {
            if let ttl = timeToLive(of: room) { sleepingExpiries.set(RoomName(room.name), deadline: room.idleSince + ttl) }
        }
        hub.sleepingRoomCount = store.sleepingRoomCount
        return evicted.count
    }

    /// Forgets an evicted room: out of `rooms`, `idleRooms`, the room budget and the counts.
    private func release(_ room: Room) {
        precondition(room.members.count == 0, "only a memberless room can sleep")
        hub.idleRooms.remove(room)
        hub.rooms[RoomName(room.name)] = nil
        hub.roomBudget.release(room)
        hub.totalItems -= room.snapshot.numberOfItems
        hub.snapshotEncodings.forget(room)
        hub.stats.roomsEvicted += 1
        hub.logger.debug(
            "room evicted", metadata: ["room": "\(LogEscaping.line(room.name))", "epoch": "\(room.epoch)", "version": "\(room.version)"])
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
            hub.logger.error("cannot wake room \(LogEscaping.line(name)): \(error)")
            return .failure(Rejection(.storageFailure, "room \(name) is asleep on disk and cannot be loaded: \(error)"))
        }
        if let violation = loaded.snapshot.firstLimitViolation(hub.configuration.wire.model) {
            let error = Hub.overLimit(room: name, snapshot: loaded.snapshot, violation)
            hub.logger.error("cannot wake room \(LogEscaping.line(name)): \(error)")
            return .failure(Rejection(.storageFailure, "room \(name) is asleep on disk and cannot be served: \(error)"))
        }
        store.markAwake(loaded)
        sleepingExpiries.remove(RoomName(name))
        let room = Room(recovered: loaded, configuration: hub.configuration, idleSince: hub.monotonicNow())
        room.budget = hub.roomBudget
        if let ttl = loaded.ttlSeconds, ttl > 0 { lifecycle.roomsMayHaveTTL = true }
        hub.rooms[RoomName(name)] = room
        hub.roomBudget.update(room)
        hub.totalItems += loaded.snapshot.numberOfItems
        hub.sleepingRoomCount = store.sleepingRoomCount
        hub.stats.roomsWoken += 1
        hub.roomBecameIdle(room)
        hub.logger.debug("room woken", metadata: ["room": "\(LogEscaping.line(name))", "epoch": "\(room.epoch)", "version": "\(room.version)"])
        return .success(room)
    }
}
