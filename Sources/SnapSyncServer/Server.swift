package import Logging
import SnapSyncAuth
import SnapSyncModel
import SnapSyncWire
package import SnapSyncStore
internal import Glibc
package import SnapSyncHub
package import SnapSyncLoop

/// The daemon's wiring: the event loop, the listener, signals, the one-second stats timer, and
/// start, run and shutdown. Requests are the `Hub`'s (no sockets); each `Connection` owns its
/// reading, framing and timers; `OutputFlush` writes.
///
/// A loop pass: libevent runs every ready read, accept, timer and signal callback at priority 0;
/// handlers only queue output and mark connections dirty. Then the flush event (priority 1,
/// activated once per pass with `event_active`) commits the pass's writes to the store and sends
/// each dirty connection everything it has pending in one gathering write. Fan-out thus costs
/// one syscall per subscriber per pass however many DIFFs the pass produced — the measured cost
/// of fan-out is write calls, not bytes.
///
/// Threads: everything here runs on the loop's thread, and nothing is locked (in cluster mode
/// the loop's base is made with locking, `EventLoop(locking:)`, because libnats's threads add
/// and activate events on it; every callback still runs on the loop's thread). Two kinds of
/// thread work beside it: the `LoopWorker`'s computes the folds of large rooms from values the
/// hub hands it and posts each result back through a pipe the loop reads; and with
/// `--io-threads` above 1, the `IOThreads` share a committed pass's sends while the loop's
/// thread waits for them (`OutputFlush.sendAll`), touching only the connections they send and
/// never the hub (docs/engineering.md, "IO threads", says why this design and not one loop per
/// core).
package final class Server {
    package let configuration: ServerConfiguration
    let logger: Logger
    let loop: EventLoop
    /// The rooms and every request, socket-free.
    package let hub: Hub
    let flush: OutputFlush
    let connectionContext: ConnectionContext
    private let notifier = SystemdNotifier()

    private var listener: Listener?
    /// The TLS listener (`--tls-listen`) and the context new TLS connections get; SIGHUP
    /// replaces the context (`Server+TLS.swift`).
    private var tlsListener: Listener?
    var tlsContext: TLSContext?
    /// The TLS listener's bound address (with the real port when port 0 was asked for).
    package private(set) var tlsAddress: SocketAddress?
    /// Where the hub's folds of large rooms run (`OffLoopWorker`), off this loop's thread.
    private var worker: LoopWorker?
    private var statsTimer: Event?
    private var signalEvents: [Event] = []
    private var shutdownTimer: Event?
    /// Armed while a room's presence waits for its next PRESENCE_DIFF (`Hub.flushPresence`).
    private var presenceTimer: Event?
    private var windowCountsTimer: Event?
    package internal(set) var isShuttingDown = false
    /// The cores this process may run on (`--io-threads`'s default).
    package static func availableCores() -> Int { IOThreads.availableCores() }
    /// Whether the client listener is up (after `start()`, until shutdown closes it).
    package var isListening: Bool { listener != nil || tlsListener != nil }
    private var isFinishingShutdown = false
    /// `connectionContext.closedAtDeadline` when the shutdown began.
    private var closedAtDeadlineBeforeShutdown = 0
    /// Why the daemon stopped early (the store failed), thrown by `run()`.
    private var failure: ServerError?

    /// Creates the loop, or takes `loop` (one the metrics endpoint already serves on). Nothing is
    /// bound until `start()`.
    /// - Parameters:
    ///   - store: where a single node's rooms are made durable (`LocalRoomEngine`).
    ///   - loop: the loop to run on; one is made here (without locking) when nil. Cluster mode
    ///     gives one made with locking, which libnats's threads need.
    ///   - log: cluster mode: the cluster's log every room goes through
    ///     (`ReplicatedRoomEngine`), instead of `store`.
    package init(
        configuration: ServerConfiguration, logger: Logger, store: any RoomStore = MemoryStore(), loop: EventLoop? = nil,
        log: (any RoomLog)? = nil
    ) throws(ServerError) {
        do {
            try configuration.validate()
        } catch {
            throw ServerError(error.description)
        }
        self.configuration = configuration
        self.logger = logger
        do {
            self.loop = try loop ?? EventLoop()
        } catch {
            throw ServerError("cannot create the event loop: \(error)")
        }
        // The one choice of engine: the cluster's log when there is one, else this node's store.
        let hub =
            if let log { Hub(configuration: configuration, logger: logger, log: log) } else {
                Hub(configuration: configuration, logger: logger, store: store)
            }
        self.hub = hub
        do {
            self.flush = try OutputFlush(hub: hub, ioThreads: configuration.ioThreads, batch: configuration.ioThreadBatch)
        } catch {
            throw ServerError("cannot start the IO threads: \(error)")
        }
        self.connectionContext = ConnectionContext(loop: self.loop, hub: hub, flush: flush)
        hub.storeFailed = { [unowned self] error in self.fail(error) }
        connectionContext.connectionEnded = { [unowned self] in self.finishShutdownIfIdle() }
        do {
            worker = try LoopWorker(loop: self.loop)
        } catch {
            throw ServerError("cannot set up the event loop: \(error)")
        }
        hub.offLoopWorker = worker
    }

    deinit {
        connectionContext.connectionEnded = {}
        for connection in connectionContext.connections { hub.end(connection.session, reason: "server released") }
        hub.storeFailed = { _ in }
        hub.presenceTimerNeeded = { _ in }
        listener?.close()
        tlsListener?.close()
        freeLoopEvents()
    }

    private var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    // MARK: Lifecycle

    /// Binds and listens (the plain listener unless it is off, and the TLS one when
    /// configured), installs SIGTERM/SIGINT handling (when `handleSignals`), logs
    /// `listening on HOST:PORT` (and `TLS listening on HOST:PORT`) and tells systemd READY=1.
    /// - Returns: the plain listener's bound address (with the real port when port 0 was asked
    ///   for), or the TLS listener's when the plain one is off.
    /// - Throws: also when the certificate or key cannot be loaded or do not match.
    @discardableResult
    package func start(handleSignals: Bool = true) throws(ServerError) -> SocketAddress {
        let address: SocketAddress
        var tlsAddress: SocketAddress?
        do {
            address = try SocketAddress(host: configuration.host, port: configuration.port)
            if let tls = configuration.tls { tlsAddress = try SocketAddress(host: tls.host, port: tls.port) }
        } catch {
            throw ServerError(error.description)
        }
        if let settings = configuration.tls {
            do {
                tlsContext = try TLSContext(settings: settings)
            } catch {
                throw ServerError("cannot start the TLS listener: \(error)")
            }
            connectionContext.tlsRequestsKernelTLS = tlsContext!.requestsKernelTLS
            // OpenSSL writes to the socket with write(2), not send(MSG_NOSIGNAL): a peer that
            // went away must be an EPIPE, not a SIGPIPE that kills the daemon.
            Syscall.ignore([SIGPIPE])
        }
        let descriptors = Syscall.raiseOpenFileLimit(to: configuration.maxConnections + 64)
        if descriptors < configuration.maxConnections + 64 {
            logger.warning(
                "the open-file limit is below --max-connections; accepts may fail with EMFILE",
                metadata: ["nofile": "\(descriptors)", "max_connections": "\(configuration.maxConnections)"])
        }
        var binding = address
        do {
            if configuration.plainListener {
                listener = try Listener(address: address, backlog: configuration.listenBacklog, server: self)
            }
            if let tlsAddress {
                binding = tlsAddress  // the address an error names from here on
                tlsListener = try Listener(address: tlsAddress, backlog: configuration.listenBacklog, server: self, isTLS: true)
            }
            try flush.start(loop: loop)
            statsTimer = try loop.makeTimer(context: context, Server.onStatsTick)
            try statsTimer!.add(timeout: .seconds(1))
            presenceTimer = try loop.makeTimer(context: context, Server.onPresenceTimer)
            hub.presenceTimerNeeded = { [unowned self] delay in try? self.presenceTimer?.add(timeout: delay) }
            flush.resumePresence = { [unowned self] in try? self.presenceTimer?.add(timeout: .zero) }
            windowCountsTimer = try loop.makeTimer(context: context, Server.onWindowCountsTimer)
            hub.windowCountsTimerNeeded = { [unowned self] delay in try? self.windowCountsTimer?.add(timeout: delay) }
            if handleSignals {
                Syscall.unblock([SIGTERM, SIGINT, SIGHUP])
                for signal in [SIGTERM, SIGINT] {
                    let event = try loop.makeSignal(signal, context: context, Server.onSignal)
                    signalEvents.append(event)
                    try event.add()
                }
                let reload = try loop.makeSignal(SIGHUP, context: context, Server.onReloadSignal)
                signalEvents.append(reload)
                try reload.add()
            }
            try listener?.start(loop: loop)
            try tlsListener?.start(loop: loop)
        } catch let error as SystemError {
            throw ServerError("cannot listen on \(binding): \(error)")
        } catch {
            throw ServerError("cannot set up the event loop: \(error)")
        }
        hub.stats.tick(now: .now)
        let metadata: Logger.Metadata = [
            "libevent": "\(EventLoop.libeventVersion)", "backend": "\(loop.backend)",
            "max_connections": "\(configuration.maxConnections)", "io_threads": "\(configuration.ioThreads)",
        ]
        // The plain listener's line first: tools that wait for the first `listening on` get
        // the plain port when there is one.
        if let listener { logger.info("listening on \(listener.address)", metadata: metadata) }
        if let tlsListener, let tlsContext {
            self.tlsAddress = tlsListener.address
            logTLSListening(tlsListener.address, tlsContext, metadata: listener == nil ? metadata : [:])
        }
        let bound = listener?.address ?? tlsListener!.address
        do {
            try notifier.notify("READY=1\nSTATUS=listening on \(bound)\nMAINPID=\(getpid())")
        } catch {
            logger.warning("sd_notify READY=1 failed", metadata: ["error": "\(error)"])
        }
        return bound
    }

    /// Ignores SIGHUP until `start()` installs its handler: its default action would kill a
    /// daemon still recovering, and a reload before serving has nothing to reload.
    package static func ignoreReloadUntilStarted() {
        Syscall.ignore([SIGHUP])
    }

    /// Ignores SIGTERM, SIGINT and SIGHUP once `run()` has returned and the loop's handlers are
    /// gone, so that a second Ctrl-C does not cut the shutdown checkpoint short (that would be
    /// safe, but the next start would replay more).
    package static func ignoreSignalsAfterRun() {
        Syscall.ignore([SIGTERM, SIGINT, SIGHUP])
    }

    /// Runs the loop until shutdown has finished (after SIGTERM/SIGINT or `shutdown()`).
    /// - Throws: when the loop or the store failed; the daemon should then exit non-zero.
    package func run() throws(ServerError) {
        do {
            try loop.run()
        } catch {
            throw ServerError("the event loop failed: \(error)")
        }
        freeLoopEvents()
        if let failure { throw failure }
    }

    /// Stops accepting, sends every client ERROR shutting_down after its pending output, and
    /// ends `run()` once every connection is closed or `shutdownTimeout` has passed.
    package func shutdown() {
        guard !isShuttingDown else { return }
        isShuttingDown = true
        closedAtDeadlineBeforeShutdown = connectionContext.closedAtDeadline
        logger.info("shutting down", metadata: ["connections": "\(hub.sessions.count)"])
        do {
            try notifier.notify("STOPPING=1\nSTATUS=shutting down")
        } catch {
            logger.warning("sd_notify STOPPING=1 failed", metadata: ["error": "\(error)"])
        }
        listener?.close()
        listener = nil
        tlsListener?.close()
        tlsListener = nil
        for connection in connectionContext.connections {
            hub.close(connection.session, error: .shuttingDown, "the server is shutting down")
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
        if isShuttingDown && hub.sessions.isEmpty { finishShutdown() }
    }

    private func finishShutdown() {
        guard !isFinishingShutdown else { return }
        isFinishingShutdown = true
        let cut = hub.sessions.count + connectionContext.closedAtDeadline - closedAtDeadlineBeforeShutdown
        if cut > 0 {
            logger.warning("shutdown timeout: closing connections with output undelivered", metadata: ["connections": "\(cut)"])
        }
        for connection in connectionContext.connections { hub.end(connection.session, reason: "shutdown deadline passed") }
        // The lines held back by the log's rate limit are counted before the last line.
        hub.endLogIntervals(now: hub.monotonicNow() + hub.logRateLimit.interval)
        logger.info("stopped", metadata: ["uptime_seconds": "\((ContinuousClock.now - hub.startTime).components.seconds)"])
        loop.stop()
    }

    /// The store failed: nothing of this pass may reach a client. Stop at once.
    private func fail(_ error: ServerError) {
        logger.critical("\(error.message)")
        failure = error
        for connection in connectionContext.connections { hub.end(connection.session, reason: "fatal error") }
        loop.stop()
    }

    private func freeLoopEvents() {
        hub.offLoopWorker = nil
        worker?.close()
        worker = nil
        flush.free()
        statsTimer?.free()
        shutdownTimer?.free()
        presenceTimer?.free()
        windowCountsTimer?.free()
        windowCountsTimer = nil
        hub.windowCountsTimerNeeded = { _ in }
        hub.presenceTimerNeeded = { _ in }
        flush.resumePresence = {}
        for event in signalEvents { event.free() }
        presenceTimer = nil
        statsTimer = nil
        shutdownTimer = nil
        signalEvents = []
    }

    private static let onSignal: EventCallback = { signal, _, context in
        let server = Unmanaged<Server>.fromOpaque(context!).takeUnretainedValue()
        server.logger.info("received \(signal == SIGTERM ? "SIGTERM" : signal == SIGINT ? "SIGINT" : "signal \(signal)")")
        server.shutdown()
    }

    /// SIGHUP: reloads the key file off the loop (`AuthKeyStore.reload` reads and checks the
    /// whole file in a task, then swaps the keys in at once). Connections are untouched: the
    /// new keys apply to later HELLOs and AUTHs. A bad file keeps the keys in use.
    private static let onReloadSignal: EventCallback = { _, _, context in
        let server = Unmanaged<Server>.fromOpaque(context!).takeUnretainedValue()
        if server.tlsContext != nil { server.reloadTLS() }
        guard let keys = server.configuration.authKeys else {
            if server.tlsContext == nil { server.logger.notice("received SIGHUP: nothing to reload (--auth off, no TLS)") }
            return
        }
        server.logger.info("received SIGHUP: reloading the auth key file", metadata: ["file": "\(keys.path)"])
        let logger = server.logger
        Task {
            do {
                guard let keyIDs = try await keys.reload() else {
                    logger.info("auth key reload superseded by a later SIGHUP", metadata: ["file": "\(keys.path)"])
                    return
                }
                logger.notice("auth keys reloaded", metadata: ["file": "\(keys.path)", "kids": "\(keyIDs.joined(separator: ","))"])
            } catch {
                logger.error("auth key reload refused, the keys in use are kept", metadata: ["error": "\(error)"])
            }
        }
    }

    private static let onShutdownDeadline: EventCallback = { _, _, context in
        let server = Unmanaged<Server>.fromOpaque(context!).takeUnretainedValue()
        server.finishShutdown()
    }

    private static let onPresenceTimer: EventCallback = { _, _, context in
        let server = Unmanaged<Server>.fromOpaque(context!).takeUnretainedValue()
        switch server.hub.flushPresence(now: server.hub.monotonicNow()) {
        case .zero?: server.flush.resumePresenceNextPass()
        case let next?: try? server.presenceTimer?.add(timeout: next)
        case nil: break
        }
    }

    private static let onWindowCountsTimer: EventCallback = { _, _, context in
        Unmanaged<Server>.fromOpaque(context!).takeUnretainedValue().hub.flushWindowCounts()
    }

    private static let onStatsTick: EventCallback = { _, _, context in
        let server = Unmanaged<Server>.fromOpaque(context!).takeUnretainedValue()
        let started = ContinuousClock.now
        server.hub.stats.tick(now: started)
        if server.configuration.authKeys != nil { server.hub.expireSessions(now: server.hub.wallClock()) }
        // The hub's instants are stamped on its clock: compared with its `now`, not `started`.
        let now = server.hub.monotonicNow()
        server.hub.maintainRooms(now: now)
        server.hub.endLogIntervals(now: now)
        server.hub.recordPassTime(.now - started)
        try? server.statsTimer?.add(timeout: .seconds(1))
    }
}

/// The daemon's worker is where the hub's off-loop work runs.
extension LoopWorker: OffLoopWorker {}
