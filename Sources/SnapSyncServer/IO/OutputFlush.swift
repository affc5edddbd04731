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
    /// The threads that share a big pass's sends (`--io-threads`); nil with one.
    private var ioThreads: IOThreads?
    /// Each sending thread's buffers, by thread (the loop's is 0).
    private let scratch: [FlushScratch]
    /// `scratch` without reference counts, for the per-member sends (`scratch` holds them).
    private let unretainedScratch: [Unmanaged<FlushScratch>]

    init(hub: Hub, ioThreads: Int = 1, batch: Int = 32) throws(SystemError) {
        self.hub = hub
        self.scratch = (0..<max(1, ioThreads)).map { _ in FlushScratch() }
        self.unretainedScratch = scratch.map { Unmanaged.passUnretained($0) }
        if ioThreads > 1 { self.ioThreads = try IOThreads(count: ioThreads, batch: batch) }
    }

    deinit {
        ioThreads?.stop()
    }

    private var contextPointer: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Creates the flush event and has the hub schedule it when a pass queues its first output.
    func start(loop: EventLoop) throws(EventLoopError) {
        event = try loop.makeTimer(priority: .flush, context: contextPointer, OutputFlush.onFlush)
        hub.outputPending = { [unowned self] in self.schedule() }
        hub.sendPass = { [unowned self] in self.sendAll($0) }
        hub.sendBroadcast = { [unowned self] in self.sendBroadcast($0, to: $1) }
    }

    func free() {
        event?.free()
        event = nil
        hub.outputPending = {}
        hub.sendPass = nil
        hub.sendBroadcast = nil
        ioThreads?.stop()
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

    /// Sends `connection`'s queued output, in the pass's flush, on the loop's thread.
    func send(_ connection: Connection) {
        guard !connection.session.isEnded else { return }
        connection.transmission = transmit(connection, scratch[0])
        finishSend(connection)
    }

    /// Sends a committed pass's dirty sessions (`Hub.sendPass`), each through its connection's
    /// unretained pointer (`Connection.unretained(carrying:)`): no reference count per session.
    /// With IO threads and more than one batch, the sends themselves (`transmit`) spread over
    /// the threads, then what they did is applied on the loop's thread (`finishSend`), in the
    /// hub's order; otherwise each is sent and applied on the loop's thread in turn.
    /// - Complexity: O(dirty sessions) on the loop's thread; the sends, O(spans sent), shared.
    private func sendAll(_ sessions: [Session]) {
        guard let threads = ioThreads, sessions.count > threads.batch else {
            for session in sessions {
                guard let connection = Connection.unretained(carrying: session)?.takeUnretainedValue() else {
                    session.transport?.sendQueuedOutput()
                    continue
                }
                send(connection)
            }
            return
        }
        hub.stats.ioPassesSpread += 1
        sessions.withUnsafeBufferPointer { sessions in
            threads.forEach(sessions.count) { index, thread in
                let session = sessions[index]
                // The daemon's sessions are all carried by connections; an in-process one (none
                // here) is sent below, on the loop's thread.
                guard !session.isEnded, let connection = Connection.unretained(carrying: session)?.takeUnretainedValue() else { return }
                connection.transmission = transmit(connection, scratch[thread])
            }
        }
        for session in sessions {
            guard !session.isEnded else { continue }
            guard let connection = Connection.unretained(carrying: session)?.takeUnretainedValue() else {
                session.transport?.sendQueuedOutput()
                continue
            }
            finishSend(connection)
        }
    }

    /// Sends one room's committed run (`spans`) to each of `members`, whose queues are empty
    /// (`Hub.sendBroadcast`, Hub+DirectBroadcast.swift): one gathering write per member, spread
    /// over the IO threads as `sendAll` does. A member whose socket took less, or whose
    /// connection cannot send it so (TLS encrypts through its own path), gets the rest queued
    /// (`Hub.queueUnsent`) and sent with the dirty sessions; a failed send ends the session. The
    /// hub is touched only on the loop's thread, after every send has returned.
    /// - Complexity: O(members) sends, shared; O(members not fully sent) on the loop's thread.
    private func sendBroadcast(_ spans: UnsafeBufferPointer<OutputSpan>, to members: UnsafeBufferPointer<Unmanaged<Session>>) {
        let iovecs = UnsafeMutablePointer(mutating: spans.baseAddress!)
        let spanCount = spans.count
        let total = spans.reduce(0) { $0 + $1.count }
        let scratches = unretainedScratch
        // Per member: one sendmsg, and no reference counting (the member, its connection and
        // the thread's scratch are all reached unretained).
        let send = { (index: Int, thread: Int) in
            scratches[thread]._withUnsafeGuaranteedRef { scratch in
                members[index]._withUnsafeGuaranteedRef { session in
                    let sent = Connection.unretained(carrying: session)?._withUnsafeGuaranteedRef { connection -> Bool in
                        guard connection.tls == nil else { return false }
                        let done = Self.transmit(connection.fd, iovecs, count: spanCount)
                        guard done.consumed < total else { return true }
                        connection.transmission = done
                        return false
                    }
                    if sent == true {
                        scratch.directBytes += total
                    } else {
                        scratch.shortfalls.append(index)
                    }
                }
            }
        }
        if let ioThreads, members.count > ioThreads.batch {
            hub.stats.ioPassesSpread += 1
            ioThreads.forEach(members.count, send)
        } else {
            for index in 0..<members.count { send(index, 0) }
        }
        // Every unsent rest is queued before any session is ended: ending one may queue frames
        // for others (a room it leaves flushes its broadcast), which must come after the rest
        // of a frame the socket took only part of.
        var failures: [(index: Int, reason: String)] = []
        for scratch in scratch {
            hub.countBytesOut(scratch.directBytes)
            scratch.directBytes = 0
            for index in scratch.shortfalls {
                members[index]._withUnsafeGuaranteedRef { session in
                    var sent = 0
                    if let connection = Connection.unretained(carrying: session)?.takeUnretainedValue() {
                        let done = connection.transmission
                        connection.transmission = Transmission()
                        if let failure = done.failure {
                            failures.append((index, failure))
                            return
                        }
                        hub.countBytesOut(done.bytesOut)
                        sent = done.consumed
                    }
                    hub.queueUnsent(session, sent: sent)
                }
            }
            scratch.shortfalls.removeAll(keepingCapacity: true)
        }
        for (index, reason) in failures {
            members[index]._withUnsafeGuaranteedRef { hub.end($0, reason: reason) }
        }
    }

    /// One gathering write of `count` spans: the bytes the socket took (none when it was full),
    /// or why the connection ends. Touches nothing but its arguments: it may run on an IO thread.
    private static func transmit(_ fd: Int32, _ spans: UnsafeMutablePointer<OutputSpan>, count: Int) -> Transmission {
        var done = Transmission()
        do {
            guard let written = try Syscall.send(fd, spans, count: count) else { return done }
            done.consumed = written
            done.bytesOut = written
        } catch {
            done.failure = error.isDisconnect ? "peer went away" : "\(error)"
        }
        return done
    }

    /// Sends what the socket takes of `connection`'s queue, touching nothing but the connection
    /// and its TLS session: it may run on an IO thread. The queue is only read
    /// (`Session.gatherOutput` past what this call already sent); `finishSend` consumes it.
    private func transmit(_ connection: Connection, _ scratch: FlushScratch) -> Transmission {
        if let tls = connection.tls { return transmitTLS(connection, tls, scratch) }
        return transmitPlain(connection, scratch)
    }

    /// Applies what `transmit` did, on the loop's thread: consumes the bytes sent, counts them,
    /// ends a connection whose send failed, arms EV_WRITE for one whose socket filled up, and
    /// finishes closing one that has nothing left to send.
    private func finishSend(_ connection: Connection) {
        let done = connection.transmission
        connection.transmission = Transmission()
        let session = connection.session
        if done.dropsQueuedOutput { session.dropQueuedOutput() }
        if done.consumed > 0 { session.consumeOutput(done.consumed) }
        if done.bytesOut > 0 { hub.countBytesOut(done.bytesOut) }
        if let failure = done.failure {
            hub.end(session, reason: failure)
            return
        }
        if !connection.hasUnsentOutput {
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

    /// Sends what the kernel takes, in gathering writes of up to `OutputQueue.maxIovecs` spans.
    private func transmitPlain(_ connection: Connection, _ scratch: FlushScratch) -> Transmission {
        var done = Transmission()
        let session = connection.session
        let spans = scratch.spans
        // `gatherOutput` is 0 when nothing is queued: one call asks and gathers.
        var count = session.gatherOutput(into: spans, capacity: OutputQueue.maxIovecs)
        while count > 0 {
            var requested = 0
            for index in 0..<count { requested += spans[index].count }
            let sent = Self.transmit(connection.fd, spans, count: count)
            done.consumed += sent.consumed
            done.bytesOut += sent.bytesOut
            done.failure = sent.failure
            // A short write means the send buffer is full; asking again would only say EAGAIN.
            guard sent.failure == nil, sent.consumed == requested, done.consumed < session.queuedOutputBytes else { return done }
            count = session.gatherOutput(into: spans, capacity: OutputQueue.maxIovecs, skipping: done.consumed)
        }
        return done
    }
}

/// What `OutputFlush.transmit` did to one connection in a pass, kept on the connection until
/// `finishSend` applies it on the loop's thread.
struct Transmission {
    /// Bytes that left the front of the queue: sent, or (TLS) moved to the retry buffer.
    var consumed = 0
    /// Bytes handed to the kernel, or to OpenSSL.
    var bytesOut = 0
    /// Why the connection ends (its send failed), if it does.
    var failure: String?
    /// The queue is dropped unsent (a TLS connection closing before its handshake is done).
    var dropsQueuedOutput = false
}

/// One sending thread's buffers: the iovecs of a gathering write, a TLS record gathered from
/// several chunks (`OutputFlush+TLS.swift`), and what a direct broadcast left to its thread.
final class FlushScratch {
    let spans: UnsafeMutablePointer<OutputSpan>
    let record: UnsafeMutableRawBufferPointer
    /// A direct broadcast's members (their indices) that this thread did not send all of, and
    /// the bytes it sent to the others (`OutputFlush.sendBroadcast`). Only this thread touches
    /// them while the sends run, so the run-time exclusivity check is left out.
    @exclusivity(unchecked) var shortfalls: [Int] = []
    @exclusivity(unchecked) var directBytes = 0

    init() {
        spans = .allocate(capacity: OutputQueue.maxIovecs)
        record = .allocate(byteCount: TLSSession.recordSize, alignment: 16)
    }

    deinit {
        spans.deallocate()
        record.deallocate()
    }
}
