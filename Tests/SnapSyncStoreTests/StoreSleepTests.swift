import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncStore

// The store's side of sleeping rooms (`SleepingRoomStore`): eviction makes the checkpoint
// current and shrinks the room to `SleepingRoom`; one MANIFEST per batch lists what was evicted;
// waking reads the checkpoint back; recovery leaves checkpointed rooms asleep but still checks
// every checkpoint's checksums.

@Suite(.unitTests) struct StoreSleepTests {
    private func sleepyOptions(_ directory: String) -> StoreOptions {
        var options = smallOptions(directory)
        options.sleepingRooms = true
        return options
    }

    @Test func anEvictedRoomIsInItsCheckpointAndWakesWhole() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (store, _) = try DurableStore.open(options: sleepyOptions(dir.data), logger: LogLines().logger)
        var rooms = Rooms()
        try rooms.writeMany(9, rooms: 3, to: store)
        try rooms.write("room-0", [.appendItems(["x"], toSection: "s")], writeID: [7, 7], to: store)
        let image = try #require(rooms.image("room-0"))
        #expect(try store.evict([image], within: nil) == 1)
        #expect(store.isAsleep("room-0") && store.sleepingRoomCount == 1 && store.rooms["room-0"] == nil)
        // Not listed until the batch is committed; then the MANIFEST lists it.
        let sleeper = try #require(store.sleep.rooms["room-0"])
        #expect(try Manifest.read(directory: dir.data)?.checkpoints.contains(sleeper.checkpoint) == false)
        try store.commitEvictions()
        #expect(try Manifest.read(directory: dir.data)?.checkpoints.contains(sleeper.checkpoint) == true)

        let loaded = try #require(try store.loadSleeping("room-0"))
        #expect(loaded.epoch == image.epoch && loaded.version == image.version && loaded.snapshot == image.snapshot)
        #expect(loaded.history.map(\.diffFrame) == rooms.writes(of: "room-0").map(\.diffFrame))
        #expect(loaded.history.last?.writeID == [7, 7])
        #expect(store.isAsleep("room-0"), "loading alone does not wake it")
        store.markAwake(loaded)
        #expect(!store.isAsleep("room-0") && store.rooms["room-0"]?.writeIDs.last?.id == [7, 7])
        // Awake and unchanged, its checkpoint is current: a second eviction writes nothing.
        let checkpoints = store.statistics.checkpoints
        #expect(try store.evict([image], within: nil) == 1)
        #expect(store.statistics.checkpoints == checkpoints && store.isAsleep("room-0"))
        #expect(try store.loadSleeping("room-1") == nil)
        try close(store, rooms)
    }

    @Test func recoveryLeavesCheckpointedRoomsAsleepAndTakesInUnlistedEvictions() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        do {
            let (store, _) = try DurableStore.open(options: sleepyOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(6, rooms: 3, to: store)
            try store.sync()
            #expect(try store.evict(["room-0", "room-1"].compactMap { rooms.image($0) }, within: nil) == 2)
            // A crash before commitEvictions(): the checkpoints are in place but not listed.
        }
        let log = LogLines()
        let (store, recovered) = try DurableStore.open(options: sleepyOptions(dir.data), logger: log.logger)
        #expect(recovered.map(\.name) == ["room-2"], "only the room with a log tail is loaded")
        #expect(store.sleepingRoomCount == 2 && store.isAsleep("room-0") && store.isAsleep("room-1"))
        #expect(log.contains("2 room(s) left asleep"))
        let woken = try #require(try store.loadSleeping("room-1"))
        #expect(woken.snapshot == rooms.rooms["room-1"]?.snapshot && woken.version == 2)
        try close(store, rooms)
    }

    @Test func aDamagedSleepingCheckpointStillRefusesTheStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let file: String
        do {
            let (store, _) = try DurableStore.open(options: sleepyOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(4, rooms: 2, to: store)
            #expect(try store.evict([#require(rooms.image("room-0"))], within: nil) == 1)
            try store.commitEvictions()
            file = dir.data + "/" + CheckpointFile.fileName(try #require(store.sleep.rooms["room-0"]).checkpoint)
            try close(store, rooms)
        }
        var bytes = readFile(file)
        bytes[bytes.count - 3] ^= 0x40  // inside the last history record, not the header
        writeFile(file, bytes)
        #expect {
            _ = try DurableStore.open(options: sleepyOptions(dir.data), logger: LogLines().logger)
        } throws: { error in
            guard case .corrupt(let path, _, _) = error as? StoreError else { return false }
            return path == file
        }
    }

    /// The MANIFEST's list of sleeping checkpoints, kept sorted lazily, against a plain set.
    @Test func sleepingCheckpointNumbersStayAscendingThroughWakesAndReEvictions() {
        var state = SleepState()
        var expected: [RoomName: UInt64] = [:]
        var last: [RoomName: UInt64] = [:]
        var rng = SeededGenerator(seed: 0x5EED)
        var next: UInt64 = 1
        for step in 0..<2000 {
            let name = RoomName("r\(Int.random(in: 0..<50, using: &rng))")
            if let current = expected[name], Bool.random(using: &rng) {
                #expect(state.remove(name)?.checkpoint == current)
                expected[name] = nil
            } else {
                // A new checkpoint, or (a room woken and only read) the one it had.
                let reuse = Bool.random(using: &rng) ? last[name] : nil
                let number = reuse ?? next
                if reuse == nil { next += 1 }
                state.add(name, SleepingRoom(epoch: 1, version: 1, checkpoint: number), ttl: nil)
                expected[name] = number
                last[name] = number
            }
            if step % 7 == 0 {
                #expect(state.sortedCheckpoints() == expected.values.sorted(), "step \(step)")
            }
        }
        #expect(state.sortedCheckpoints() == expected.values.sorted())
    }
}

/// xorshift64*, seeded: the same sequence on every run.
private struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
}
