// Where the log's fdatasync runs and how its latency is reported (`fsyncObserver`, the
// daemon's snapsync_fsync_duration_seconds): `always` on the caller's thread before sync()
// returns; `everysec` on the background thread, sync() not waiting for it.

import Foundation
import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncStore
#if canImport(Glibc)
    import Glibc
#endif

@Suite(.unitTests) struct StoreFsyncLatencyTests {
    /// Records what the observer was told, and on which thread.
    final class Observed: @unchecked Sendable {
        let lock = NSLock()
        var durations: [Duration] = []
        var threads: Set<pthread_t> = []
        func note(_ duration: Duration) {
            lock.lock()
            durations.append(duration)
            threads.insert(pthread_self())
            lock.unlock()
        }
        var count: Int {
            lock.lock()
            defer { lock.unlock() }
            return durations.count
        }
    }

    @Test func alwaysReportsEachFdatasyncBeforeSyncReturns() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(
            options: smallOptions(dir.data, fsync: .always, backgroundThread: true), logger: LogLines().logger)
        defer { try? store.close() }
        let observed = Observed()
        store.fsyncObserver = { observed.note($0) }
        let base = store.statistics.fsyncs
        try rooms.writeMany(10, to: store, syncEvery: 1000)
        #expect(try store.sync())
        #expect(observed.count == 1)
        #expect(store.statistics.fsyncs == base + 1)
        #expect(observed.threads == [pthread_self()])
        #expect(observed.durations.allSatisfy { $0 > .zero })
    }

    /// The background fdatasync is held on its thread: sync() returns all the same (the loop
    /// does not wait for it), the writes stay "unsynced" until it finishes, and its duration is
    /// reported on the loop's thread when its completion is taken in, not before.
    @Test func everysecFdatasyncRunsOffTheCallersThread() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let start = ContinuousClock.now
        let (store, _) = try DurableStore.open(
            options: smallOptions(dir.data, fsync: .everysec, segmentBytes: 1 << 20, backgroundThread: true),
            logger: LogLines().logger, now: start)
        defer { try? store.close() }
        #expect(store.usesBackgroundThread)
        let observed = Observed()
        store.fsyncObserver = { observed.note($0) }
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        // Held until the test lets it go, however slow the machine; released on every way out
        // (before the deferred close, which waits for the job).
        defer { release.signal() }
        store.injectBackgroundFault { job in
            if case .syncData = job {
                held.signal()
                release.wait()
            }
            return nil
        }
        try rooms.writeMany(5, to: store, syncEvery: 1000)
        #expect(try store.sync(now: start + .seconds(1)))
        // The job is running (held) on the background thread, and sync() has returned.
        held.wait()
        #expect(store.hasUnsyncedWrites)
        #expect(observed.count == 0)
        // A pass meanwhile neither waits nor starts another (one at a time, < 2 s old).
        try rooms.writeMany(1, to: store, syncEvery: 1000)
        #expect(try store.sync(now: start + .milliseconds(2500)) == false)
        release.signal()
        store.injectBackgroundFault(nil)
        try store.finishBackgroundWork()
        #expect(observed.count == 1)
        #expect(observed.threads == [pthread_self()])
    }
}
