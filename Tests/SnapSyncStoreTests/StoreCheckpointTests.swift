// Checkpoints let the log be truncated: segments go once every room in them is checkpointed,
// and a restart rebuilds each room from its checkpoint plus the log after it.

import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncStore

@Suite(.unitTests) struct StoreCheckpointTests {
    @Test func checkpointsLetOldSegmentsGo() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let options = smallOptions(dir.data, segmentBytes: 4 << 10, historyLimit: 8)
        let start = ContinuousClock.now
        do {
            let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger, now: start)
            for round in 0..<20 {
                try rooms.writeMany(10, rooms: 4, payloadBytes: 100, to: store)
                try maintain(store, rooms, now: start + .milliseconds(round))
            }
            #expect(store.statistics.checkpoints > 4)
            #expect(store.statistics.segmentsDeleted > 5)
            // At most the active segment and the one it replaced are left.
            #expect(store.segmentNames.count <= 2, "\(store.segmentNames)")
            #expect(fileNames(dir.data).filter { $0.hasPrefix("wal-") }.count == store.segmentNames.count)
            // One checkpoint file per room, never more.
            #expect(fileNames(dir.data).filter { $0.hasPrefix("ckpt-") }.count == 4)
            try store.close()
        }
        let (store, recovered) = try DurableStore.open(options: options, logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        for room in recovered {
            // History survives log truncation: kept in the checkpoint, extended by the log.
            #expect(room.history == Array(rooms.writes(of: room.name).suffix(8)), "\(room.name)")
        }
    }

    /// `maintain` names the rooms pinning a closed segment, the oldest pin first, and nothing
    /// else; `checkpoint` reads their images only until `checkpointBytesPerCall` is spent (so
    /// the daemon builds no image it would not write), and the rest are named again next time.
    @Test func dueRoomsAreNamedOldestFirstAndTakenWithinTheBudget() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        var options = smallOptions(dir.data)
        options.checkpointBytesPerCall = 1
        let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger)
        defer { try? store.close() }
        try rooms.write("late", [.appendSections(["s"])], to: store)
        try rooms.write("idle", [.appendSections(["s"])], to: store)
        try store.sync()
        try store.checkpoint(rooms.image("idle")!)
        try store.switchSegmentNow()
        try rooms.write("early", [.appendSections(["s"])], to: store)
        try rooms.write("late", [.appendItems(["x"], toSection: "s")], to: store)
        try store.sync()
        try store.switchSegmentNow()
        // "late" pins the first segment, "early" the second; "idle" is checkpointed.
        #expect(try store.maintain(now: .now) == ["late", "early"])
        var read: [String] = []
        try store.checkpoint(
            ["late", "early"].lazy.compactMap { name in
                read.append(name)
                return rooms.image(name)
            })
        #expect(read == ["late"], "one image fills a budget of one byte")
        #expect(try store.maintain(now: .now) == ["early"])
        try store.checkpoint(["early"].compactMap { rooms.image($0) })
        #expect(try store.maintain(now: .now) == [])
        #expect(store.statistics.checkpoints == 3)
    }

    /// `checkpointBatchDuration`: a batch starts no new file once its time is spent on the
    /// store's clock, after at least one, and reads no further image; the rooms left are named
    /// again by the next `maintain`. The clock is the test's: each image read costs 20 ms of it.
    @Test func checkpointBatchStopsOnceItsTimeIsSpent() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        var options = smallOptions(dir.data)
        options.checkpointBatchDuration = .milliseconds(50)
        let start = ContinuousClock.now
        let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger, now: start)
        defer { try? store.close() }
        var now = start
        store.batchClock = { now }
        try rooms.writeMany(5, rooms: 5, to: store)
        try store.switchSegmentNow(now: start)
        let due = try store.maintain(now: start)
        #expect(due.count == 5)
        var read: [String] = []
        try store.checkpoint(
            due.lazy.compactMap { name in
                read.append(name)
                now += .milliseconds(20)
                return rooms.image(name)
            })
        // Asked at +0, +20 and +40 ms; at +60 the 50 ms are spent.
        #expect(read == Array(due.prefix(3)))
        #expect(store.statistics.checkpoints == 3)
        let left = try store.maintain(now: start)
        #expect(left == Array(due.suffix(2)))
        // No time passes on the clock: the next batch takes both.
        try store.checkpoint(left.compactMap { rooms.image($0) })
        #expect(store.statistics.checkpoints == 5)
        #expect(try store.maintain(now: start) == [])
    }

    @Test func restartRebuildsFromCheckpointPlusLog() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let options = smallOptions(dir.data, historyLimit: 4)
        do {
            let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger)
            try rooms.writeMany(12, rooms: 2, to: store)
            // Checkpoint room-0 only, at version 6.
            try store.checkpoint(rooms.image("room-0")!)
            try rooms.writeMany(5, rooms: 1, to: store)
            try store.sync()
            // Crash: no close.
        }
        let (store, recovered) = try DurableStore.open(options: options, logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        #expect(recovered.map(\.version) == [11, 6])
        #expect(recovered[0].history.map(\.version) == [8, 9, 10, 11])
    }

    /// A write id's fingerprint comes back with it, from the log and from a checkpoint's
    /// history, so that a write reusing the id after a restart is still told from a retry.
    @Test func fingerprintsComeBackFromTheLogAndFromCheckpoints() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let options = smallOptions(dir.data, historyLimit: 4)
        let section: [SnapshotOperation] = [.appendSections([SnapshotElement("s")])]
        let item: [SnapshotOperation] = [.appendItems([SnapshotElement("i")], toSection: "s")]
        do {
            let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger)
            try rooms.write("checkpointed", section, writeID: [1], fingerprint: 0x0102_0304_0506_0708, to: store)
            try rooms.write("logged", section, writeID: [2], fingerprint: 0xfedc_ba98_7654_3210, to: store)
            try rooms.write("logged", item, writeID: [3], to: store)
            try store.sync()
            try store.checkpoint(rooms.image("checkpointed")!)
            try store.sync()
            // Crash: no close.
        }
        let (store, recovered) = try DurableStore.open(options: options, logger: LogLines().logger)
        defer { try? store.close() }
        let byName = Dictionary(uniqueKeysWithValues: recovered.map { ($0.name, $0.history) })
        #expect(byName["checkpointed"]?.map(\.fingerprint) == [0x0102_0304_0506_0708])
        #expect(byName["logged"]?.map(\.fingerprint) == [0xfedc_ba98_7654_3210, nil])
        #expect(byName["logged"]?.map(\.writeID) == [[2], [3]])
    }

    /// After a restart the old segments are closed segments: the first maintenance checkpoints
    /// the rooms replayed from them and deletes them; the state survives another restart.
    @Test func segmentsFromBeforeARestartAreCheckpointedAway() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(10, rooms: 2, to: store)
            // Crash: no close.
        }
        do {
            let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            var restored = Rooms(recovered: recovered)
            restored.writes = rooms.writes
            #expect(store.segmentNames.count == 2)
            try maintain(store, restored)
            #expect(store.statistics.checkpoints == 2)
            #expect(store.segmentNames.count == 1)
            #expect(fileNames(dir.data).filter { $0.hasPrefix("wal-") } == store.segmentNames)
            try store.close()
        }
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        for room in recovered {
            #expect(room.history == Array(rooms.writes(of: room.name).suffix(16)))
        }
    }

    @Test func aSegmentIsClosedAfterTheCheckpointInterval() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let options = smallOptions(dir.data)
        let start = ContinuousClock.now
        let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger, now: start)
        defer { try? store.close() }
        let first = store.activeSegmentName
        try rooms.writeMany(3, to: store)
        try maintain(store, rooms, now: start + .seconds(59))
        #expect(store.activeSegmentName == first)
        #expect(store.statistics.checkpoints == 0)
        try maintain(store, rooms, now: start + .seconds(60))
        #expect(store.activeSegmentName != first)
        #expect(store.statistics.checkpoints == 3)
        #expect(!fileNames(dir.data).contains(first))
        // Nothing written since: no new segment, no checkpoint.
        try maintain(store, rooms, now: start + .seconds(200))
        #expect(store.statistics.checkpoints == 3)
        #expect(store.segmentNames.count == 1)
    }

    /// Only rooms written since their last checkpoint are checkpointed again.
    @Test func idleRoomsAreNotRewritten() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let start = ContinuousClock.now
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger, now: start)
        defer { try? store.close() }
        try rooms.writeMany(4, rooms: 4, to: store)
        try maintain(store, rooms, now: start + .seconds(61))
        #expect(store.statistics.checkpoints == 4)
        try rooms.write("room-2", [.appendItems(["z"], toSection: "s")], to: store)
        try store.sync()
        try maintain(store, rooms, now: start + .seconds(200))
        #expect(store.statistics.checkpoints == 5)
    }

    /// A crash between writing a room's new checkpoint and removing its old one leaves two:
    /// the newer wins and the older is removed.
    @Test func theNewerOfTwoCheckpointsWins() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(3, rooms: 1, to: store)
            try store.checkpoint(rooms.image("room-0")!)
            let old = fileNames(dir.data).first { $0.hasPrefix("ckpt-") }!
            let oldBytes = readFile(dir.data + "/" + old)
            try rooms.writeMany(2, rooms: 1, to: store)
            try store.checkpoint(rooms.image("room-0")!)
            writeFile(dir.data + "/" + old, oldBytes)  // as if the removal never happened
            try store.close()
        }
        #expect(fileNames(dir.data).filter { $0.hasPrefix("ckpt-") }.count == 2)
        let lines = LogLines()
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: lines.logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        #expect(fileNames(dir.data).filter { $0.hasPrefix("ckpt-") }.count == 1)
        #expect(lines.contains("superseded"))
    }

    @Test func aDamagedCheckpointRefusesToStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        do {
            var rooms = Rooms()
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(3, rooms: 1, to: store)
            try store.checkpoint(rooms.image("room-0")!)
            try store.close()
        }
        let name = dir.data + "/" + fileNames(dir.data).first { $0.hasPrefix("ckpt-") }!
        var bytes = readFile(name)
        bytes[bytes.count / 2] ^= 0x01
        writeFile(name, bytes)
        #expect {
            _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        } throws: { error in
            guard case .corrupt(let path, _, let reason) = error as? StoreError else { return false }
            return path == name && reason.contains("not an unfinished write")
        }
    }

    /// A big room: the checkpoint holds its whole snapshot; the digest is checked on load.
    @Test func largeRoomCheckpointRoundTrips() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        var options = smallOptions(dir.data)
        options.maxDiffFrameBytes = 1 << 20
        do {
            let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger)
            try rooms.write("big", [.appendSections(["s1", "s2"])], to: store)
            for chunk in 0..<20 {
                let items = (0..<1000).map { SnapshotElement(SnapshotIdentifier(uint64: UInt64(chunk * 1000 + $0)), payload: SnapshotPayload("payload \($0)")) }
                try rooms.write("big", [.appendItems(items, toSection: chunk % 2 == 0 ? "s1" : "s2")], to: store)
                try store.sync()
            }
            try store.checkpoint(rooms.image("big")!)
            try store.close()
        }
        let (store, recovered) = try DurableStore.open(options: options, logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        #expect(recovered.first?.snapshot.numberOfItems == 20_000)
    }
}
