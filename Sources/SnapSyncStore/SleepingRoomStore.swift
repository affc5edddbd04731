import SnapSyncWire

/// A store that can keep a room on disk only (a sleeping room): the daemon evicts a room
/// with no members and no writes from memory, and loads it back on its next JOIN or write with
/// the same epoch, version, snapshot, history and write ids.
///
/// The daemon calls, all on its loop thread:
/// 1. `evict(_:within:)` with the images of memberless rooms: the store makes each room's
///    checkpoint current (writes one unless it already holds the image's version; the files of
///    a batch are made durable by one sync), forgets the room's log tracking and keeps only
///    `SleepingRoom` (24 bytes plus the name). It returns how many rooms, from the first, are
///    asleep: fewer when its time budget was spent or the disk is full, and the others stay in
///    memory. Other errors are fatal, like a failed `commit()`.
/// 2. `commitEvictions()` once per tick (the one-second timer): one MANIFEST lists the
///    checkpoints `evict` wrote since the last call, then the checkpoints they replaced are
///    unlinked. Until then a new checkpoint is one recovery takes in unlisted (docs/persistence.md,
///    "MANIFEST", rule 1), so an eviction in the request path costs no MANIFEST.
/// 3. `loadSleeping(_:)` when a request names a room the daemon does not hold: the room as its
///    checkpoint holds it (one read of one file, its digest checked), or nil when it is not
///    asleep. Nothing changes until `markAwake(_:)`, so a daemon that refuses the room (a
///    content limit lowered since it was written) leaves it asleep.
/// 4. `markAwake(_:)` once the daemon holds the room again: the store tracks it as a resident
///    room, with the write ids of its history.
package protocol SleepingRoomStore: RoomStore {
    /// Rooms kept on disk only.
    var sleepingRoomCount: Int { get }
    func isAsleep(_ room: String) -> Bool
    func evict(_ images: some Sequence<RoomImage>, within budget: Duration?) throws(StoreError) -> Int
    func commitEvictions() throws(StoreError)
    func loadSleeping(_ room: String) throws(StoreError) -> RecoveredRoom?
    func markAwake(_ room: RecoveredRoom)
    /// Each sleeping room's name and TTL in seconds as SET_TTL set it (nil: none set; 0: never
    /// expires): what the daemon's expiry sweep needs after a start. O(sleeping rooms).
    func forEachSleepingRoom(_ body: (String, UInt64?) -> Void)
}

/// What the store keeps of a sleeping room besides its name: where it is on disk and the
/// position it sleeps at (24 bytes).
struct SleepingRoom {
    var epoch: UInt64
    var version: UInt64
    /// The sequence number of the room's checkpoint file, which holds the room whole.
    var checkpoint: UInt64
}

/// A room's TTL as its last SET_TTL set it: that SET_TTL's serial, and the seconds.
typealias RoomTTL = (serial: UInt64, seconds: UInt64)

/// The store's sleeping rooms, and their checkpoints' numbers in ascending order for the
/// MANIFEST (sorting a million numbers at every MANIFEST was most of a tick's time under churn).
/// A woken room's number is dropped, and a number below the last one added, lazily, at the next
/// `sortedCheckpoints()`, so that waking and evicting stay O(1).
/// Change `rooms` only through `add` and `remove`.
struct SleepState {
    private(set) var rooms: [RoomName: SleepingRoom] = [:]
    /// The TTLs of the sleeping rooms that have one (also in their checkpoints), so that a
    /// sleeping room can expire unread. Apart from `rooms` because few rooms set one: a field
    /// would make every sleeping room's entry 24 bytes larger.
    private(set) var ttls: [RoomName: RoomTTL] = [:]
    private var checkpoints: [UInt64] = []
    /// Numbers in `checkpoints` or `extra` whose room woke up.
    private var stale: Set<UInt64> = []
    /// Numbers not in `checkpoints` because they are below its last one (a room re-evicted
    /// with the checkpoint it had).
    private var extra: [UInt64] = []
    /// `evict` wrote a checkpoint that no MANIFEST lists yet.
    var unlisted = false

    /// The rooms recovery left asleep.
    init(rooms: [RoomName: SleepingRoom] = [:], ttls: [RoomName: RoomTTL] = [:]) {
        self.rooms = rooms
        self.ttls = ttls
        checkpoints = rooms.values.map(\.checkpoint).sorted()
    }

    /// - Complexity: O(1) amortized.
    mutating func add(_ name: RoomName, _ room: SleepingRoom, ttl: RoomTTL?) {
        ttls[name] = ttl
        if let old = rooms.updateValue(room, forKey: name) { stale.insert(old.checkpoint) }
        if stale.remove(room.checkpoint) != nil { return }  // still listed
        if let last = checkpoints.last, last > room.checkpoint {
            extra.append(room.checkpoint)
        } else {
            checkpoints.append(room.checkpoint)
        }
    }

    /// - Complexity: O(1).
    mutating func remove(_ name: RoomName) -> SleepingRoom? {
        guard let room = rooms.removeValue(forKey: name) else { return nil }
        ttls[name] = nil
        stale.insert(room.checkpoint)
        return room
    }

    /// The sleeping rooms' checkpoint numbers, ascending.
    /// - Complexity: O(1) when no room woke and none was re-evicted since the last call; else
    ///   O(sleeping rooms).
    mutating func sortedCheckpoints() -> [UInt64] {
        if !stale.isEmpty || !extra.isEmpty {
            let kept = stale.isEmpty ? checkpoints : checkpoints.filter { !stale.contains($0) }
            checkpoints = DurableStore.merge(kept, extra.filter { !stale.contains($0) }.sorted())
            stale.removeAll()
            extra.removeAll()
        }
        return checkpoints
    }
}
