import Logging
internal import Glibc
import SnapSyncHub
import SnapSyncLoop

/// One client connection: a socket that carries a `Session` (its `transport`). It owns its socket's events, its reading
/// and framing (`Connection+Input.swift`), its timer's state machine (`Connection+Timer.swift`)
/// and its EV_WRITE; the hub owns what it is sent and the rooms it joined.
///
/// Input: a connection reads into the shared 64 KiB read buffer and cuts frames straight out of
/// it; only the tail of a frame that has not fully arrived (or the frames left when its
/// `InputSlice` ended) is copied into `pending`. So an idle
/// connection holds no input buffer, and a burst of small requests is never copied twice.
/// `pending` grows with the bytes that actually arrived, never to a length the peer announced,
/// and its bytes count toward the input budget (`--max-input-bytes`); its capacity is kept
/// within an eighth of them (or 4 KiB), so the budget also bounds the memory.
///
/// Output: the hub queues replies and shared DIFF chunks in `output`; nothing is written until
/// the loop pass's flush (`OutputFlush`), which sends everything pending in one gathering write.
/// `EV_WRITE` is only armed while the kernel's send buffer is full.
///
/// Lifetime: the hub's session table holds the connection; libevent callbacks hold only an
/// unretained pointer to it, and every event is freed in `didEnd` before the table lets go. A
/// connection ended inside its own callback stays alive until that callback returns, because
/// the callback holds a strong reference for its duration (`withExtendedLifetime`).
final class Connection: SessionTransport {
    /// The hub's side of this client: its state, output queue and rooms.
    let session: Session
    let fd: Int32
    let address: SocketAddress
    unowned let context: ConnectionContext
    /// The context's flush, without a reference count: it sends this connection's output once
    /// per pass (`sendQueuedOutput`), where a checked `unowned` load would cost a retain and a
    /// release each time. The server owns the flush and ends every connection before it goes.
    unowned(unsafe) let flush: OutputFlush
    /// The TLS session of a connection accepted on the TLS listener (`Connection+TLS.swift`);
    /// nil on the plain one. The hub never sees it: it queues plaintext either way.
    let tls: TLSSession?
    var hub: Hub { context.hub }

    /// Bytes of a frame that has not fully arrived (empty most of the time). Its count is
    /// counted in `context.inputBytes`; only `receive` and `dropInput` change it.
    var pending: [UInt8] = []
    /// `pending`'s count as last counted in `context.inputBytes`.
    var budgetedInputBytes = 0
    /// `pending` starts with whole frames left when the connection's `InputSlice` ended: they
    /// are handled at its next turn, before anything more is read.
    var isHoldingFrames = false
    /// The peer sent EOF: nothing more will be read.
    private(set) var hasReachedEndOfInput = false
    /// Cluster mode: the peer's EOF came while a request waited for the log, with frames deferred
    /// behind it (Hub+DeferredInput.swift); `endOfInput` runs again once they are handled.
    var endOfInputIsDeferred = false

    /// When the last whole frame arrived (a byte of an unfinished frame does not count, so a
    /// peer dribbling bytes cannot keep the connection alive; PROTOCOL.md §8.3).
    var lastInput: ContinuousClock.Instant
    var pingOutstanding = false
    var nextPingNonce: UInt64 = 1
    /// When a closing connection is ended at the latest.
    var closeDeadline: ContinuousClock.Instant?
    /// The connection reached `closing` after sending everything and shut its sending side.
    private(set) var hasShutDownOutput = false

    /// What this pass's send did, from the thread that sent it until the loop's thread applies
    /// it (`OutputFlush.finishSend`); one thread sends a connection per pass.
    var transmission = Transmission()

    var readEvent: Event?
    private var writeEvent: Event?
    /// Handshake timeout, then idle/PING timer, then close deadline: one timer, re-armed.
    private var timer: Event?

    init(id: UInt64, fd: Int32, address: SocketAddress, context: ConnectionContext, tls: TLSSession? = nil) {
        self.fd = fd
        self.tls = tls
        self.address = address
        self.context = context
        self.flush = context.flush
        self.lastInput = .now
        self.session = Session(id: id, outputCap: context.configuration.maxOutputBytes, meter: context.hub.outputMeter)
        session.transport = self
        session.transportContext = Unmanaged.passUnretained(self).toOpaque()
    }

    var peer: String { "\(address)" }

    /// The connection that carries `session`, if one does, without a reference count or a type
    /// check (`Session.transportContext`, which only a connection sets): the flush asks for it
    /// once per connection or member per pass. Valid while the session's transport, which holds
    /// the connection, is set.
    @inline(__always)
    static func unretained(carrying session: Session) -> Unmanaged<Connection>? {
        session.transportContext.map { Unmanaged<Connection>.fromOpaque($0) }
    }

    deinit {
        precondition(session.isEnded, "a connection was released without Hub.end")
    }

    private var contextPointer: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Registers the read event and arms the handshake timeout.
    func start() throws(EventLoopError) {
        let loop = context.loop
        readEvent = try loop.makeEvent(fd: fd, [.read, .persist], context: contextPointer, Connection.onReadable)
        timer = try loop.makeTimer(context: contextPointer, Connection.onTimer)
        try readEvent!.add()
        try timer!.add(timeout: context.configuration.handshakeTimeout)
    }

    // MARK: Callbacks

    private static let onReadable: EventCallback = { _, _, pointer in
        let connection = Unmanaged<Connection>.fromOpaque(pointer!).takeUnretainedValue()
        withExtendedLifetime(connection) { connection.readable() }
    }

    private static let onWritable: EventCallback = { _, _, pointer in
        let connection = Unmanaged<Connection>.fromOpaque(pointer!).takeUnretainedValue()
        withExtendedLifetime(connection) { connection.writable() }
    }

    private static let onTimer: EventCallback = { _, _, pointer in
        let connection = Unmanaged<Connection>.fromOpaque(pointer!).takeUnretainedValue()
        withExtendedLifetime(connection) { connection.timerFired() }
    }

    // MARK: The hub's hooks (SessionTransport)

    func sessionBecameReady() {
        armTimer(context.configuration.idleTimeout)
    }

    /// Delivers what is queued within `--shutdown-timeout`; input from now on is discarded.
    func sessionStartedClosing() {
        let deadline = context.configuration.shutdownTimeout
        closeDeadline = .now + deadline
        try? timer?.add(timeout: deadline)
        dropInput()
    }

    func sessionDrainedDeferredInput() {
        // Frames handed back (`sessionReturnsInput`) come first; their turn ends here again.
        guard endOfInputIsDeferred, !isHoldingFrames else { return }
        endOfInputIsDeferred = false
        endOfInput()
    }

    /// The hub's deferred frames past one turn (cluster mode): they go before whatever this
    /// connection holds (an unfinished frame, read after them), and are handled a turn per pass.
    /// O(bytes) for the copy, at most the hub's deferred-input bound.
    func sessionReturnsInput(_ frames: [UInt8]) {
        guard session.state != .closing, !session.isEnded, !frames.isEmpty else { return }
        pending = frames + pending
        accountInput()
        holdFramesUntilNextTurn()
    }

    /// Frees the events and closes the socket.
    func sessionEnded(reason: String) {
        dropInput()
        readEvent?.free()
        writeEvent?.free()
        timer?.free()
        readEvent = nil
        writeEvent = nil
        timer = nil
        session.isOutputBlocked = false
        Syscall.close(fd)
        hub.logger.debug("connection closed", metadata: session.logMetadata(["reason": "\(reason)"]))
        context.connectionEnded()
    }

    /// The pass is committed: the flush sends what the hub queued.
    func sendQueuedOutput() {
        flush.send(self)
    }

    func armTimer(_ timeout: Duration) {
        do {
            try timer?.add(timeout: timeout)
        } catch {
            // A timer that cannot be armed would leave the connection unwatched; end it instead.
            hub.end(session, reason: "cannot arm timer: \(error)")
        }
    }

    /// The peer sent EOF. The read event is removed: EOF stays readable, so a level-triggered
    /// read event would fire in every loop pass at the higher priority and starve the flush that
    /// sends the answers the peer is still owed.
    func stopReading() {
        hasReachedEndOfInput = true
        readEvent?.remove()
    }

    // MARK: Writing

    /// Arms EV_WRITE (persistent) after the kernel's send buffer filled up.
    func waitForWritable() throws(EventLoopError) {
        guard !session.isOutputBlocked else { return }
        if writeEvent == nil {
            writeEvent = try context.loop.makeEvent(fd: fd, [.write, .persist], context: contextPointer, Connection.onWritable)
        }
        try writeEvent!.add()
        session.isOutputBlocked = true
    }

    /// Disarms EV_WRITE once everything was sent.
    func stopWaitingForWritable() {
        guard session.isOutputBlocked else { return }
        writeEvent?.remove()
        session.isOutputBlocked = false
    }

    /// EV_WRITE fired: the kernel has room again. The bytes go out in this pass's flush.
    ///
    /// EV_WRITE is disarmed here, not left armed until the queue drains: a persistent write
    /// event on a writable socket is active in every loop iteration at the higher priority,
    /// and libevent runs no lower-priority event while a higher one is active, so the flush
    /// itself would starve. The flush arms it again if the buffer fills up.
    private func writable() {
        defer { context.flush.noteHighPriorityCallback() }
        stopWaitingForWritable()
        if let tls, tls.readWantsWrite {
            // The handshake (or a TLS read) waited for room to write: read on.
            tls.readWantsWrite = false
            readable()
            if session.isEnded { return }
        }
        hub.markDirty(session)
    }

    /// Called when a closing connection has handed everything to the kernel: FIN to the peer.
    /// The socket is then closed once the peer has acknowledged every byte, or sent EOF, or the
    /// close deadline passed — not at once, because closing a socket with unread input makes
    /// the kernel reset the connection and drop whatever it had not delivered yet (the ERROR).
    func shutDownOutput() {
        guard !hasShutDownOutput else { return }
        hasShutDownOutput = true
        tls?.sendCloseNotify()
        Syscall.shutdownWrite(fd)
    }

    /// Closing, flushed, shut down, and every byte acknowledged: nothing can be lost by closing.
    var isFullyDelivered: Bool {
        hasShutDownOutput && !hasUnsentOutput && Syscall.unacknowledgedBytes(fd) == 0
    }

    /// Bytes queued, or (TLS) a record's plaintext that OpenSSL must be asked again to send.
    var hasUnsentOutput: Bool {
        session.hasQueuedOutput || !(tls?.retryWrite.isEmpty ?? true)
    }
}
