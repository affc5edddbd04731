// The background thread: segment switches, the `everysec` fdatasync and deletions
// run off the loop, and nothing about durability changes: every written record survives a
// crash across many switches, old segments still go, a failure of background work comes back
// to the loop as a typed, fatal StoreError, and close() finishes what is in flight.

import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import Synchronization
import SnapSyncModel
@testable import SnapSyncStore
#if canImport(Glibc)
    import Glibc
#endif

@Suite(.unitTests) struct StoreBackgroundTests {
    /// Tiny segments, on the background thread.
    func threadedOptions(_ dir: TempDirectory, fsync: FsyncPolicy = .always) -> StoreOptions {
        smallOptions(dir.data, fsync: fsync, segmentBytes: 2 << 10, historyLimit: 8, backgroundThread: true)
    }

    /// Runs `passes` loop passes of `writesPerPass` writes each (sync after each pass, as the
    /// daemon's flush does) with a maintenance run every `maintainEvery` passes. Every other
    /// maintenance, the background work is let finish: passes without fdatasyncs outrun the
    /// thread (a pass takes microseconds here), which would leave nothing for the test to see,
    /// while the work handed over at the others overlaps the next passes' writes.
    func drive(
        _ store: DurableStore, _ rooms: inout Rooms, passes: Int, writesPerPass: Int = 4,
        maintainEvery: Int = 3
    ) throws {
        for pass in 0..<passes {
            try rooms.writeMany(writesPerPass, rooms: 3, payloadBytes: 60, to: store, syncEvery: writesPerPass)
            if pass % maintainEvery == 0 {
                try maintain(store, rooms)
                if pass % (2 * maintainEvery) == 0 { try store.finishBackgroundWork() }
            }
        }
    }

    /// Background work finished and maintenance run until nothing changes (bounded rounds).
    func settle(_ store: DurableStore, _ rooms: Rooms) throws {
        for _ in 0..<6 {
            try store.finishBackgroundWork()
            try maintain(store, rooms)
        }
        try store.finishBackgroundWork()
    }

    @Test(arguments: [FsyncPolicy.always, .everysec, .no])
    func manySwitchesKeepEveryWrite(fsync: FsyncPolicy) throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let lines = LogLines()
        do {
            let (store, _) = try DurableStore.open(options: threadedOptions(dir, fsync: fsync), logger: lines.logger)
            #expect(store.usesBackgroundThread)
            try drive(store, &rooms, passes: 300)
            try settle(store, rooms)
            let switches = lines.all.filter { $0.contains("started log segment") }.count
            #expect(switches >= 10, "segment switches: \(switches); \(lines.all.suffix(20))")
            #expect(store.statistics.segmentsDeleted >= 5)
            // Old segments went: the files on disk are the ones the store still needs.
            #expect(fileNames(dir.data).filter { $0.hasPrefix("wal-") && $0.hasSuffix(".log") } == store.segmentNames)
            #expect(store.segmentNames.count <= 2, "\(store.segmentNames)")
            // More writes after the last maintenance, then a crash: no close().
            try drive(store, &rooms, passes: 20, maintainEvery: 7)
        }
        let (store, recovered) = try DurableStore.open(options: threadedOptions(dir, fsync: fsync), logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        for room in recovered {
            #expect(room.history == Array(rooms.writes(of: room.name).suffix(8)), "\(room.name)")
        }
    }

    /// `always`: the closed segment's trim and fdatasync finish before the new segment's first
    /// fdatasync (recovery reads a closed segment that is not synced whole, followed by records,
    /// as damage).
    @Test func alwaysSyncsTheClosedSegmentBeforeTheNewOne() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(options: threadedOptions(dir), logger: LogLines().logger)
        defer { try? store.close() }
        var checked = 0
        for _ in 0..<200 {
            let before = store.activeSegmentName
            try rooms.writeMany(3, rooms: 3, payloadBytes: 60, to: store, syncEvery: 3)
            if store.activeSegmentName != before {
                // This pass's writes went to a new segment, and sync() has returned.
                #expect(store.background.closing.isEmpty)
                #expect(store.closedSegments.last.map(LogSegment.fileName) == before)
                checked += 1
            }
            try maintain(store, rooms)
            // The preparation or installation asked for is done: the next pass's first write
            // switches (and the close it hands over cannot be finished by then on its own).
            try store.finishBackgroundWork()
        }
        #expect(checked >= 3)
    }

    /// kill -9 while a closed segment's background work has not run yet, and the next segment
    /// already holds records: a copy of the directory taken then (what the kernel has, which
    /// is what a restart after kill -9 reads) opens with every written record.
    @Test(arguments: [FsyncPolicy.everysec, .no])
    func killBeforeTheClosedSegmentIsSyncedLosesNothing(fsync: FsyncPolicy) throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(options: threadedOptions(dir, fsync: fsync), logger: LogLines().logger)
        // The background thread holds every segment close until the test has taken its copy.
        let gate = Mutex(false)
        // Opened on every way out too: the store's deinit waits for the held job.
        defer { gate.withLock { $0 = true } }
        store.injectBackgroundFault { job in
            if case .closeSegment = job {
                while !gate.withLock({ $0 }) { usleep(1000) }
            }
            return nil
        }
        let first = store.activeSegmentName
        for _ in 0..<200 where store.activeSegmentName == first {
            try rooms.writeMany(3, rooms: 3, payloadBytes: 60, to: store, syncEvery: 3)
            try maintain(store, rooms)
            // Let a preparation or installation finish (not a held close: that would never).
            if store.background.closing.isEmpty { try store.finishBackgroundWork() }
        }
        #expect(store.activeSegmentName != first)
        try rooms.writeMany(6, rooms: 3, payloadBytes: 60, to: store, syncEvery: 3)
        #expect(!store.background.closing.isEmpty, "the close is still held")
        copyDirectory(dir.data, dir.path + "/killed")
        gate.withLock { $0 = true }
        try store.close()
        var options = threadedOptions(dir, fsync: fsync)
        options.directory = dir.path + "/killed"
        let (copy, recovered) = try DurableStore.open(options: options, logger: LogLines().logger)
        defer { try? copy.close() }
        expectSameRooms(recovered, rooms)
    }

    /// The MANIFEST that lists a new segment is written on the background thread: the switch
    /// returns while it is held there, no further segment is installed meanwhile (recovery takes
    /// in one unlisted segment, never two), and a kill -9 then (a copy of the directory) opens
    /// with every record, the new segment's included. Once written, the next switch can come.
    @Test(arguments: [FsyncPolicy.always, .no])
    func theManifestOfASwitchIsWrittenOffTheLoop(fsync: FsyncPolicy) throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(options: threadedOptions(dir, fsync: fsync), logger: LogLines().logger)
        let gate = Mutex(false)
        let held = Mutex(0)
        defer { gate.withLock { $0 = true } }
        store.injectBackgroundFault { job in
            if case .writeManifest = job {
                held.withLock { $0 += 1 }
                while !gate.withLock({ $0 }) { usleep(1000) }
            }
            return nil
        }
        // No checkpoints while the MANIFEST is held: a checkpoint's own MANIFEST would wait for it.
        let first = store.activeSegmentName
        for _ in 0..<200 where store.activeSegmentName == first {
            try rooms.writeMany(3, rooms: 3, payloadBytes: 60, to: store, syncEvery: 3)
            _ = try store.maintain(now: .now)
            if store.background.writingManifest == nil { try store.finishBackgroundWork() }
        }
        let second = store.activeSegmentName
        #expect(second != first)
        #expect(store.background.writingManifest != nil, "the switch returned with its MANIFEST still being written")
        // Past a segment's worth of writes, the next segment may be prepared but not installed.
        for _ in 0..<40 {
            try rooms.writeMany(3, rooms: 3, payloadBytes: 60, to: store, syncEvery: 3)
            _ = try store.maintain(now: .now + .seconds(600))
        }
        #expect(store.activeSegmentName == second, "no second unlisted segment")
        #expect(store.background.next?.installed != true)
        #expect(held.withLock { $0 } <= 1, "one MANIFEST in flight at most")
        copyDirectory(dir.data, dir.path + "/killed")
        let roomsAtKill = rooms
        gate.withLock { $0 = true }
        try store.finishBackgroundWork()
        #expect(store.background.writingManifest == nil)
        for _ in 0..<40 where store.activeSegmentName == second {
            try rooms.writeMany(3, rooms: 3, payloadBytes: 60, to: store, syncEvery: 3)
            try maintain(store, rooms)
            try store.finishBackgroundWork()
        }
        #expect(store.activeSegmentName != second, "switches go on once the MANIFEST is written")
        try store.close()
        var options = threadedOptions(dir, fsync: fsync)
        options.directory = dir.path + "/killed"
        let (copy, atKill) = try DurableStore.open(options: options, logger: LogLines().logger)
        try copy.close()
        expectSameRooms(atKill, roomsAtKill)
        let (reopened, recovered) = try DurableStore.open(options: threadedOptions(dir, fsync: fsync), logger: LogLines().logger)
        defer { try? reopened.close() }
        expectSameRooms(recovered, rooms)
    }

    /// The next segment prepared and installed, as the maintenance does when a switch is due.
    func readyNextSegment(_ store: DurableStore) throws {
        try store.prepareNextSegment()
        try store.finishBackgroundWork()
        store.background.switchDue = true
        try store.installNextSegment()
        try store.finishBackgroundWork()
    }

    /// A full disk while the background thread writes a switch's MANIFEST: not fatal, logged;
    /// the new segment stays the one unlisted segment, so the one after it is not installed
    /// until the maintenance has written the MANIFEST again.
    @Test func noSpaceForTheManifestOfASwitchHoldsTheNextSegmentBack() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let lines = LogLines()
        let (store, _) = try DurableStore.open(options: threadedOptions(dir), logger: lines.logger)
        defer { try? store.close() }
        store.injectBackgroundFault { job in
            if case .writeManifest = job { return StoreError.noSpace(path: Manifest.fileName, errno: ENOSPC) }
            return nil
        }
        try rooms.writeMany(6, rooms: 3, payloadBytes: 60, to: store, syncEvery: 3)
        let old = store.active.sequence
        try readyNextSegment(store)
        #expect(try store.switchSegmentIfReady(now: .now))
        try store.finishBackgroundWork()
        #expect(lines.contains("no space to rewrite the MANIFEST"), "\(lines.all)")
        #expect(store.background.writingManifest == nil)
        #expect(store.manifestSegmentsEnd == old + 1)
        try readyNextSegment(store)
        #expect(store.background.next?.installed == false)
        store.injectBackgroundFault(nil)
        _ = try store.maintain(now: .now)
        try store.finishBackgroundWork()
        #expect(try #require(try Manifest.read(directory: dir.data)).segments.upperBound == old + 2)
        try readyNextSegment(store)
        #expect(store.background.next?.installed == true)
        try rooms.writeMany(3, rooms: 3, payloadBytes: 60, to: store, syncEvery: 3)
        #expect(store.active.sequence == old + 2)
    }

    @Test func everysecSyncsOnTheBackgroundThread() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let start = ContinuousClock.now
        let (store, _) = try DurableStore.open(options: threadedOptions(dir, fsync: .everysec), logger: LogLines().logger, now: start)
        defer { try? store.close() }
        let base = store.statistics.fsyncs
        try rooms.writeMany(3, to: store, syncEvery: 1000)
        #expect(try store.sync(now: start + .milliseconds(500)) == false)
        #expect(try store.sync(now: start + .seconds(1)))
        // Handed over: still counted as unsynced until it has finished.
        try store.finishBackgroundWork()
        #expect(store.statistics.fsyncs == base + 1)
        #expect(!store.hasUnsyncedWrites)
        // At most one a second.
        try rooms.writeMany(3, to: store, syncEvery: 1000)
        #expect(try store.sync(now: start + .milliseconds(1500)) == false)
        #expect(try store.sync(now: start + .milliseconds(2000)))
    }

    /// A failed segment fdatasync on the background thread: writes are refused with the typed
    /// error (the daemon answers REJECT storage_failure), and sync() and maintain() throw it
    /// (the daemon stops without acknowledging).
    @Test func aFailedBackgroundFsyncIsFatalOnTheLoop() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let lines = LogLines()
        let (store, _) = try DurableStore.open(options: threadedOptions(dir), logger: lines.logger)
        store.injectBackgroundFault { job in
            if case .closeSegment(_, let path) = job { return StoreError.fsyncFailed(path: path, errno: EIO) }
            return nil
        }
        let seam: any RoomStore = store
        var failure: StoreError?
        for _ in 0..<100 where failure == nil {
            do {
                try rooms.writeMany(3, rooms: 3, payloadBytes: 60, to: store, syncEvery: 3)
                try maintain(store, rooms)
                try store.finishBackgroundWork()
            } catch let error as StoreError {
                failure = error
            }
        }
        guard case .fsyncFailed(let path, let e) = failure else {
            Issue.record("expected fsyncFailed, got \(String(describing: failure))")
            return
        }
        #expect(path.hasSuffix(".log"))
        #expect(e == EIO)
        #expect(lines.contains("background close"))
        #expect(throws: StoreError.self) { try seam.prepare(room: "room-0") }
        #expect(throws: StoreError.self) { try store.sync() }
        #expect(throws: StoreError.self) { try maintain(store, rooms) }
        do {
            try store.reserve()
            Issue.record("reserve() accepted a write after a failed fsync")
        } catch {
            #expect(error.isFatal)
            #expect("\(error)".contains("fsync of"))
        }
    }

    /// A failed unlink is fatal too, as it was on the loop.
    @Test func aFailedBackgroundUnlinkIsFatalOnTheLoop() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(options: threadedOptions(dir), logger: LogLines().logger)
        store.injectBackgroundFault { job in
            if case .removeFiles(_, let directory) = job { return StoreError.io(operation: "unlink", path: directory, errno: EACCES) }
            return nil
        }
        #expect(throws: StoreError.self) {
            try drive(store, &rooms, passes: 300)
            try settle(store, rooms)
        }
        #expect(throws: StoreError.self) { try store.reserve() }
    }

    /// A full disk while preparing the next segment is not fatal: logged, retried, and the log
    /// goes on in the active segment meanwhile.
    @Test func noSpaceForTheNextSegmentIsRetried() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let lines = LogLines()
        let (store, _) = try DurableStore.open(options: threadedOptions(dir), logger: lines.logger)
        defer { try? store.close() }
        store.injectBackgroundFault { job in
            if case .prepareSegment = job { return StoreError.noSpace(path: "wal", errno: ENOSPC) }
            return nil
        }
        let first = store.activeSegmentName
        try drive(store, &rooms, passes: 30)
        try settle(store, rooms)
        #expect(store.activeSegmentName == first)
        #expect(lines.contains("cannot start a new log segment"))
        store.injectBackgroundFault(nil)
        try settle(store, rooms)
        #expect(store.activeSegmentName != first)
        #expect(lines.contains("after a full disk"))
    }

    /// close() with work still queued on the background thread: it waits for it, leaves no
    /// temporary file, and everything written is there after a restart.
    @Test(arguments: [FsyncPolicy.always, .everysec, .no])
    func closeFinishesPendingBackgroundWork(fsync: FsyncPolicy) throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        do {
            let (store, _) = try DurableStore.open(options: threadedOptions(dir, fsync: fsync), logger: LogLines().logger)
            try drive(store, &rooms, passes: 60, maintainEvery: 1)
            // Whatever is in flight now (a preparation, a close, a deletion, an fdatasync) is
            // finished by close().
            try store.close()
        }
        #expect(!fileNames(dir.data).contains { $0.hasSuffix(".tmp") })
        let lines = LogLines()
        let (store, recovered) = try DurableStore.open(options: threadedOptions(dir, fsync: fsync), logger: lines.logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        // A clean close leaves nothing to repair.
        #expect(!lines.contains("cut off"))
        #expect(!lines.contains("trimmed"))
    }
}
