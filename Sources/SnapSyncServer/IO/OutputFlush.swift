import SnapSyncStore
internal import Glibc
import SnapSyncHub
import SnapSyncLoop

/// The loop pass's flush: once per pass, the hub commits the pass's writes and each dirty
/// connection is sent everything it has pending in one gathering write (`Hub.finishPass`); it
/// arms EV_WRITE for a connection whose send buffer filled up (`Server`'s doc explains the design).
///
/// The flush event runs at the lower priority, after every read, accept, timer and signal
/// callback of the pass. libevent runs no lower-priority event while higher-priority ones keep
/// becoming active, so under a constant stream of input (or accepts) the flush could starve;
/// past `maxCallbacksBeforeFlush` callbacks the callback path flushes inline.
final class OutputFlush {
    private let hub: Hub
    private var event: Event?
    private var isScheduled = false
    /// When this pass queued its first output: its flush is timed from there (STATS loop_pass_*).
    private var passOutputStarted = ContinuousClock.now
    /// Priority-0 callbacks run since the flush was scheduled.
    private var callbacksSinceScheduled = 0
    /// Connections whose `InputSlice` ended with frames left: their next turn comes after this
    /// pass's flush (`resumeNextPass`). `resuming` is the list being woken, kept to reuse.
    private var yielded: [Connection] = []
    private var resuming: [Connection] = []
    /// The presence timer's deliveries stopped at their budget for this pass: they go on after
    /// this pass's flush (`resumePresenceNextPass`), through `resumePresence`.
    private var isPresenceWaiting = false
    var resumePresence: () -> Void = {}
    static let maxCallbacksBeforeFlush = 64
    let spans: UnsafeMutablePointer<OutputSpan>
    /// A TLS connection's pending output, when it lies in several short chunks, is gathered
    /// here, up to one record, for one SSL_write (`OutputFlush+TLS.swift`).
    let record: UnsafeMutableRawBufferPointer

    init(hub: Hub) {
        self.hub = hub
        self.spans = .allocate(capacity: OutputQueue.maxIovecs)
        self.record = .allocate(byteCount: TLSSession.recordSize, alignment: 16)
    }

    deinit {
        spans.deallocate()
        record.deallocate()
    }

    private var contextPointer: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Creates the flush event and has the hub schedule it when a pass queues its first output.
    func start(loop: EventLoop) throws(EventLoopError) {
        event = try loop.makeTimer(priority: .flush, context: contextPointer, OutputFlush.onFlush)
        hub.outputPending = { [unowned self] in self.schedule() }
    }

    func free() {
        event?.free()
        event = nil
        hub.outputPending = {}
    }

    private func schedule() {
        guard !isScheduled else { return }
        isScheduled = true
        passOutputStarted = .now
        callbacksSinceScheduled = 0
        event?.activate()
    }

    /// Called after each read, write and accept callback: flushes inline if the flush event is
    /// being starved.
    func noteHighPriorityCallback() {
        guard isScheduled else { return }
        callbacksSinceScheduled += 1
        if callbacksSinceScheduled >= Self.maxCallbacksBeforeFlush { flushPass() }
    }

    private static let onFlush: EventCallback = { _, _, pointer in
        let flush = Unmanaged<OutputFlush>.fromOpaque(pointer!).takeUnretainedValue()
        flush.flushPass()
    }

    /// Ends the pass: the hub commits its writes and hands back each dirty session, whose
    /// connection sends its output (`Connection.sendQueuedOutput`, which calls `send(_:)`).
    /// - Complexity: O(dirty connections + spans sent); one sendmsg per connection unless it
    ///   has more than 1024 chunks pending.
    func flushPass() {
        isScheduled = false
        callbacksSinceScheduled = 0
        defer { resumeYielded() }
        guard hub.finishPass() else { return }
        hub.recordPassTime(.now - passOutputStarted)
    }

    /// `connection` stopped handling its input for this pass: this pass ends (its flush is
    /// scheduled, if nothing else scheduled it), and the connection's read callback runs again
    /// after it.
    func resumeNextPass(_ connection: Connection) {
        yielded.append(connection)
        schedule()
    }

    /// The presence timer handed out its budget of PRESENCE_DIFFs for this pass: this pass ends
    /// (its flush writes them), and the timer runs again after it. Re-arming the timer at once
    /// instead would starve the flush: a timer due at every iteration keeps the higher priority
    /// busy, and the whole fan-out would go out in one flush.
    func resumePresenceNextPass() {
        isPresenceWaiting = true
        schedule()
    }

    /// Gives every connection that yielded its next turn. From the flush callback
    /// (the lower priority), they run in the loop's next iteration, after its poll, beside the
    /// connections that became readable meanwhile: a connection that keeps yielding gets one
    /// slice per pass, as every other connection does.
    private func resumeYielded() {
        if isPresenceWaiting {
            isPresenceWaiting = false
            resumePresence()
        }
        guard !yielded.isEmpty else { return }
        swap(&yielded, &resuming)
        for connection in resuming { connection.takeTurn() }
        resuming.removeAll(keepingCapacity: true)
    }

    /// Sends `connection`'s queued output, in the pass's flush.
    func send(_ connection: Connection) {
        let session = connection.session
        guard !session.isEnded else { return }
        let hasUnsentOutput: Bool
        if let tls = connection.tls {
            guard sendTLS(connection, tls) else { return }
            hasUnsentOutput = connection.hasUnsentOutput
        } else {
            guard let more = sendPlain(connection) else { return }
            hasUnsentOutput = more
        }
        if !hasUnsentOutput {
            connection.stopWaitingForWritable()
            if session.state == .closing {
                connection.shutDownOutput()
                if connection.isFullyDelivered {
                    hub.end(session, reason: "closed")
                } else {
                    connection.armTimer(Connection.lingerPollInterval)
                }
            }
        } else if !(connection.tls?.writeWantsRead ?? false) {
            // A TLS write that waits for input is retried when the socket is readable.
            do {
                try connection.waitForWritable()
            } catch {
                hub.end(session, reason: "cannot watch for writability: \(error)")
            }
        }
    }

    /// Sends what the kernel takes, in gathering writes.
    /// - Returns: nil when the connection ended; else whether bytes are still queued.
    private func sendPlain(_ connection: Connection) -> Bool? {
        let session = connection.session
        // `gatherOutput` is 0 when nothing is queued: one call asks and gathers.
        var count = session.gatherOutput(into: spans, capacity: OutputQueue.maxIovecs)
        while count > 0 {
            var requested = 0
            for index in 0..<count { requested += spans[index].count }
            let written: Int?
            do {
                written = try Syscall.send(connection.fd, spans, count: count)
            } catch {
                hub.end(session, reason: error.isDisconnect ? "peer went away" : "\(error)")
                return nil
            }
            guard let written else { return true }
            let more = session.consumeOutput(written)
            hub.countBytesOut(written)
            // A short write means the send buffer is full; asking again would only say EAGAIN.
            guard more, written == requested else { return more }
            count = session.gatherOutput(into: spans, capacity: OutputQueue.maxIovecs)
        }
        return false
    }
}
