import Testing
import Dispatch
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

    @Test func manySmallPassesEachEndOnlyWhenEveryCallHasReturned() throws {
        // Passes of 1 to 64 indices, one at a time, as a busy daemon's are: a pass must not end
        // while a helper still runs a call of it or still holds the pass's closure (in a debug
        // build, `withoutActuallyEscaping` traps on a closure that outlives its pass).
        for count in [2, 3] {
            let threads = try IOThreads(count: count, batch: 1)
            defer { threads.stop() }
            let calls = UnsafeMutableBufferPointer<Int>.allocate(capacity: 64)
            defer { calls.deallocate() }
            var wrong = 0
            for pass in 0..<20_000 {
                let total = pass &* 37 % 64 + 1  // every size from 1 to 64, in a scrambled order
                calls.initialize(repeating: 0)
                threads.forEach(total) { index, _ in calls[index] += 1 }
                if !calls[0..<total].allSatisfy({ $0 == 1 }) { wrong += 1 }
            }
            #expect(wrong == 0, "\(wrong) passes of \(count) threads returned with an index run other than once")
        }
    }

    @Test func theCallersThreadTakesTheFrontAndTheHelpersTheBack() throws {
        // So that a connection that keeps its index pass after pass (a room's members) is sent
        // by the same thread each time: within a pass, every index the caller's thread ran is
        // below every index a helper ran.
        for count in [2, 3] {
            let threads = try IOThreads(count: count, batch: 4)
            defer { threads.stop() }
            let total = 256
            let seen = UnsafeMutableBufferPointer<Int>.allocate(capacity: total)
            defer { seen.deallocate() }
            var shared = 0
            for pass in 0..<100 {
                seen.initialize(repeating: -1)
                threads.forEach(total) { index, thread in
                    seen[index] = thread
                    if index % 8 == 0 { usleep(20) }  // so that the helpers get some
                }
                #expect(seen.allSatisfy { $0 >= 0 })
                let callers = seen.indices.filter { seen[$0] == 0 }
                let helpers = seen.indices.filter { seen[$0] > 0 }
                guard let lastOfCaller = callers.last, let firstOfHelpers = helpers.first else { continue }
                shared += 1
                #expect(
                    lastOfCaller < firstOfHelpers,
                    "pass \(pass), \(count) threads: the caller's thread ran \(lastOfCaller), a helper \(firstOfHelpers)")
                #expect(helpers.last == total - 1 && callers.first == 0)
            }
            #expect(shared > 0, "no pass of \(count) threads was shared with a helper")
        }
    }

    @Test func aPassOfOneBatchStaysOnTheCallersThread() throws {
        let threads = try IOThreads(count: 2, batch: 16)
        defer { threads.stop() }
        var used: Set<Int> = []
        threads.forEach(16) { _, thread in used.insert(thread) }
        #expect(used == [0])
        threads.forEach(0) { _, _ in Issue.record("nothing to run") }
    }

    @Test func aHelperThatWakesLateDoesNotHoldThePass() throws {
        // The helper is held before it claims anything, as a helper whose core the machine's
        // other work holds would be: the pass must end on the caller's thread alone, and the
        // helper, once it runs, must find nothing left of that pass and help with the next.
        let gate = DispatchSemaphore(value: 0)
        let held = Atomic<Bool>(true)
        let threads = try IOThreads(count: 2, batch: 1) { _ in
            if held.load(ordering: .acquiring) { gate.wait() }
        }
        defer { threads.stop() }
        let total = 64
        let calls = UnsafeMutableBufferPointer<Int>.allocate(capacity: total)
        defer { calls.deallocate() }
        calls.initialize(repeating: 0)
        let seen = UnsafeMutableBufferPointer<Int>.allocate(capacity: total)
        defer { seen.deallocate() }
        let returned = DispatchSemaphore(value: 0)
        // Read back only after `returned` is signalled, which orders the accesses.
        nonisolated(unsafe) let passCalls = calls
        nonisolated(unsafe) let passSeen = seen
        let pass = { @Sendable in
            threads.forEach(total) { index, thread in
                passCalls[index] += 1
                passSeen[index] = thread
            }
            returned.signal()
        }
        DispatchQueue.global().async(execute: pass)
        let ended = returned.wait(timeout: .now() + 10) == .success
        held.store(false, ordering: .releasing)
        gate.signal()
        if !ended { _ = returned.wait(timeout: .now() + 10) }
        #expect(ended, "the pass waited for a helper that had claimed nothing")
        #expect(calls.allSatisfy { $0 == 1 })
        #expect(seen.allSatisfy { $0 == 0 })

        // The late helper's wake-up is spent; the next passes still run every index once.
        for _ in 0..<50 {
            calls.initialize(repeating: 0)
            threads.forEach(total) { index, _ in
                calls[index] += 1
                if index % 16 == 0 { usleep(100) }
            }
            #expect(calls.allSatisfy { $0 == 1 })
        }
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
