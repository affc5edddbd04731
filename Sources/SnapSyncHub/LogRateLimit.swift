package import Logging

/// A bound on the lines a remote client can make the daemon write again and again: a refused
/// token, a protocol violation, a failed TLS handshake, a connection over a limit. Each is one
/// line per event, so a flood of them (thousands a second) would fill the disk and the journal,
/// and bury everything else. Per cause (a fixed name, such as "token refused (HELLO): expired"),
/// at most `burst` lines per `interval` are written; when the interval ends, one line says how
/// many more there were.
///
/// No lock, no clock of its own: the hub calls it on the loop's thread with its monotonic
/// clock's `now` (`Hub.logLimited`), and the one-second timer ends the intervals
/// (`Hub.endLogIntervals`), so the summary comes even when the flood stopped.
/// - Complexity: O(1) per line (one dictionary lookup); O(causes) per `endIntervals`. Causes are
///   names from a fixed list, never a client's string, so the dictionary stays small.
package struct LogRateLimit {
    /// Lines written per cause and interval.
    package let burst: Int
    package let interval: Duration

    /// How many lines of `cause` were not written in an interval that ended, at the level of
    /// the lines.
    package struct Summary: Equatable {
        package let cause: String
        package let level: Logger.Level
        package let suppressed: Int
    }

    private struct Window {
        let start: ContinuousClock.Instant
        let level: Logger.Level
        var written = 0
        var suppressed = 0
    }
    private var windows: [String: Window] = [:]

    package init(burst: Int = 10, interval: Duration = .seconds(10)) {
        self.burst = burst
        self.interval = interval
    }

    /// Counts a line of `cause` at `now`.
    /// - Returns: whether to write it, and the summary of `cause`'s previous interval when that
    ///   ended with lines not written (to be written first).
    package mutating func admit(_ cause: String, level: Logger.Level, now: ContinuousClock.Instant) -> (write: Bool, ended: Summary?) {
        var ended: Summary?
        if let window = windows[cause], now - window.start >= interval {
            ended = Self.summary(cause, window)
            windows[cause] = nil
        }
        var window = windows[cause] ?? Window(start: now, level: level)
        let write = window.written < burst
        if write { window.written += 1 } else { window.suppressed += 1 }
        windows[cause] = window
        return (write, ended)
    }

    /// Ends every interval that ended by `now`.
    /// - Returns: the summaries of those with lines not written.
    package mutating func endIntervals(now: ContinuousClock.Instant) -> [Summary] {
        var summaries: [Summary] = []
        for (cause, window) in windows where now - window.start >= interval {
            if let summary = Self.summary(cause, window) { summaries.append(summary) }
            windows[cause] = nil
        }
        return summaries.sorted { $0.cause < $1.cause }
    }

    private static func summary(_ cause: String, _ window: Window) -> Summary? {
        window.suppressed > 0 ? Summary(cause: cause, level: window.level, suppressed: window.suppressed) : nil
    }
}

extension Hub {
    /// Writes a line a remote client can cause again and again, at most `LogRateLimit.burst`
    /// times per interval for `cause` (a fixed name: never a client's string).
    package func logLimited(
        _ level: Logger.Level, cause: String, _ message: @autoclosure () -> Logger.Message,
        metadata: @autoclosure () -> Logger.Metadata? = nil
    ) {
        let (write, ended) = logRateLimit.admit(cause, level: level, now: monotonicNow())
        if let ended { logSuppressed(ended) }
        if write { logger.log(level: level, message(), metadata: metadata()) }
    }

    /// The one-second timer: the summary of every interval that ended with lines not written.
    package func endLogIntervals(now: ContinuousClock.Instant) {
        for summary in logRateLimit.endIntervals(now: now) { logSuppressed(summary) }
    }

    private func logSuppressed(_ summary: LogRateLimit.Summary) {
        logger.log(
            level: summary.level,
            "\(summary.cause): \(summary.suppressed) more lines not logged in \(logRateLimit.interval.components.seconds) s (at most \(logRateLimit.burst) per cause)",
            metadata: ["cause": "\(summary.cause)", "suppressed": "\(summary.suppressed)"])
    }
}
