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
/// `forEach` hands out indices a batch (`--io-thread-batch`) at a time from one atomic counter:
/// the loop's thread takes batches too, so a helper the scheduler runs late (the machine's other
/// work holds its core) only leaves more to the loop's thread. A pass of no more than one batch
/// is sent by the loop's thread alone: waking a thread costs more than a few sendmsg calls.
///
/// Thread-safety: `forEach` and `stop` are for the loop's thread; `body` runs on every thread at
/// once, each call with its own index.
final class IOThreads: @unchecked Sendable {
    /// Threads sending, the loop's thread included.
    let count: Int
    /// Indices claimed at a time.
    let batch: Int

    /// The pass being sent: `body(index, thread)` for index in 0..<`total`. Written by the loop's
    /// thread before it posts the helpers' semaphores and read by them after they wake, so the
    /// semaphores order every access (sem_post and sem_wait are full barriers).
    nonisolated(unsafe) private var body: ((Int, Int) -> Void)?
    nonisolated(unsafe) private var total = 0
    nonisolated(unsafe) private var isStopping = false
    private let next = Atomic<Int>(0)
    /// One per helper: posted to start it on the current pass.
    private let starts: UnsafeMutablePointer<sem_t>
    /// Posted by each helper woken for a pass when it has finished its share.
    private let finished: UnsafeMutablePointer<sem_t>
    private var threads: [pthread_t] = []

    /// Starts `count - 1` helpers (the loop's thread is the first of `count`).
    init(count: Int, batch: Int) throws(SystemError) {
        precondition(count >= 2 && batch >= 1)
        self.count = count
        self.batch = batch
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
        guard helpers > 0 else {
            for index in 0..<total { body(index, 0) }
            return
        }
        withoutActuallyEscaping(body) { body in
            self.body = body
            self.total = total
            next.store(0, ordering: .relaxed)
            for helper in 0..<helpers { sem_post(starts + helper) }
            claimBatches(thread: 0)
            for _ in 0..<helpers { Self.wait(finished) }
            self.body = nil
        }
    }

    /// Runs batches until every index is claimed.
    private func claimBatches(thread: Int) {
        guard let body else { return }
        while true {
            let first = next.wrappingAdd(batch, ordering: .relaxed).oldValue
            guard first < total else { return }
            for index in first..<min(first + batch, total) { body(index, thread) }
        }
    }

    private func run(_ index: Int) {
        while true {
            Self.wait(starts + (index - 1))
            if isStopping { return }
            claimBatches(thread: index)
            sem_post(finished)
        }
    }

    /// sem_wait, again after a signal interrupted it.
    private static func wait(_ semaphore: UnsafeMutablePointer<sem_t>) {
        while sem_wait(semaphore) != 0 && errno == EINTR {}
    }

    /// Ends the helpers and waits for them. Idempotent.
    func stop() {
        guard !threads.isEmpty else { return }
        isStopping = true
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
