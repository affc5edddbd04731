// Restart cost: replay applies each logged write in place and gives the very rooms the writes
// made; a clean shutdown with a long log tail checkpoints, so the next start replays nothing.

import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncStore

@Suite(.unitTests) struct StoreShutdownTests {
    /// A big room checkpointed, then many writes of every kind logged over it, then a crash:
    /// the replayed room has the same digest as the one the writes were applied to live.
    @Test func replayOverACheckpointGivesTheSameRoom() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        var options = smallOptions(dir.data, segmentBytes: 1 << 20)
        options.maxDiffFrameBytes = 1 << 20
        do {
            let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger)
            try rooms.write("big", [.appendSections(["a", "b", "c"])], to: store)
            for chunk in 0..<6 {
                let items = (0..<1000).map { SnapshotElement(SnapshotIdentifier("i\(chunk * 1000 + $0)"), payload: SnapshotPayload("p\($0)")) }
                try rooms.write("big", [.appendItems(items, toSection: chunk % 2 == 0 ? "a" : "b")], to: store)
            }
            try store.sync()
            try store.checkpoint(rooms.image("big")!)
            var rng = SplitMixForTests(seed: 7)
            for w in 0..<1500 {
                let n = Int(rng.next() % 6000)
                let id = SnapshotIdentifier("i\(n)")
                let ops: [SnapshotOperation]
                switch w % 5 {
                case 0: ops = [.updateItems([SnapshotElement(id, payload: SnapshotPayload("u\(w)"))], .reload)]
                case 1: ops = [.moveItemToSection(id, section: "c")]
                case 2: ops = [.insertItems([SnapshotElement(SnapshotIdentifier("n\(w)"), payload: "new")], .after(id))]
                case 3: ops = [.deleteItems([id])]
                default: ops = [.moveItem(id, .before(SnapshotIdentifier("i\((n + 1) % 6000)")))]
                }
                // Ops on items deleted earlier fail as a whole and are not logged, as in the daemon.
                do { try rooms.write("big", ops, to: store) } catch is BatchError { continue }
                if w % 50 == 0 { try store.sync() }
            }
            try store.sync()
            // Crash: no close.
        }
        let lines = LogLines()
        let (store, recovered) = try DurableStore.open(options: options, logger: lines.logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        #expect(recovered.first?.snapshot.digest == rooms.rooms["big"]?.snapshot.digest)
        #expect(lines.contains("1 checkpoint(s)"), "\(lines.all)")
        #expect(!lines.contains(" 0 write(s) replayed"), "the writes after the checkpoint are replayed")
    }

    /// close(checkpointing:) with more log than `shutdownCheckpointBytes` to replay: every written room
    /// is checkpointed, every segment deleted, and the next start replays nothing.
    @Test func aCleanShutdownWithALongTailLeavesNothingToReplay() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        var options = smallOptions(dir.data, segmentBytes: 8 << 10)
        options.shutdownCheckpointBytes = 4 << 10
        let start = ContinuousClock.now
        do {
            let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger, now: start)
            try rooms.writeMany(40, rooms: 3, payloadBytes: 200, to: store)
            try maintain(store, rooms, now: start)
            try rooms.writeMany(30, rooms: 3, payloadBytes: 200, to: store)
            try close(store, rooms)
        }
        #expect(fileNames(dir.data).filter { $0.hasPrefix("wal-") }.isEmpty, "\(fileNames(dir.data))")
        let lines = LogLines()
        let (store, recovered) = try DurableStore.open(options: options, logger: lines.logger)
        expectSameRooms(recovered, rooms)
        #expect(lines.contains("3 checkpoint(s), 0 write(s) replayed from 0 segment(s)"), "\(lines.all)")
        for room in recovered {
            // History comes from the checkpoints.
            #expect(room.history == Array(rooms.writes(of: room.name).suffix(16)), "\(room.name)")
        }
        // And the store goes on: writes, crash, recovery.
        try rooms.writeMany(5, rooms: 3, to: store)
        try store.sync()
        try store.close()
        let (again, recoveredAgain) = try DurableStore.open(options: options, logger: LogLines().logger)
        defer { try? again.close() }
        expectSameRooms(recoveredAgain, rooms)
    }

    /// Below the threshold, close(checkpointing:) writes no checkpoint: the short tail is replayed.
    @Test func aShortTailIsLeftToReplay() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let options = smallOptions(dir.data)
        do {
            let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger)
            try rooms.writeMany(5, rooms: 2, to: store)
            try close(store, rooms)
            #expect(store.statistics.checkpoints == 0)
        }
        let lines = LogLines()
        let (store, recovered) = try DurableStore.open(options: options, logger: lines.logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        #expect(lines.contains("5 write(s) replayed"), "\(lines.all)")
    }
}

/// SplitMix64, for a deterministic mix of writes.
struct SplitMixForTests {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
