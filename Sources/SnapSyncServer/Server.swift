package import Logging
import SnapSyncModel
import SnapSyncWire
package import SnapSyncStore
internal import Glibc

/// The daemon: one event loop serving every connection and room.
///
/// A loop pass: libevent runs every ready read, accept, timer and signal callback at priority 0;
/// handlers only queue output and mark connections dirty. Then the flush event (priority 1,
/// activated once per pass with `event_active`) commits the pass's writes to the store and sends
/// each dirty connection everything it has pending in one gathering write. Fan-out thus costs
/// one syscall per subscriber per pass however many DIFFs the pass produced — the measured cost
/// of fan-out is write calls, not bytes.
///
/// Threads: everything here runs on the loop's thread, and nothing is locked. Rooms and
/// connections are kept so that they can later be sharded over one loop per core, following
/// memcached: each shard gets its own `EventLoop` (EVENT_BASE_FLAG_NOLOCK) with its own rooms,
/// connections, dirty list and scratch buffers; a room's DIFF for a member on another shard
/// would be handed over (as the shared, immutable chunk) through that shard's queue and notify
/// fd, and the flush of that shard would send it. Nothing in `Room` or `Connection` assumes a
/// single loop beyond "one owner thread".
public final class Server {
    public let configuration: ServerConfiguration
    let logger: Logger
    let loop: EventLoop
    let store: any RoomStore
    private let notifier = SystemdNotifier()

    private var listener: Listener?
    var connections: [UInt64: Connection] = [:]
    var rooms: [String: Room] = [:]
    var totalItems = 0
    /// Bytes held for unfinished frames, all connections together (`--max-input-bytes`).
    var inputBytes = 0
    /// Output memory of all connections' queues, a shared chunk once (`--max-output-total-bytes`,
    /// Server+OutputBudget.swift).
    let outputMeter = OutputMeter()
    var outputBytes: Int { outputMeter.bytes }
    /// All rooms' bytes (`--max-room-total-bytes`).
    let roomBudget: RoomMemoryBudget
    /// Counted once per frame sent; unchecked for the reason given on `Connection.output`.
    @exclusivity(unchecked) var stats = ServerStats()
    private var nextConnectionId: UInt64 = 1
    let startTime = ContinuousClock.now

    // Flush machinery (see the type's doc).
    // Touched once per delivery (markDirty) and per flush; unchecked for the reason given on
    // `Connection.output`.
    @exclusivity(unchecked) private var dirty: [Connection] = []
    @exclusivity(unchecked) private var flushing: [Connection] = []
    private var flushEvent: Event?
    private var flushScheduled = false
    /// When this pass queued its first output: its flush is timed from there (STATS loop_pass_*).
    private var passOutputStarted = ContinuousClock.now
    /// Priority-0 callbacks run since the flush was scheduled. libevent runs no lower-priority
    /// event while higher-priority ones keep becoming active, so under a constant stream of
    /// input (or accepts) the flush could starve; past `maxCallbacksBeforeFlush` the callback
    /// path flushes inline.
    private var callbacksSinceFlushScheduled = 0
    static let maxCallbacksBeforeFlush = 64
    private let iovecs: UnsafeMutablePointer<iovec>

    // Scratch buffers, reused for every read and every encoding: the hot path allocates nothing
    // once they have grown.
    let readBuffer: UnsafeMutableRawBufferPointer
    static let readBufferSize = 64 * 1024
    /// At most this many reads per connection per readable callback, for fairness between
    /// connections; level-triggered epoll calls back for the rest.
    static let maxReadsPerCallback = 4
    var encodeBuffer: [UInt8] = []
    var diffBuffer: [UInt8] = []
    /// Cuts frames out of the read buffer: up to max_frame_bytes once HELLO is done, and up to
    /// `maxFrameBytesBeforeHello` before it.
    let frameCutter: FrameCutter
    let preHelloCutter: FrameCutter
    /// The latest encoding of each room's snapshot, shared by the SNAPSHOT replies that use it.
    var snapshotEncodings = SnapshotEncodings()

    private var statsTimer: Event?
    private var signalEvents: [Event] = []
    private var shutdownTimer: Event?
    public private(set) var isShuttingDown = false
    private var fatalError: ServerError?

    /// Creates the loop. Nothing is bound until `start()`.
    package init(configuration: ServerConfiguration, logger: Logger, store: any RoomStore = MemoryStore()) throws(ServerError) {
        do {
            try configuration.validate()
        } catch {
            throw ServerError(error.description)
        }
        self.configuration = configuration
        self.logger = logger
        self.store = store
        self.roomBudget = RoomMemoryBudget(limit: configuration.maxRoomTotalBytes)
        do {
            self.loop = try EventLoop()
        } catch {
            throw ServerError("cannot create the event loop: \(error)")
        }
        self.frameCutter = FrameCutter(limits: configuration.wire)
        self.preHelloCutter = FrameCutter(
            maxBodyBytes: min(Self.maxFrameBytesBeforeHello, configuration.wire.maxFrameBytes),
            limitDescription: configuration.wire.maxFrameBytes > Self.maxFrameBytesBeforeHello
                ? "the limit of \(Self.maxFrameBytesBeforeHello) bytes for frames before HELLO" : nil)
        self.readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
        self.iovecs = .allocate(capacity: OutputQueue.maxIovecs)
    }

    deinit {
        for connection in connections.values { connection.releaseResources() }
        connections.removeAll()
        rooms.removeAll()
        listener?.close()
        freeLoopEvents()
        readBuffer.deallocate()
        iovecs.deallocate()
    }

    private var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    // MARK: Lifecycle

    /// Binds and listens, installs SIGTERM/SIGINT handling (when `handleSignals`), logs
    /// `listening on HOST:PORT` and tells systemd READY=1.
    /// - Returns: the bound address (with the real port when port 0 was asked for).
    @discardableResult
    public func start(handleSignals: Bool = true) throws(ServerError) -> SocketAddress {
        let address: SocketAddress
        do {
            address = try SocketAddress(host: configuration.host, port: configuration.port)
        } catch {
            throw ServerError(error.description)
        }
        let descriptors = Syscall.raiseOpenFileLimit(to: configuration.maxConnections + 64)
        if descriptors < configuration.maxConnections + 64 {
            logger.warning(
                "the open-file limit is below --max-connections; accepts may fail with EMFILE",
                metadata: ["nofile": "\(descriptors)", "max_connections": "\(configuration.maxConnections)"])
        }
        do {
            let listener = try Listener(address: address, backlog: configuration.listenBacklog, server: self)
            self.listener = listener
            flushEvent = try loop.makeTimer(priority: .flush, context: context, Server.onFlush)
            statsTimer = try loop.makeTimer(context: context, Server.onStatsTick)
            try statsTimer!.add(timeout: .seconds(1))
            if handleSignals {
                Syscall.unblock([SIGTERM, SIGINT])
                for signal in [SIGTERM, SIGINT] {
                    let event = try loop.makeSignal(signal, context: context, Server.onSignal)
                    signalEvents.append(event)
                    try event.add()
                }
            }
            try listener.start(loop: loop)
        } catch let error as SystemError {
            throw ServerError("cannot listen on \(address): \(error)")
        } catch {
            throw ServerError("cannot set up the event loop: \(error)")
        }
        let bound = listener!.address
        stats.tick(now: .now)
        logger.info(
            "listening on \(bound)",
            metadata: [
                "libevent": "\(EventLoop.libeventVersion)", "backend": "\(loop.backend)",
                "max_connections": "\(configuration.maxConnections)",
            ])
        do {
            try notifier.notify("READY=1\nSTATUS=listening on \(bound)\nMAINPID=\(getpid())")
        } catch {
            logger.warning("sd_notify READY=1 failed", metadata: ["error": "\(error)"])
        }
        return bound
    }

    /// Runs the loop until shutdown has finished (after SIGTERM/SIGINT or `shutdown()`).
    /// - Throws: when the loop or the store failed; the daemon should then exit non-zero.
    public func run() throws(ServerError) {
        do {
            try loop.run()
        } catch {
            throw ServerError("the event loop failed: \(error)")
        }
        freeLoopEvents()
        if let fatalError { throw fatalError }
    }

    /// Stops accepting, sends every client ERROR shutting_down after its pending output, and
    /// ends `run()` once every connection is closed or `shutdownTimeout` has passed.
    public func shutdown() {
        guard !isShuttingDown else { return }
        isShuttingDown = true
        logger.info("shutting down", metadata: ["connections": "\(connections.count)"])
        do {
            try notifier.notify("STOPPING=1\nSTATUS=shutting down")
        } catch {
            logger.warning("sd_notify STOPPING=1 failed", metadata: ["error": "\(error)"])
        }
        listener?.close()
        listener = nil
        for connection in Array(connections.values) {
            close(connection, error: .shuttingDown, "the server is shutting down")
        }
        do {
            shutdownTimer = try loop.makeTimer(context: context, Server.onShutdownDeadline)
            try shutdownTimer!.add(timeout: configuration.shutdownTimeout)
        } catch {
            finishShutdown()
            return
        }
        finishShutdownIfIdle()
    }

    private func finishShutdownIfIdle() {
        if isShuttingDown && connections.isEmpty { finishShutdown() }
    }

    private var isFinishingShutdown = false

    private func finishShutdown() {
        guard !isFinishingShutdown else { return }
        isFinishingShutdown = true
        for connection in Array(connections.values) { destroy(connection, reason: "shutdown deadline passed") }
        logger.info("stopped", metadata: ["uptime_seconds": "\((ContinuousClock.now - startTime).components.seconds)"])
        loop.stop()
    }

    /// The store failed to commit: nothing of this pass may reach a client. Stop at once.
    func fail(_ error: ServerError) {
        logger.critical("\(error.message)")
        fatalError = error
        for connection in Array(connections.values) { destroy(connection, reason: "fatal error") }
        loop.stop()
    }

    private func freeLoopEvents() {
        flushEvent?.free()
        statsTimer?.free()
        shutdownTimer?.free()
        for event in signalEvents { event.free() }
        flushEvent = nil
        statsTimer = nil
        shutdownTimer = nil
        signalEvents = []
    }

    private static let onSignal: EventCallback = { signal, _, context in
        let server = Unmanaged<Server>.fromOpaque(context!).takeUnretainedValue()
        server.logger.info("received \(signal == SIGTERM ? "SIGTERM" : signal == SIGINT ? "SIGINT" : "signal \(signal)")")
        server.shutdown()
    }

    private static let onShutdownDeadline: EventCallback = { _, _, context in
        let server = Unmanaged<Server>.fromOpaque(context!).takeUnretainedValue()
        if !server.connections.isEmpty {
            server.logger.warning("shutdown timeout: closing remaining connections", metadata: ["connections": "\(server.connections.count)"])
        }
        server.finishShutdown()
    }

    private static let onStatsTick: EventCallback = { _, _, context in
        let server = Unmanaged<Server>.fromOpaque(context!).takeUnretainedValue()
        let started = ContinuousClock.now
        server.stats.tick(now: started)
        server.maintainStore()
        server.stats.passTimes.record(.now - started)
        try? server.statsTimer?.add(timeout: .seconds(1))
    }

    // MARK: Accepting

    /// Accepts every pending connection (until EAGAIN). Over `maxConnections`, or while
    /// shutting down, a connection is refused at once with ERROR and closed, never left waiting.
    func acceptPending(from listener: Listener) {
        defer { noteHighPriorityCallback() }
        while true {
            let accepted: Syscall.Accepted
            do {
                accepted = try Syscall.accept(listener.fd)
            } catch {
                if error.errno == EMFILE || error.errno == ENFILE || error.errno == ENOBUFS || error.errno == ENOMEM {
                    logger.warning("cannot accept, pausing accepts for 100ms", metadata: ["error": "\(error)"])
                    listener.pause(for: .milliseconds(100))
                    return
                }
                // ECONNABORTED and friends: that one connection is gone; go on with the next.
                logger.debug("accept failed", metadata: ["error": "\(error)"])
                continue
            }
            guard case .connection(let fd, let peer) = accepted else { return }
            if isShuttingDown {
                refuse(fd, .shuttingDown, "the server is shutting down")
            } else if connections.count >= configuration.maxConnections {
                stats.connectionsRefused += 1
                logger.warning(
                    "connection refused: too many connections",
                    metadata: [
                        "peer": "\(peer)", "max_connections": "\(configuration.maxConnections)",
                    ])
                refuse(fd, .tooManyConnections, "the server is at its limit of \(configuration.maxConnections) connections")
            } else {
                admit(fd, peer: peer)
            }
        }
    }

    private func admit(_ fd: Int32, peer: SocketAddress) {
        // Replies are small and latency matters more than segment count; writes are already
        // coalesced per pass, so Nagle would only add delay.
        try? Syscall.setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        let connection = Connection(
            id: nextConnectionId, fd: fd, peer: peer, server: self,
            outputCap: configuration.maxOutputBytes, meter: outputMeter)
        nextConnectionId += 1
        do {
            try connection.start(loop: loop, handshakeTimeout: configuration.handshakeTimeout)
        } catch {
            logger.error("cannot watch a new connection", metadata: ["peer": "\(peer)", "error": "\(error)"])
            connection.releaseResources()
            return
        }
        connections[connection.id] = connection
        stats.connectionsAccepted += 1
        logger.debug("connection accepted", metadata: ["conn": "\(connection.id)", "peer": "\(peer)"])
    }

    /// Best effort: the ERROR is written straight into the new socket's empty send buffer, the
    /// sending side is shut, input already there is discarded (so that closing does not reset
    /// the connection under the ERROR), and the socket is closed.
    private func refuse(_ fd: Int32, _ code: ErrorCode, _ message: String) {
        encodeBuffer.removeAll(keepingCapacity: true)
        FrameEncoder().encode(.error(code, message), into: &encodeBuffer)
        _ = encodeBuffer.withUnsafeBytes { try? Syscall.send(fd, $0) }
        Syscall.shutdownWrite(fd)
        _ = try? Syscall.read(fd, into: readBuffer)
        Syscall.close(fd)
    }

    // MARK: Closing

    /// Starts closing a connection: it leaves its rooms at once (no more DIFFs), `message` (if
    /// any) is queued after its pending output as an ERROR, and it is flushed, shut down and
    /// closed within `shutdownTimeout`.
    func close(_ connection: Connection, error code: ErrorCode?, _ message: String) {
        guard connection.state != .closing else { return }
        leaveAllRooms(connection)
        if let code {
            send(.error(code, message), to: connection, force: true)
        }
        connection.enterClosing(deadline: configuration.shutdownTimeout)
        dropInput(connection)
        markDirty(connection)
    }

    /// Ends a connection now: frees its events, closes its socket, forgets it.
    func destroy(_ connection: Connection, reason: String) {
        guard !connection.isDestroyed else { return }
        leaveAllRooms(connection)
        dropInput(connection)
        connection.releaseResources()
        connections[connection.id] = nil
        logger.debug("connection closed", metadata: ["conn": "\(connection.id)", "peer": "\(connection.peer)", "reason": "\(reason)"])
        finishShutdownIfIdle()
    }

    func leaveAllRooms(_ connection: Connection) {
        for (_, membership) in connection.memberships {
            removeMember(connection, from: membership.room)
        }
    }

    // MARK: Timers

    func timerFired(_ connection: Connection) {
        switch connection.state {
        case .awaitingHello:
            stats.protocolErrors += 1
            logger.info("no HELLO in time, closing", metadata: ["conn": "\(connection.id)", "peer": "\(connection.peer)"])
            close(connection, error: .timeout, "no HELLO within \(ConfigurationValue.describe(duration: configuration.handshakeTimeout))")
        case .ready:
            let idle = configuration.idleTimeout
            let silent = ContinuousClock.now - connection.lastInput
            if silent < idle {
                connection.pingOutstanding = false
                connection.armTimer(idle - silent)
            } else if connection.pingOutstanding {
                logger.info("no answer to PING, closing", metadata: ["conn": "\(connection.id)", "peer": "\(connection.peer)"])
                close(connection, error: .timeout, "no frame for \(ConfigurationValue.describe(duration: silent)), not even a PONG")
            } else {
                connection.pingOutstanding = true
                send(.ping(nonce: connection.makePingNonce()), to: connection)
                connection.armTimer(idle)
            }
        case .closing:
            let now = ContinuousClock.now
            if connection.isFullyDelivered {
                destroy(connection, reason: "closed")
            } else if let deadline = connection.closeDeadline, now < deadline {
                // Flushed and waiting for acknowledgements: look again soon. Still flushing
                // (EV_WRITE armed): wait for the deadline.
                connection.armTimer(connection.hasShutDown ? min(Self.lingerPollInterval, deadline - now) : deadline - now)
            } else {
                destroy(connection, reason: "close timeout")
            }
        }
    }

    /// How often a flushed, closing connection checks whether its peer acknowledged everything.
    static let lingerPollInterval: Duration = .milliseconds(10)

    // MARK: Output

    /// Queues `message` for `connection`. Over the connection's output cap the connection is
    /// cut off as a slow consumer instead (unless `force`, for the ERROR that ends it).
    func send(_ message: Message, to connection: Connection, force: Bool = false) {
        guard !connection.isDestroyed, force || connection.state != .closing else { return }
        encodeBuffer.removeAll(keepingCapacity: true)
        let size = FrameEncoder().encode(message, into: &encodeBuffer)
        if !force && connection.output.wouldExceedCap(adding: size) {
            cutOff(connection)
            return
        }
        encodeBuffer.withUnsafeBytes { connection.output.append($0) }
        stats.framesOut += 1
        markDirty(connection)
        // Not for the ERROR that ends a connection: budget enforcement itself queues those.
        if !force && outputBytes > configuration.maxOutputTotalBytes { enforceOutputBudget() }
    }

    /// Queues a shared frame (a DIFF) for `connection`, by reference.
    func send(shared chunk: OutputChunk, to connection: Connection) {
        guard connection.state != .closing else { return }
        if connection.output.wouldExceedCap(adding: chunk.count) {
            cutOff(connection)
            return
        }
        connection.output.enqueue(chunk)
        stats.framesOut += 1
        markDirty(connection)
        if outputBytes > configuration.maxOutputTotalBytes { enforceOutputBudget() }
    }

    /// A subscriber that stopped reading: drop what it has not started receiving (keeping the
    /// rest of a partly sent frame, so the stream stays framed), queue ERROR slow_consumer and
    /// close. Its memory is now bounded by one frame, and no one else waits for it.
    func cutOff(_ connection: Connection) {
        stats.slowConsumerDisconnects += 1
        let queued = connection.output.pendingBytes
        let dropped = connection.output.dropAllButPartialHead()
        logger.warning(
            "slow consumer, closing",
            metadata: [
                "conn": "\(connection.id)", "peer": "\(connection.peer)", "queued_bytes": "\(queued)",
                "dropped_bytes": "\(dropped)", "cap": "\(configuration.maxOutputBytes)",
            ])
        close(
            connection, error: .slowConsumer,
            "unread output passed the limit of \(ConfigurationValue.describe(byteCount: configuration.maxOutputBytes))")
    }

    /// Puts the connection on this pass's flush list. A connection waiting for EV_WRITE is left
    /// alone: its send buffer is full, so a write would only say EAGAIN.
    func markDirty(_ connection: Connection) {
        guard !connection.isDirty, !connection.isWaitingForWritable, !connection.isDestroyed else { return }
        connection.isDirty = true
        dirty.append(connection)
        if !flushScheduled {
            flushScheduled = true
            passOutputStarted = .now
            callbacksSinceFlushScheduled = 0
            flushEvent?.activate()
        }
    }

    /// EV_WRITE fired: the kernel has room again. The bytes go out in this pass's flush.
    ///
    /// EV_WRITE is disarmed here, not left armed until the queue drains: a persistent write
    /// event on a writable socket is active in every loop iteration at the higher priority,
    /// and libevent runs no lower-priority event while a higher one is active, so the flush
    /// itself would starve. The flush arms it again if the buffer fills up.
    func writable(_ connection: Connection) {
        defer { noteHighPriorityCallback() }
        connection.stopWaitingForWritable()
        markDirty(connection)
    }

    /// Called after each read, write and accept callback: flushes inline if the flush event is
    /// being starved.
    func noteHighPriorityCallback() {
        guard flushScheduled else { return }
        callbacksSinceFlushScheduled += 1
        if callbacksSinceFlushScheduled >= Self.maxCallbacksBeforeFlush { flushPass() }
    }

    private static let onFlush: EventCallback = { _, _, context in
        let server = Unmanaged<Server>.fromOpaque(context!).takeUnretainedValue()
        server.flushPass()
    }

    /// Commits the pass's writes to the store, then sends every dirty connection its output.
    /// - Complexity: O(dirty connections + iovecs sent); one sendmsg per connection unless it
    ///   has more than 1024 chunks pending.
    func flushPass() {
        flushScheduled = false
        callbacksSinceFlushScheduled = 0
        guard !dirty.isEmpty else { return }
        do {
            try store.commit()
        } catch {
            fail(ServerError("the store failed to commit: \(error); stopping without acknowledging"))
            return
        }
        swap(&dirty, &flushing)
        for connection in flushing {
            connection.isDirty = false
            flush(connection)
        }
        flushing.removeAll(keepingCapacity: true)
        stats.passTimes.record(.now - passOutputStarted)
    }

    private func flush(_ connection: Connection) {
        guard !connection.isDestroyed else { return }
        while !connection.output.isEmpty {
            let count = connection.output.gather(into: iovecs, capacity: OutputQueue.maxIovecs)
            var requested = 0
            for index in 0..<count { requested += iovecs[index].iov_len }
            let written: Int?
            do {
                written = try Syscall.send(connection.fd, iovecs, count: count)
            } catch {
                destroy(connection, reason: error.isDisconnect ? "peer went away" : "\(error)")
                return
            }
            guard let written else { break }
            connection.output.consume(written)
            stats.bytesOut += UInt64(written)
            // A short write means the send buffer is full; asking again would only say EAGAIN.
            if written < requested { break }
        }
        if connection.output.isEmpty {
            connection.stopWaitingForWritable()
            if connection.state == .closing {
                connection.shutDownOutput()
                if connection.isFullyDelivered {
                    destroy(connection, reason: "closed")
                } else {
                    connection.armTimer(Self.lingerPollInterval)
                }
            }
        } else {
            do {
                try connection.waitForWritable(loop: loop)
            } catch {
                destroy(connection, reason: "cannot watch for writability: \(error)")
            }
        }
    }
}

/// Why the server could not start or had to stop.
public struct ServerError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
