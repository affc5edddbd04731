// The fsync policies: `always` is one fdatasync per pass with writes (group commit), `everysec`
// at most one a second, `no` none; every policy writes the records before sync() returns.

import Foundation
import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncStore
#if canImport(Glibc)
    import Glibc
#endif

@Suite(.unitTests) struct StoreSyncTests {
    @Test func alwaysSyncsOncePerPassWithWrites() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data, fsync: .always), logger: LogLines().logger)
        defer { try? store.close() }
        let base = store.statistics.fsyncs
        // One pass: 50 writes in 5 rooms, then one sync.
        try rooms.writeMany(50, rooms: 5, to: store, syncEvery: 1000)
        #expect(store.hasUnsyncedWrites)
        #expect(try store.sync())
        #expect(store.statistics.fsyncs == base + 1)
        #expect(!store.hasUnsyncedWrites)
        // A pass without writes syncs nothing.
        #expect(try store.sync() == false)
        #expect(store.statistics.fsyncs == base + 1)
        try rooms.writeMany(1, to: store, syncEvery: 1000)
        #expect(try store.sync())
        #expect(store.statistics.fsyncs == base + 2)
        #expect(store.statistics.recordsAppended == 51)
    }

    @Test func everysecSyncsAtMostOnceASecond() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let start = ContinuousClock.now
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data, fsync: .everysec), logger: LogLines().logger, now: start)
        defer { try? store.close() }
        let base = store.statistics.fsyncs
        try rooms.writeMany(3, to: store, syncEvery: 1000)
        #expect(try store.sync(now: start + .milliseconds(300)) == false)
        #expect(try store.sync(now: start + .milliseconds(999)) == false)
        #expect(store.hasUnsyncedWrites)
        #expect(try store.sync(now: start + .milliseconds(1000)))
        #expect(store.statistics.fsyncs == base + 1)
        try rooms.writeMany(3, to: store, syncEvery: 1000)
        #expect(try store.sync(now: start + .milliseconds(1500)) == false)
        // The loop went idle: the timer's maintain() does the due fdatasync.
        try maintain(store, rooms, now: start + .milliseconds(2000))
        #expect(store.statistics.fsyncs == base + 2)
        #expect(!store.hasUnsyncedWrites)
    }

    @Test func noNeverSyncsTheLogButStillWritesIt() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let start = ContinuousClock.now
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data, fsync: .no), logger: LogLines().logger, now: start)
            let base = store.statistics.fsyncs
            try rooms.writeMany(20, to: store)
            #expect(try store.sync(now: start + .seconds(10)) == false)
            #expect(store.statistics.fsyncs == base)
            // Dropped without close: the records were written to the kernel by sync().
        }
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
    }

    /// The log grows by preallocation: the file is extended ahead of the data, in steps.
    @Test func reserveAllocatesAheadInSteps() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let options = smallOptions(dir.data)
        let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger)
        defer { try? store.close() }
        let path = dir.data + "/" + store.activeSegmentName
        #expect(readFile(path).count == LogSegment.headerSize + options.preallocationBytes)
        try rooms.writeMany(200, rooms: 2, payloadBytes: 200, to: store)
        let size = readFile(path).count
        let (_, end) = recordOffsets(readFile(path))
        #expect(size - end >= options.maxWriteRecordBytes, "one more write always fits")
        #expect(size > LogSegment.headerSize + options.preallocationBytes)
    }
}

/// A full disk: writes are refused before anything changes, everything accepted before stays
/// readable and durable, and writes resume once space is freed. Uses a 1 MiB tmpfs, which
/// needs root (CI runs as root); the integration test DurabilityDiskFullTests covers the same
/// path without root, through RLIMIT_FSIZE.
@Suite(.enabled(if: getuid() == 0, "mounting a small tmpfs needs root"), .unitTests)
struct StoreSpaceTests {
    @Test func aFullDiskRejectsWritesAndKeepsWhatWasAccepted() throws {
        let tmpfs = SmallTmpfs("store-full")
        defer { tmpfs.remove() }
        let mnt = tmpfs.mnt
        let data = mnt + "/data"
        var options = smallOptions(data)
        options.preallocationBytes = 64 << 10
        var rooms = Rooms()
        var accepted = Rooms()
        var rejected = 0
        let lines = LogLines()
        do {
            let (store, _) = try DurableStore.open(options: options, logger: lines.logger)
            // Fill the disk with other data, leaving some room for the log.
            #expect(fillFile(mnt + "/filler", bytes: 11 * (64 << 10)))
            for _ in 0..<400 {
                do {
                    try rooms.writeMany(1, rooms: 2, payloadBytes: 1000, to: store)
                    accepted = rooms
                } catch let error as StoreError {
                    guard case .noSpace = error else { throw error }
                    rejected += 1
                    rooms = accepted
                }
            }
            #expect(rejected > 0)
            #expect(accepted.writes.count > 10)
            #expect(lines.contains("disk full"))
            // Space comes back: writes are accepted again.
            try FileManager.default.removeItem(atPath: mnt + "/filler")
            try rooms.writeMany(1, rooms: 2, payloadBytes: 1000, to: store)
            accepted = rooms
            #expect(lines.contains("available again"))
            // Crash: no close.
        }
        let (store, recovered) = try DurableStore.open(options: options, logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, accepted)
    }
}
