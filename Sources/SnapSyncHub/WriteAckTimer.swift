package import CoreMetrics

/// The write-to-ACK latency histogram (`snapsync_write_ack_duration_seconds`): for each write
/// answered with ACK, from the moment the hub starts handling it to the end of the loop pass's
/// flush, which commits it to the store (under `--fsync always`, its fdatasync) and hands its
/// ACK to the kernel. So it includes the fan-out of its DIFF and the group commit it waited for.
///
/// Cost per write while the endpoint is on: one clock read and an append here; the recording
/// (a lock and a bucket search in swift-prometheus) happens once per ACK in the flush, off the
/// request handler. The hub holds none of this when the endpoint is off.
package final class WriteAckTimer {
    private let timer: CoreMetrics.Timer
    /// A monotonic clock in nanoseconds (the IO layer's CLOCK_MONOTONIC: the hub reads no clock
    /// of its own).
    private let clock: () -> UInt64
    /// Starts (`start()`) of the writes acknowledged in this pass, recorded by `flushed()`.
    private var pending: [UInt64] = []

    package init(timer: CoreMetrics.Timer, clock: @escaping () -> UInt64) {
        self.timer = timer
        self.clock = clock
    }

    /// When handling of a write starts: the clock's nanoseconds, never 0. A plain integer, not a
    /// `ContinuousClock.Instant`, whose optional went through value witnesses in `LocalRoomEngine.write`
    /// (about 100 instructions per write, measured with callgrind).
    @inline(__always)
    func start() -> UInt64 {
        clock() | 1
    }

    /// The write that started at `started` was answered with ACK in this pass.
    func acknowledged(_ started: UInt64) {
        pending.append(started)
    }

    /// The pass's flush has committed and sent: records every ACK of the pass.
    package func flushed() {
        guard !pending.isEmpty else { return }
        let now = start()
        for started in pending { timer.recordNanoseconds(Int64(bitPattern: now &- min(started, now))) }
        pending.removeAll(keepingCapacity: true)
    }
}

extension Duration {
    /// Whole nanoseconds (saturating), for swift-metrics' `recordNanoseconds`.
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole + attoseconds / 1_000_000_000
    }
}
