import Logging
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

/// The single node's rooms: resident in the hub, changed in place by each write, made durable by
/// this node's store (`RoomStore`: the write-ahead log and checkpoints, or memory only), asleep
/// on disk when idle (LocalRoomEngine+Sleep.swift), ended by DROP, SET_TTL and expiry
/// (LocalRoomEngine+Lifecycle.swift). Every request is answered within the pass that received
/// it.
///
/// Threads: the loop's, as the hub's.
package final class LocalRoomEngine: RoomEngine {
    /// The hub that owns this engine. Unowned and unchecked: the hub holds the engine for its
    /// whole life and the engine is never handed out, so the hub outlives every use; a checked
    /// reference would cost a retain per access on the write path.
    unowned(unsafe) let hub: Hub
    let store: any RoomStore
    /// The store rooms sleep in: the durable store when `--room-idle` is on; nil otherwise
    /// (the memory store, or idle eviction off), and then no room is ever evicted.
    let sleepStore: (any SleepingRoomStore)?
    /// What the expiry sweep needs to know (LocalRoomEngine+Lifecycle.swift).
    var lifecycle = RoomLifecycle()
    /// When the sleeping rooms that have a TTL expire (LocalRoomEngine+Lifecycle.swift).
    var sleepingExpiries = SleepingExpiries()
    /// How long one eviction batch may keep writing checkpoint files (`SleepBatch.maxDuration`),
    /// spent on the store's `batchClock`; nil: no bound, for tests that expect every due room
    /// to sleep in one sweep whatever the disk's speed.
    var sleepBatchDuration: Duration? = SleepBatch.maxDuration
    /// When the data directory was last measured, and whether a measurement is running
    /// (LocalRoomEngine+RoomCreation.swift).
    var dataUsageMeasured: ContinuousClock.Instant?
    var isMeasuringDataUsage = false

    init(hub: Hub, store: any RoomStore) {
        self.hub = hub
        self.store = store
        self.sleepStore = hub.configuration.roomIdle == nil ? nil : store as? any SleepingRoomStore
    }

    func join(requestID: UInt64, roomName: String, resume: ResumePoint?, from session: Session) {
        guard let room = room(named: roomName, requestID: requestID, countedAsWrite: false, for: session) else { return }
        hub.completeJoin(requestID: requestID, room: room, resume: resume, from: session)
    }

    func commit() throws(StoreError) {
        try store.commit()
    }

    /// Expiries (`expireRooms`), then sleep and the store's maintenance (`maintainStore`).
    func tick(now: ContinuousClock.Instant) {
        expireRooms(now: now)
        maintainStore()
        measureDataUsage(now: now)
    }

    /// The room `name` for a request, resident, woken or created; nil after answering the
    /// request's REJECT (counted as a rejected write when `countedAsWrite`) when there is no
    /// room for it.
    func room(named name: String, requestID: UInt64, countedAsWrite: Bool, for session: Session) -> Room? {
        switch resident(named: name) {
        case .success(let room):
            return room
        case .failure(let rejection):
            if countedAsWrite { hub.countRejectedWrite(rejection.code) }
            hub.send(rejection.message(requestID: requestID), to: session)
            return nil
        }
    }

    /// The room named `name`: resident, woken if asleep, or created (empty, version 0, fresh
    /// epoch) if this is its first use.
    private func resident(named name: String) -> Result<Room, Rejection> {
        let key = RoomName(name)
        if let room = hub.rooms[key] { return .success(room) }
        // A full daemon evicts its longest-idle memberless room rather than refuse; a sleeping
        // room is woken rather than created (LocalRoomEngine+Sleep.swift).
        guard hub.rooms.count < hub.configuration.maxRooms || evictLongestIdle() else {
            return .failure(Rejection(.tooManyRooms, "the server is at its limit of \(hub.configuration.maxRooms) rooms"))
        }
        if let woken = wake(name) { return woken }
        let room = Room(
            name: name, limits: hub.configuration.wire, maxHistoryBytes: hub.configuration.historyBytes, foldsResumes: hub.configuration.foldResumes,
            idleSince: hub.monotonicNow())
        room.budget = hub.roomBudget
        hub.rooms[key] = room
        hub.logger.debug("room created", metadata: ["room": "\(LogEscaping.line(name))", "epoch": "\(room.epoch)"])
        hub.roomBecameIdle(room)
        return .success(room)
    }
}
