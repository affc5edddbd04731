import Testing
import Synchronization
@testable import SnapSyncServer
#if canImport(Glibc)
    import Glibc
#endif

// The flush's helper threads on their own: every index of a pass is handed out exactly once,
// pass after pass, whoever claims it; a pass of one batch never leaves the caller's thread.

@Suite struct IOThreadsTests {
    @Test func everyIndexOfEveryPassRunsExactlyOnce() throws {
        let threads = try IOThreads(count: 3, batch: 7)
        defer { threads.stop() }
        let total = 1_000
        let calls = UnsafeMutableBufferPointer<Int>.allocate(capacity: total)
        defer { calls.deallocate() }
        var helpersUsed = Set<Int>()
        let seen = UnsafeMutableBufferPointer<Int>.allocate(capacity: total)
        defer { seen.deallocate() }
        for pass in 0..<200 {
            calls.initialize(repeating: 0)
            let count = pass % 2 == 0 ? total : pass % 50 + 1
            threads.forEach(count) { index, thread in
                calls[index] += 1  // each index is its own slot: no two threads share one
                seen[index] = thread
                // A little work per index, so that the helpers get some before it is all claimed.
                if pass % 2 == 0 && index % 100 == 0 { usleep(200) }
            }
            #expect(calls[0..<count].allSatisfy { $0 == 1 }, "pass \(pass): an index ran \(calls[0..<count].max() ?? 0) times or not at all")
            #expect(calls[count...].allSatisfy { $0 == 0 })
            for index in 0..<count { helpersUsed.insert(seen[index]) }
        }
        #expect(helpersUsed.isSubset(of: [0, 1, 2]))
        #expect(helpersUsed.count > 1, "no pass of 1,000 indices was shared with a helper")
    }

    @Test func aPassOfOneBatchStaysOnTheCallersThread() throws {
        let threads = try IOThreads(count: 2, batch: 16)
        defer { threads.stop() }
        var used: Set<Int> = []
        threads.forEach(16) { _, thread in used.insert(thread) }
        #expect(used == [0])
        threads.forEach(0) { _, _ in Issue.record("nothing to run") }
    }

    @Test func stopEndsTheHelpersAndCanBeRepeated() throws {
        let threads = try IOThreads(count: 4, batch: 1)
        let ran = Atomic<Int>(0)
        threads.forEach(100) { _, _ in ran.add(1, ordering: .relaxed) }
        #expect(ran.load(ordering: .relaxed) == 100)
        threads.stop()
        threads.stop()
    }

    @Test func theDefaultFollowsTheCoresThisProcessMayUse() {
        let cores = IOThreads.availableCores()
        #expect(cores >= 1)
        #expect(cores <= max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }
}
