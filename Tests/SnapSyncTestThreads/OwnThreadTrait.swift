public import Testing
import Foundation

/// Runs a suite, its tests and its nested suites on a thread of their own, off Swift's
/// cooperative pool: see `ThreadExecutor` for why synchronous tests need it.
///
/// The suite's tests are child tasks of the scope, so they inherit its executor preference. The
/// thread runs one job at a time: the synchronous tests on it run one after another, and an async
/// test on it waits for the synchronous test in progress before it resumes. So it is for suites of
/// synchronous tests; async tests that wait on real time belong on the pool. (A `.timeLimit`'s
/// timer is a child task too: it can fire only between two jobs, so it does not cut a
/// synchronous test short, which it could not have stopped anyway.)
///
/// Suites that name the same thread share it: the synchronous unit tests of every target share
/// "unit tests" (`.unitTests`), whose executor has a thread per core. Where task executors do not exist (Apple systems before macOS 15 and iOS 18),
/// the suite runs on the pool as any other.
public struct OwnThreadTrait: SuiteTrait, TestScoping {
    /// A `ThreadExecutor` where task executors exist, else nil.
    fileprivate let executor: (any Sendable)?

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *), let executor = executor as? ThreadExecutor {
            try await withTaskExecutorPreference(executor) { try await function() }
        } else {
            try await function()
        }
    }
}

extension Trait where Self == OwnThreadTrait {
    /// The suite runs on the thread named `name`, which only suites naming it share.
    public static func ownThread(_ name: String) -> Self {
        ownThreads(name, count: 1)
    }

    /// The synchronous suites of the unit lane: off the cooperative pool, on a thread per core.
    /// Nothing else runs in the unit lane's process, and its suites neither block for long nor
    /// wait on real time, so they may use every core.
    public static var unitTests: Self {
        ownThreads("unit tests", count: ProcessInfo.processInfo.activeProcessorCount)
    }

    private static func ownThreads(_ name: String, count: Int) -> Self {
        if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *) {
            OwnThreadTrait(executor: ThreadExecutor.named(name, threads: count))
        } else {
            OwnThreadTrait(executor: nil)
        }
    }
}
