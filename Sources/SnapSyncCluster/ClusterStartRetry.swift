#if canImport(Glibc)
    internal import Glibc
#endif

/// How cluster mode's start waits for NATS servers that cannot serve yet: not started, paused,
/// restarting, or JetStream without a leader (`NATSError.isTransientAtStart`). A node started
/// with them, or restarted while they recover, must not exit (systemd would restart it into the
/// same failure, or give up on it); it tries each step of `JetStreamRoomLog.connect` again after
/// a delay that doubles from `initialDelay` up to `maximumDelay`, until the step succeeds or
/// `deadline` passes. A permanent failure (a refused server version, a configuration,
/// authentication or TLS failure, a stream that conflicts) ends the start at once: waiting
/// would not change it.
///
/// Each wait is reported to `onWait` before it starts (the daemon logs it and tells systemd).
/// Blocking, like `connect`: before the loop runs.
package struct ClusterStartRetry {
    /// A step that failed transiently, and how long the start waits before trying it again.
    package struct Wait: Sendable {
        /// What the step waits for, e.g. "stream snapsync-rooms".
        package var step: String
        package var error: NATSError
        /// The step's attempts so far (1 after its first failure).
        package var attempt: Int
        package var delay: Duration
        /// The time left until the deadline, after this delay.
        package var remaining: Duration
    }

    package let deadline: ContinuousClock.Instant
    /// The start's whole allowance, as given (for the message of a start that gave up).
    package let timeout: Duration
    package let initialDelay: Duration
    package let maximumDelay: Duration
    let onWait: (Wait) -> Void
    let now: () -> ContinuousClock.Instant
    let sleep: (Duration) -> Void

    /// Waits at most `timeout` from now in all, starting at `initialDelay` and doubling up to
    /// `maximumDelay` between the attempts of a step.
    package init(
        timeout: Duration, initialDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(10),
        onWait: @escaping (Wait) -> Void = { _ in },
        now: @escaping () -> ContinuousClock.Instant = { .now },
        sleep: @escaping (Duration) -> Void = { Self.sleep($0) }
    ) {
        self.timeout = timeout
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.onWait = onWait
        self.now = now
        self.sleep = sleep
        deadline = now() + timeout
    }

    /// One try: no retry, for callers that have no start to wait for (tests, tools).
    package static var once: ClusterStartRetry { ClusterStartRetry(timeout: .zero) }

    /// `body`, tried again while it fails transiently and the deadline allows another attempt.
    /// - Throws: a permanent failure of `body` as it is; once the deadline has passed, the last
    ///   transient failure wrapped in a `startDeadline` error naming `step`.
    package func run<T>(_ step: String, _ body: () throws(NATSError) -> T) throws(NATSError) -> T {
        var delay = initialDelay
        var attempt = 1
        while true {
            do throws(NATSError) {
                return try body()
            } catch  where error.isTransientAtStart {
                let left = deadline - now()
                guard left > .zero else {
                    if timeout == .zero { throw error }
                    throw NATSError(
                        operation: "cluster start", identifier: "waiting for \(step)", code: .startDeadline,
                        text: "NATS could not serve within --cluster-start-timeout \(Self.seconds(timeout)) s; last failure: \(error)")
                }
                let wait = min(delay, left)
                onWait(Wait(step: step, error: error, attempt: attempt, delay: wait, remaining: left - wait))
                sleep(wait)
                delay = min(delay * 2, maximumDelay)
                attempt += 1
            }
        }
    }

    /// `duration` in seconds, with a decimal only when it has one ("0.5", "10").
    package static func seconds(_ duration: Duration) -> String {
        let milliseconds = duration.milliseconds
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000)" }
        return "\(Double(milliseconds) / 1000)"
    }

    /// nanosleep for `duration`, again for what is left when a signal interrupts it.
    private static func sleep(_ duration: Duration) {
        var request = timespec(tv_sec: Int(duration.components.seconds), tv_nsec: Int(duration.components.attoseconds / 1_000_000_000))
        var left = timespec()
        while nanosleep(&request, &left) != 0 && errno == EINTR { request = left }
    }
}
