#if canImport(Glibc)
    internal import Glibc
#endif

/// The store's background thread: runs `BackgroundJob`s, one at a time, in the order they
/// were submitted, so that the event loop never waits for a segment's fdatasync, a segment's
/// creation or an unlink (each used to stall the loop for 20-250 ms at every
/// segment switch).
///
/// One thread and one FIFO queue, so that the jobs' effects on disk happen in submission order:
/// a closed segment's trim and fdatasync finish before any later fdatasync of the next segment
/// (recovery relies on it, docs/persistence.md). The queue is bounded (`capacity`): `submit`
/// blocks while it is full. The store never has more than a handful of jobs in flight (one of
/// each kind), so that is a safety net, not a path.
///
/// The loop learns of finished jobs by calling `takeCompletions()` (from `sync()` once per pass
/// and from the one-second maintenance), and can wait for one job with `wait(for:)`. Errors are
/// carried in the completions, never thrown on the background thread.
///
/// `inline` runs each job on the caller's thread inside `submit`: no thread at all, every step
/// deterministic (the unit tests use it; the daemon does not).
///
/// Thread-safety: every method is for the owner's thread (the loop); the monitor (`Monitor`, a
/// mutex and two conditions) guards what the worker shares with it. `shutdown()` lets the queued
/// jobs finish, then joins the thread.
final class BackgroundIO: @unchecked Sendable {
    let inline: Bool
    let capacity: Int

    /// What the worker shares with the owner, under the monitor's mutex.
    private struct Shared {
        var queue: [(ticket: UInt64, job: BackgroundJob)] = []
        var completions: [BackgroundCompletion] = []
        /// Jobs finish in ticket order (one worker, FIFO), so "ticket t is done" is `t <= finishedThrough`.
        var finishedThrough: UInt64 = 0
        var stopping = false
        var fault: (@Sendable (BackgroundJob) -> StoreError?)?
    }

    /// What threads wait for.
    private enum Wake: Int, CaseIterable {
        /// Signalled when a job is queued or shutdown is asked for.
        case workQueued
        /// Broadcast when a job finishes.
        case jobFinished
    }

    private let shared = Monitor<Shared, Wake>(Shared())

    // The owner's only.
    private var nextTicket: UInt64 = 1
    private var thread: pthread_t?

    init(inline: Bool, capacity: Int = 16) {
        self.inline = inline
        self.capacity = max(1, capacity)
        if !inline { startThread() }
    }

    deinit {
        shutdown()
    }

    private func startThread() {
        var handle = pthread_t()
        // The worker holds its own reference until it exits, so the object outlives it.
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(
            &handle, nil,
            { raw in
                let io = Unmanaged<BackgroundIO>.fromOpaque(raw!).takeRetainedValue()
                io.work()
                return nil
            }, context)
        guard rc == 0 else {
            // No thread (EAGAIN: the process is at its thread limit): run the jobs inline.
            Unmanaged<BackgroundIO>.fromOpaque(context).release()
            return
        }
        thread = handle
    }

    /// Whether the jobs really run on another thread (false when `inline`, or when the thread
    /// could not be created).
    var isThreaded: Bool { thread != nil }

    /// Queues `job`; returns its ticket (increasing from 1). Blocks while `capacity` jobs are
    /// queued. Inline (no thread), the job has run and its completion is waiting when this returns.
    @discardableResult
    func submit(_ job: BackgroundJob) -> UInt64 {
        let ticket = nextTicket
        nextTicket += 1
        guard thread != nil else {
            let result = run(job)
            shared.withLock { shared in
                shared.completions.append(BackgroundCompletion(ticket: ticket, job: job, result: result.result, elapsed: result.elapsed))
                shared.finishedThrough = ticket
            }
            return ticket
        }
        let capacity = capacity
        shared.withLock(whenever: .jobFinished, { $0.queue.count < capacity }) { shared in
            shared.queue.append((ticket, job))
            self.shared.signal(.workQueued)
        }
        return ticket
    }

    /// The completions of the jobs finished since the last call, in ticket order.
    /// - Complexity: one uncontended mutex lock when nothing finished.
    func takeCompletions() -> [BackgroundCompletion] {
        shared.withLock { shared in
            guard !shared.completions.isEmpty else { return [] }
            let taken = shared.completions
            shared.completions.removeAll()
            return taken
        }
    }

    func isFinished(_ ticket: UInt64) -> Bool {
        shared.withLock { ticket <= $0.finishedThrough }
    }

    /// Blocks until job `ticket` (and so every job submitted before it) has finished.
    func wait(for ticket: UInt64) {
        shared.withLock(whenever: .jobFinished, { $0.finishedThrough >= ticket }) { _ in }
    }

    /// Blocks until every job submitted so far has finished.
    func waitForAll() { wait(for: nextTicket - 1) }

    /// Lets the queued jobs finish, then ends and joins the thread. Idempotent; `submit` after
    /// it runs jobs inline.
    func shutdown() {
        guard let handle = thread else { return }
        shared.withLock { shared in
            shared.stopping = true
            self.shared.signal(.workQueued)
        }
        pthread_join(handle, nil)
        thread = nil
    }

    /// Makes every later job whose `fault` returns an error fail with it, without running (tests).
    func injectFault(_ fault: (@Sendable (BackgroundJob) -> StoreError?)?) {
        shared.withLock { $0.fault = fault }
    }

    // MARK: - The worker

    private func work() {
        while true {
            let next = shared.withLock(whenever: .workQueued, { !$0.queue.isEmpty || $0.stopping }) { shared in
                shared.queue.isEmpty ? nil : shared.queue.removeFirst()
            }
            guard let (ticket, job) = next else { break }
            let result = run(job)
            shared.withLock { shared in
                shared.completions.append(BackgroundCompletion(ticket: ticket, job: job, result: result.result, elapsed: result.elapsed))
                shared.finishedThrough = ticket
                self.shared.broadcast(.jobFinished)
            }
        }
    }

    /// Runs `job`, timed (the fdatasync latency the daemon's metrics report).
    private func run(_ job: BackgroundJob) -> (result: Result<BackgroundOutcome, StoreError>, elapsed: Duration) {
        let fault = shared.withLock { $0.fault }
        // Called outside the lock: a test's hook may block (to hold a job back).
        if let injected = fault?(job) {
            job.abandon()
            return (.failure(injected), .zero)
        }
        let started = ContinuousClock.now
        do {
            let outcome = try job.perform()
            return (.success(outcome), .now - started)
        } catch {
            return (.failure(error), .now - started)
        }
    }
}

/// A finished job: its ticket, the job, and what it gave or why it failed.
struct BackgroundCompletion: Sendable {
    var ticket: UInt64
    var job: BackgroundJob
    var result: Result<BackgroundOutcome, StoreError>
    /// How long the job ran on the worker (`perform()`).
    var elapsed: Duration = .zero
}
