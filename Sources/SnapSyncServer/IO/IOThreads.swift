internal import Glibc
import Synchronization

/// The flush's helpers (`--io-threads`): threads that run a share of one loop pass's sends, so
/// that a big room's fan-out (one sendmsg per member, ~90% of it the kernel's send path) uses
/// more than one core while the hub stays on the loop's thread.
///
/// Redis 6's io-threads, not memcached's worker loops: the loop's thread decides everything (it
/// commits the pass, then hands out the sends) and waits until every send returned, so the
/// rules the single loop kept hold unchanged — nothing is sent before its pass is committed, a
/// connection's bytes go out in queue order (one thread sends a connection's bytes in a pass),
/// and nothing of the hub is touched off its thread. Worker loops would move the hub's
/// conversations with every connection across threads (docs/engineering.md, "IO threads").
///
/// `forEach` hands out indices a batch (`--io-thread-batch`) at a time from one atomic word: the
/// loop's thread takes batches too, from the front, and the helpers from the back, so a
/// connection that keeps its place in the pass (a room's members) is mostly sent by the same
/// thread pass after pass, and its socket's state stays in that core's cache (1–4% more
/// deliveries/s at 1,000 members on two threads: docs/benchmarks.md, "Two threads at 1,000
/// members"). The loop's thread waits only for batches a helper has claimed, never for a helper
/// to wake. So a helper the scheduler runs late (the machine's other work holds its core)
/// leaves more to the loop's thread and holds nothing: waiting for it would leave the loop's
/// core idle for as long as the scheduler keeps the helper off its own. A helper that wakes
/// after its pass ended finds nothing to claim and sleeps again. A pass of no more than
/// one batch is sent by the loop's thread alone: waking a thread costs more than a few sendmsg
/// calls.
///
/// Thread-safety: `forEach` and `stop` are for the loop's thread; `body` runs on every thread at
/// once, each call with its own index.
final class IOThreads: @unchecked Sendable {
    /// Threads sending, the loop's thread included.
    let count: Int
    /// Indices claimed at a time.
    let batch: Int

    /// The pass being sent: `body(index, thread)` for every index below the pass's total. Written
    /// by the loop's thread before it publishes the pass in `claims` (release), and read by a
    /// helper only after it claimed a batch of that pass (acquire): the pass cannot end, and
    /// `body` cannot change, before that batch is counted off `remaining`.
    nonisolated(unsafe) private var body: ((Int, Int) -> Void)?
    /// The indices of the pass not yet claimed, front..<back, in one word (back in bits 24–47,
    /// front in bits 0–23): the loop's thread claims at the front, helpers at the back, and all
    /// is claimed when they meet. A claim is a compare-and-swap of the whole word, so it is
    /// valid for whichever pass holds that word when it succeeds, and a helper that wakes late
    /// cannot claim from one pass by the bounds of another.
    private let claims = Atomic<UInt64>(0)
    /// Indices of the current pass whose calls have not returned: its total, set before the pass
    /// is published in `claims`, less each batch as it is done. The one subtraction that reaches
    /// zero is the pass's end: made by a helper, it posts `finished`.
    private let remaining = Atomic<Int>(0)
    private let isStopping = Atomic<Bool>(false)
    /// One per helper: posted to wake it for the current pass (late wake-ups are harmless).
    private let starts: UnsafeMutablePointer<sem_t>
    /// Posted by the helper that completes a pass, for the loop's thread waiting on it.
    private let finished: UnsafeMutablePointer<sem_t>
    private var threads: [pthread_t] = []

    /// Called by a helper each time it wakes, before it claims: nil but in tests, which make a
    /// helper late with it.
    private let helperWillClaim: (@Sendable (_ thread: Int) -> Void)?

    /// Starts `count - 1` helpers (the loop's thread is the first of `count`).
    init(count: Int, batch: Int, helperWillClaim: (@Sendable (_ thread: Int) -> Void)? = nil) throws(SystemError) {
        precondition(count >= 2 && batch >= 1)
        self.count = count
        self.batch = batch
        self.helperWillClaim = helperWillClaim
        starts = .allocate(capacity: count - 1)
        finished = .allocate(capacity: 1)
        sem_init(finished, 0, 0)
        for index in 0..<(count - 1) { sem_init(starts + index, 0, 0) }
        for index in 1..<count {
            let context = Unmanaged.passRetained(Helper(threads: self, index: index)).toOpaque()
            var thread = pthread_t()
            let status = pthread_create(
                &thread, nil,
                { pointer in
                    let helper = Unmanaged<Helper>.fromOpaque(pointer!).takeRetainedValue()
                    helper.threads.run(helper.index)
                    return nil
                }, context)
            guard status == 0 else {
                Unmanaged<Helper>.fromOpaque(context).release()
                stop()
                throw SystemError(call: "pthread_create", errno: status)
            }
            threads.append(thread)
        }
    }

    deinit {
        precondition(threads.isEmpty, "IOThreads released without stop()")
        for index in 0..<(count - 1) { sem_destroy(starts + index) }
        sem_destroy(finished)
        starts.deallocate()
        finished.deallocate()
    }

    private final class Helper {
        let threads: IOThreads
        let index: Int
        init(threads: IOThreads, index: Int) {
            self.threads = threads
            self.index = index
        }
    }

    /// Calls `body(index, thread)` once for every index in 0..<`total`, on this thread and on as
    /// many helpers as there are batches beyond the first (`thread` is 0 here, 1... on helpers),
    /// and returns when every call has returned.
    /// - Complexity: O(total / count) calls on each thread, plus one wake-up per helper used.
    func forEach(_ total: Int, _ body: (_ index: Int, _ thread: Int) -> Void) {
        let helpers = min(count - 1, (total - 1) / batch)
        guard helpers > 0, total <= Self.indexMask else {
            for index in 0..<total { body(index, 0) }
            return
        }
        withoutActuallyEscaping(body) { body in
            self.body = body
            remaining.store(total, ordering: .relaxed)
            claims.store(UInt64(total) << 24, ordering: .releasing)
            for helper in 0..<helpers { sem_post(starts + helper) }
            if !claimBatches(thread: 0) { Self.wait(finished) }
            self.body = nil
        }
    }

    private static let indexMask = (1 << 24) - 1

    /// Runs batches of the pass published in `claims` until every index is claimed: the front
    /// batch on the loop's thread (0), the back one on a helper. Returns whether this thread's
    /// completions ended the pass.
    /// - Complexity: O(1) per batch, a compare-and-swap retried only when another thread claimed
    ///   at the same moment.
    private func claimBatches(thread: Int) -> Bool {
        var word = claims.load(ordering: .acquiring)
        while true {
            let back = Int(truncatingIfNeeded: word >> 24) & Self.indexMask
            let front = Int(truncatingIfNeeded: word) & Self.indexMask
            guard front < back else { return false }
            let range = thread == 0 ? front..<min(front + batch, back) : max(back - batch, front)..<back
            let left = thread == 0 ? range.upperBound..<back : front..<range.lowerBound
            let (exchanged, found) = claims.compareExchange(
                expected: word, desired: UInt64(left.upperBound) << 24 | UInt64(left.lowerBound), ordering: .acquiringAndReleasing)
            guard exchanged else {
                word = found
                continue
            }
            run(range, on: thread)
            if remaining.subtract(range.count, ordering: .acquiringAndReleasing).newValue == 0 { return true }
            word = claims.load(ordering: .acquiring)
        }
    }

    /// One claimed batch. A function of its own so that this thread's copy of `body` (a
    /// reference to the closure's context) is released before the batch is counted: once it is,
    /// the loop's thread may end `forEach`, whose `withoutActuallyEscaping` requires that no copy
    /// of the closure outlive it.
    @inline(never)
    private func run(_ indices: Range<Int>, on thread: Int) {
        let body = body.unsafelyUnwrapped
        for index in indices { body(index, thread) }
    }

    private func run(_ index: Int) {
        while true {
            Self.wait(starts + (index - 1))
            if isStopping.load(ordering: .acquiring) { return }
            helperWillClaim?(index)
            if claimBatches(thread: index) { sem_post(finished) }
        }
    }

    /// sem_wait, again after a signal interrupted it.
    private static func wait(_ semaphore: UnsafeMutablePointer<sem_t>) {
        while sem_wait(semaphore) != 0 && errno == EINTR {}
    }

    /// Ends the helpers and waits for them. Idempotent.
    func stop() {
        guard !threads.isEmpty else { return }
        isStopping.store(true, ordering: .releasing)
        for helper in 0..<threads.count { sem_post(starts + helper) }
        for thread in threads { pthread_join(thread, nil) }
        threads.removeAll()
    }

    /// Cores this process may run on, for `--io-threads`'s default: its CPU affinity (taskset, a
    /// cgroup's cpuset) as /proc/self/status's `Cpus_allowed` mask says, else the cores online.
    /// Not sched_getaffinity: Swift's Glibc module is built without _GNU_SOURCE.
    static func availableCores() -> Int {
        let online = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        guard let file = fopen("/proc/self/status", "r") else { return online }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 4096)
        while fgets(&line, Int32(line.count), file) != nil {
            let text = String(decoding: line.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard text.hasPrefix("Cpus_allowed:") else { continue }
            let mask = text.dropFirst("Cpus_allowed:".count)
            let cores = mask.reduce(0) { count, character in count + (character.hexDigitValue?.nonzeroBitCount ?? 0) }
            return cores > 0 ? min(cores, online) : online
        }
        return online
    }
}
