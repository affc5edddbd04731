import SnapSyncWire

/// A store that can keep a room on disk only (a sleeping room, #17): the daemon evicts a room
/// with no members and no writes from memory, and loads it back on its next JOIN or write with
/// the same epoch, version, snapshot, history and write ids.
///
/// The daemon calls, all on its loop thread:
/// 1. `evict(_:until:)` with the images of memberless rooms: the store makes each room's
///    checkpoint current (writes one unless it already holds the image's version; the files of
///    a batch are made durable by one sync), forgets the room's log tracking and keeps only
///    `SleepingRoom` (24 bytes plus the name). It returns how many rooms, from the first, are
///    asleep: fewer when its deadline passed or the disk is full, and the others stay in
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
    func evict(_ images: some Sequence<RoomImage>, until deadline: ContinuousClock.Instant?) throws(StoreError) -> Int
    func commitEvictions() throws(StoreError)
    func loadSleeping(_ room: String) throws(StoreError) -> RecoveredRoom?
    func markAwake(_ room: RecoveredRoom)
}

/// What the store keeps of a sleeping room besides its name: where it is on disk and the
/// position it sleeps at (24 bytes).
struct SleepingRoom {
    var epoch: UInt64
    var version: UInt64
    /// The sequence number of the room's checkpoint file, which holds the room whole.
    var checkpoint: UInt64
}

/// The store's sleeping rooms.
struct SleepState {
    var rooms: [RoomName: SleepingRoom] = [:]
    /// `evict` wrote a checkpoint that no MANIFEST lists yet.
    var unlisted = false
}
