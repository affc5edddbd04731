import Dispatch

/// Runs work off a loop's thread and hands each result back on it: what the daemon does there
/// must not hold every connection up (a folded catch-up of a large room, O(size of the room)).
///
/// The work runs on one serial Dispatch queue (libdispatch's own thread, so at most one job at
/// a time: on a 2-core machine the loop keeps the other core), in submission order. Each result
/// comes back through a `LoopMailbox` woken by a pipe (`.descriptor`, `DescriptorWake`), so the loop needs no
/// locking, and its completion runs on the loop's thread at a later pass, never inside
/// `perform`. The completions stay on the loop's side, keyed by a ticket: only the work and its
/// result cross threads, so only they must be `Sendable`.
///
/// Thread-safety: every method is for the loop's thread. `close()` drops the completions of
/// work still running; their results are dropped when they finish.
package final class LoopWorker {
    private let queue = DispatchQueue(label: "snapsync.loop-worker", qos: .utility)
    private var mailbox: LoopMailbox<(ticket: UInt64, result: any Sendable)>?
    private var completions: [UInt64: (any Sendable) -> Void] = [:]
    private var nextTicket: UInt64 = 0

    /// A worker whose results come back on `loop`'s thread, at the flush's priority (after the
    /// pass's reads, like a log answer in cluster mode).
    package init(loop: EventLoop) throws(EventLoopError) {
        mailbox = try LoopMailbox(loop: loop, priority: .flush, waking: .descriptor) { [weak self] delivery in
            self?.complete(delivery.ticket, delivery.result)
        }
    }

    deinit { mailbox?.close() }

    /// Runs `work` on the worker's thread, then `done` with its result on the loop's thread.
    package func perform<Result: Sendable>(_ work: @escaping @Sendable () -> Result, then done: @escaping (Result) -> Void) {
        guard let mailbox else { return }
        nextTicket += 1
        let ticket = nextTicket
        completions[ticket] = { done($0 as! Result) }
        queue.async { mailbox.post((ticket, work())) }
    }

    private func complete(_ ticket: UInt64, _ result: any Sendable) {
        completions.removeValue(forKey: ticket)?(result)
    }

    /// Stops delivering: completions not run yet never run. Idempotent.
    package func close() {
        mailbox?.close()
        mailbox = nil
        completions.removeAll()
    }
}
