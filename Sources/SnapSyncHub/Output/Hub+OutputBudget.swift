import Logging
import SnapSyncWire

// The bound on unsent output of all connections together (`--max-output-total-bytes`). The
// per-connection cap (`--max-output-bytes`) bounds one slow subscriber; this bounds many at
// once, such as a storm of JOINs of a large room from connections that do not read.

extension Hub {
    /// Unsent output passed `--max-output-total-bytes`: cuts off the connections with the
    /// largest queues, largest first, until the total is at most 7/8 of the budget. A connection
    /// whose queue starts at a frame boundary gets ERROR `slow_consumer` (its queue dropped, as
    /// for the per-connection cap); one in the middle of a frame, or already closing, is closed
    /// at once, because only that frees the rest of the frame (PROTOCOL.md §7.1).
    ///
    /// `outputBytes` counts a shared chunk once (`OutputMeter`), so cutting one of its holders
    /// may free nothing; the loop then goes on to the next largest queue.
    /// - Complexity: O(c log c) for c connections with output. Called when the budget is passed,
    ///   and every call brings the total to 7/8 of the budget (or cuts every queue), so the sort
    ///   runs at most once per eighth of the budget queued.
    func enforceOutputBudget() {
        let limit = configuration.maxOutputTotalBytes
        let target = limit - limit / 8
        let holders = sessions.values.filter { $0.output.pendingBytes > 0 }
            .sorted { $0.output.pendingBytes > $1.output.pendingBytes }
        for session in holders where outputBytes > target && !session.isEnded {
            let queued = session.output.pendingBytes
            stats.slowConsumerDisconnects += 1
            logLimited(
                .warning, cause: "output budget exceeded", "output budget exceeded, closing the connection with the largest queue",
                metadata: session.logMetadata([
                    "queued_bytes": "\(queued)", "output_bytes": "\(outputBytes)", "max_output_total_bytes": "\(limit)",
                ]))
            if session.state != .closing && !session.output.isMidFrame {
                session.output.dropAllButPartialHead()
                close(
                    session, error: .slowConsumer,
                    "the server's unsent output passed --max-output-total-bytes \(ConfigurationValue.describe(byteCount: limit)); this connection had one of the largest queues (\(queued) bytes)"
                )
            } else {
                end(session, reason: "output budget exceeded in the middle of a frame")
            }
        }
    }
}
