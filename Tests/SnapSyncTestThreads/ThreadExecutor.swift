import Foundation

/// A task executor with threads of its own (one, unless told otherwise), which take its jobs in
/// order: with one thread, one at a time.
///
/// Tests that block (sockets with deadlines, child processes, a libevent loop driven for
/// seconds) run here instead of on Swift's cooperative pool. That pool is as wide as the
/// machine has cores, two on CI: two blocking tests at once held all of it, and every async
/// test of the process then waited 10–30 s between two steps, long enough for the daemons it
/// talked to to time it out.
///
/// The threads are started by the first job and live as long as the process: the suites that
/// use them end with the test run. The unit lane's synchronous suites share one executor with a
/// thread per core (`.unitTests`), since nothing else runs in that process.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
public final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let name: String
    private let threads: Int
    // Guards `jobs` and `started`; the threads wait on it for the next job.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var started = false

    public init(name: String, threads: Int = 1) {
        precondition(threads >= 1, "ThreadExecutor \(name) needs a thread")
        self.name = name
        self.threads = threads
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        defer { condition.unlock() }
        jobs.append(job)
        if !started {
            started = true
            for _ in 0..<threads {
                let thread = Thread { [self] in run() }
                thread.name = name
                thread.start()
            }
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
    /// The executor of the threads named `name`, made when first asked for (with `threads`
    /// threads): suites that name the same thread share it, across test targets (they run in
    /// one process).
    public static func named(_ name: String, threads: Int = 1) -> ThreadExecutor {
        namedExecutors.lock.withLock {
            if let executor = namedExecutors.byName[name] as? ThreadExecutor { return executor }
            let executor = ThreadExecutor(name: name, threads: threads)
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
