import Foundation

/// A task executor with one thread of its own, which runs its jobs one at a time, in order.
///
/// Tests that block (sockets with deadlines, child processes, a libevent loop driven for
/// seconds) run here instead of on Swift's cooperative pool. That pool is as wide as the
/// machine has cores, two on CI: two blocking tests at once held all of it, and every async
/// test of the process then waited 10–30 s between two steps, long enough for the daemons it
/// talked to to time it out.
///
/// The thread is started by the first job and lives as long as the process: the suites that
/// use it end with the test run.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
public final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let name: String
    // Guards `jobs` and `started`; the thread waits on it for the next job.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var started = false

    public init(name: String) {
        self.name = name
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        defer { condition.unlock() }
        jobs.append(job)
        if !started {
            started = true
            let thread = Thread { [self] in run() }
            thread.name = name
            thread.start()
        }
        condition.signal()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            // Removing the first of a few waiting jobs: O(waiting), and rarely more than one.
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
extension ThreadExecutor {
    /// The executor of the thread named `name`, made when first asked for: suites that name the
    /// same thread share it, across test targets (they run in one process).
    public static func named(_ name: String) -> ThreadExecutor {
        namedExecutors.lock.withLock {
            if let executor = namedExecutors.byName[name] as? ThreadExecutor { return executor }
            let executor = ThreadExecutor(name: name)
            namedExecutors.byName[name] = executor
            return executor
        }
    }
}

/// `ThreadExecutor.named`'s executors, as `AnyObject`: a global cannot name a type that exists
/// only on newer Apple systems.
private final class NamedExecutors: @unchecked Sendable {
    let lock = NSLock()
    var byName: [String: AnyObject] = [:]
}

private let namedExecutors = NamedExecutors()
