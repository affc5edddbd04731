package import Logging
package import SnapSyncStore

/// Keeps systemd waiting while a long start-up (recovery) makes progress: at most every
/// `interval`, it sends `EXTEND_TIMEOUT_USEC` (`extendBy` from now) with a STATUS line, so a
/// start that takes longer than the unit's TimeoutStartSec= is not killed, while a start that
/// stops making progress still is (the extension runs out). READY=1 is the server's, once it
/// listens. Without NOTIFY_SOCKET it does nothing.
///
/// Called on the thread doing the work (recovery has no other): nothing is sent between calls,
/// so a single step longer than `extendBy` would still time out. Recovery reports after each
/// checkpoint and every few thousand records, each far below a second.
package final class StartupNotifier {
    let notifier: SystemdNotifier
    let logger: Logger
    let interval: Duration
    let extendBy: Duration
    private var lastSent: ContinuousClock.Instant

    package convenience init(logger: Logger) {
        self.init(notifier: SystemdNotifier(), logger: logger, interval: .seconds(5), extendBy: .seconds(30), now: .now)
    }

    init(notifier: SystemdNotifier, logger: Logger, interval: Duration, extendBy: Duration, now: ContinuousClock.Instant) {
        self.notifier = notifier
        self.logger = logger
        self.interval = interval
        self.extendBy = extendBy
        self.lastSent = now
    }

    package var isEnabled: Bool { notifier.isEnabled }

    /// Tells systemd "still working: `status`" when the last message is `interval` old, asking
    /// for `extendBy` (this notifier's own when nil) more: a caller whose steps may each take
    /// longer than that (cluster mode's wait for NATS, bounded by its own deadline) asks for
    /// the time up to that deadline instead.
    /// - Returns: whether a message was sent.
    @discardableResult
    package func progress(_ status: String, extendBy: Duration? = nil, now: ContinuousClock.Instant = .now) -> Bool {
        guard notifier.isEnabled, now - lastSent >= interval else { return false }
        lastSent = now
        let (seconds, attoseconds) = (extendBy ?? self.extendBy).components
        let microseconds = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        do {
            try notifier.notify("EXTEND_TIMEOUT_USEC=\(microseconds)\nSTATUS=\(status)")
        } catch {
            logger.warning("sd_notify EXTEND_TIMEOUT_USEC failed", metadata: ["error": "\(error)"])
        }
        return true
    }

    /// `progress` for `DurableStore.open`.
    package func recovery(_ progress: RecoveryProgress) {
        self.progress("recovering: \(progress.checkpointsLoaded) checkpoint(s) loaded, \(progress.recordsReplayed) logged write(s) replayed")
    }
}
