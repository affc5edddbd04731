import Foundation
import SnapSync

/// A wall clock that stands still until the test moves it (`Configuration.clock`): the client's
/// token refreshes happen when the test advances the clock to them, never because real time
/// passed, so a slow or loaded machine changes nothing but how long the test takes.
///
/// `sleep(until:)` suspends until `advance(to:)` or `advance(by:)` reaches its deadline. The test
/// waits for the client to plan a refresh (`nextSleeper()`) rather than for time, and sees every
/// deadline ever asked for (`deadlines`), so it can check what was planned and when.
package final class ManualWallClock: WallClock, @unchecked Sendable {
    // @unchecked: every stored property below is read and written with `lock` held only.
    private let lock = NSLock()
    private var current: Double
    private var sleepers: [UInt64: Sleeper] = [:]
    private var nextSleeperID: UInt64 = 0
    private var requested: [Double] = []

    private struct Sleeper {
        var deadline: Double
        var continuation: CheckedContinuation<Void, any Error>
    }

    /// A clock at `now` seconds since 1970.
    package init(now: Double) {
        current = now
    }

    package func now() -> Double {
        lock.withLock { current }
    }

    /// Every deadline `sleep(until:)` was called with, in order, past ones and cancelled ones too.
    package var deadlines: [Double] {
        lock.withLock { requested }
    }

    /// The deadlines of the sleepers still suspended, earliest first.
    package var waitingDeadlines: [Double] {
        lock.withLock { sleepers.values.map(\.deadline).sorted() }
    }

    package func sleep(until deadline: Double) async throws {
        let id: UInt64? = lock.withLock {
            requested.append(deadline)
            guard deadline > current else { return nil }
            nextSleeperID += 1
            return nextSleeperID
        }
        guard let id else { return try Task.checkCancellation() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Bool = lock.withLock {
                    // Cancelled before the sleeper was registered: the handler below found nothing.
                    if Task.isCancelled { return true }
                    sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return false
                }
                if resumeNow { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let sleeper = lock.withLock { sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock to `time` (never back) and wakes every sleeper whose deadline it reached.
    package func advance(to time: Double) {
        let due: [Sleeper] = lock.withLock {
            current = max(current, time)
            let due = sleepers.filter { $0.value.deadline <= current }
            for id in due.keys { sleepers[id] = nil }
            return Array(due.values)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Moves the clock `seconds` forward, waking the sleepers it reaches.
    package func advance(by seconds: Double) {
        advance(to: now() + seconds)
    }

    /// Waits until someone sleeps on the clock and returns the earliest deadline waited for.
    /// `timeout` (real time) only stops a hang, when nothing ever sleeps: it is no assertion
    /// about speed, so it is generous.
    package func nextSleeper(timeout: Duration = .seconds(120)) async throws -> Double {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let first = waitingDeadlines.first { return first }
            guard ContinuousClock.now < deadline else { throw TimedOut("a sleeper on the manual clock (now \(now()))") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
