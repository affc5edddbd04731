import SnapSyncWire
internal import Glibc

/// One client connection: its socket, its events, what it has half-received and what it still
/// has to send, and the rooms it has joined.
///
/// Input: the server reads into one shared 64 KiB buffer and cuts frames straight out of it;
/// only the tail of a frame that has not fully arrived is copied into `pending`. So an idle
/// connection holds no input buffer, and a burst of small requests is never copied twice.
/// `pending` grows with the bytes that actually arrived, never to a length the peer announced,
/// and its capacity counts toward the server's input budget (`--max-input-bytes`).
///
/// Output: replies and shared DIFF chunks go into `output`; nothing is written until the loop
/// pass's flush (`Server.flushPass`), which sends everything pending for the connection in one
/// gathering write. `EV_WRITE` is only armed while the kernel's send buffer is full.
///
/// Lifetime: the server's table holds the connection; libevent callbacks hold only an unretained
/// pointer to it, and every event is freed in `destroy()` before the table lets go. A connection
/// closed inside its own callback stays alive until that callback returns, because the callback
/// holds a strong reference for its duration (`withExtendedLifetime`).
final class Connection {
    /// Where the connection is in its life.
    enum State: Equatable {
        /// Accepted; only HELLO is allowed, and it must come within the handshake timeout.
        case awaitingHello
        /// WELCOME sent; requests are served, and an idle connection is PINGed.
        case ready
        /// Ending: input is read and discarded, queued output (ending with the ERROR, if any) is
        /// flushed within the close timeout, then the socket is shut down and closed.
        case closing
    }

    let id: UInt64
    let fd: Int32
    let peer: SocketAddress
    unowned let server: Server
    private(set) var state: State = .awaitingHello
    /// Set once `destroy()` ran: the socket is closed and the events are freed.
    private(set) var isDestroyed = false

    /// Mutated once per delivery (`Server.send(shared:to:)`): `@exclusivity(unchecked)` because
    /// the dynamic exclusivity check cost more than the enqueue itself (docs/benchmarks.md,
    /// Fan-out). Only the loop thread touches it, and never in overlapping accesses.
    @exclusivity(unchecked) var output: OutputQueue
    /// Bytes of a frame that has not fully arrived (empty most of the time). Its capacity is
    /// counted in `Server.inputBytes`; only `Server.receive` and `Server.dropInput` change it.
    var pending: [UInt8] = []
    /// `pending`'s capacity as last counted in `Server.inputBytes`.
    var budgetedInputBytes = 0
    /// The peer sent EOF: nothing more will be read.
    private(set) var hasReachedEndOfInput = false

    /// Joined rooms by name, with this connection's slot in `room.members`.
    var memberships: [String: (room: Room, slot: Int)] = [:]
    var clientName = ""

    /// In the server's dirty list, waiting for this pass's flush.
    @exclusivity(unchecked) var isDirty = false  // read once per delivery; see `output`
    /// EV_WRITE is armed: the kernel's send buffer was full at the last flush.
    private(set) var isWaitingForWritable = false
    /// The connection reached `closing` after sending everything and shut its sending side.
    private var hasShutDownOutput = false

    /// When the last whole frame arrived (a byte of an unfinished frame does not count, so a
    /// peer dribbling bytes cannot keep the connection alive; PROTOCOL.md §8.3).
    var lastInput: ContinuousClock.Instant
    var pingOutstanding = false
    private var nextPingNonce: UInt64 = 1

    private var readEvent: Event?
    private var writeEvent: Event?
    /// Handshake timeout, then idle/PING timer, then close deadline: one timer, re-armed.
    private var timer: Event?

    init(id: UInt64, fd: Int32, peer: SocketAddress, server: Server, outputCap: Int, meter: OutputMeter) {
        self.id = id
        self.fd = fd
        self.peer = peer
        self.server = server
        self.output = OutputQueue(cap: outputCap, meter: meter)
        self.lastInput = .now
    }

    deinit {
        precondition(isDestroyed, "a connection was released without destroy()")
    }

    private var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Registers the read event and arms the handshake timeout.
    func start(loop: EventLoop, handshakeTimeout: Duration) throws(EventLoopError) {
        readEvent = try loop.makeEvent(fd: fd, [.read, .persist], context: context, Connection.onReadable)
        timer = try loop.makeTimer(context: context, Connection.onTimer)
        try readEvent!.add()
        try timer!.add(timeout: handshakeTimeout)
    }

    // MARK: Callbacks

    private static let onReadable: EventCallback = { _, _, context in
        let connection = Unmanaged<Connection>.fromOpaque(context!).takeUnretainedValue()
        withExtendedLifetime(connection) { connection.server.readable(connection) }
    }

    private static let onWritable: EventCallback = { _, _, context in
        let connection = Unmanaged<Connection>.fromOpaque(context!).takeUnretainedValue()
        withExtendedLifetime(connection) { connection.server.writable(connection) }
    }

    private static let onTimer: EventCallback = { _, _, context in
        let connection = Unmanaged<Connection>.fromOpaque(context!).takeUnretainedValue()
        withExtendedLifetime(connection) { connection.server.timerFired(connection) }
    }

    // MARK: State

    func becomeReady() {
        precondition(state == .awaitingHello)
        state = .ready
    }

    /// When a closing connection is destroyed at the latest.
    private(set) var closeDeadline: ContinuousClock.Instant?

    /// Enters `closing` (once). The caller has queued whatever should still reach the client.
    func enterClosing(deadline: Duration) {
        guard state != .closing else { return }
        state = .closing
        closeDeadline = .now + deadline
        try? timer?.add(timeout: deadline)
    }

    func armTimer(_ timeout: Duration) {
        do {
            try timer?.add(timeout: timeout)
        } catch {
            // A timer that cannot be armed would leave the connection unwatched; end it instead.
            server.destroy(self, reason: "cannot arm timer: \(error)")
        }
    }

    func makePingNonce() -> UInt64 {
        defer { nextPingNonce &+= 1 }
        return nextPingNonce
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
    func waitForWritable(loop: EventLoop) throws(EventLoopError) {
        guard !isWaitingForWritable else { return }
        if writeEvent == nil {
            writeEvent = try loop.makeEvent(fd: fd, [.write, .persist], context: context, Connection.onWritable)
        }
        try writeEvent!.add()
        isWaitingForWritable = true
    }

    /// Disarms EV_WRITE once everything was sent.
    func stopWaitingForWritable() {
        guard isWaitingForWritable else { return }
        writeEvent?.remove()
        isWaitingForWritable = false
    }

    /// Called when a closing connection has handed everything to the kernel: FIN to the peer.
    /// The socket is then closed once the peer has acknowledged every byte, or sent EOF, or the
    /// close deadline passed — not at once, because closing a socket with unread input makes
    /// the kernel reset the connection and drop whatever it had not delivered yet (the ERROR).
    func shutDownOutput() {
        guard !hasShutDownOutput else { return }
        hasShutDownOutput = true
        Syscall.shutdownWrite(fd)
    }

    /// Closing, flushed, shut down, and every byte acknowledged: nothing can be lost by closing.
    var isFullyDelivered: Bool {
        hasShutDownOutput && output.isEmpty && Syscall.unacknowledgedBytes(fd) == 0
    }

    var hasShutDown: Bool { hasShutDownOutput }

    // MARK: End

    /// Frees the events and closes the socket. Only `Server.destroy` calls this.
    func releaseResources() {
        guard !isDestroyed else { return }
        isDestroyed = true
        state = .closing
        readEvent?.free()
        writeEvent?.free()
        timer?.free()
        readEvent = nil
        writeEvent = nil
        timer = nil
        isWaitingForWritable = false
        output.removeAll()
        pending = []
        Syscall.close(fd)
    }
}
