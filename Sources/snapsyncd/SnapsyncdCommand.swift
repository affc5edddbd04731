import ArgumentParser
import Logging
import SnapSyncAuth
import SnapSyncLoop
import SnapSyncModel
import SnapSyncHub
import SnapSyncServer
import SnapSyncStore
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

/// `snapsyncd [options]`: every limit has a flag and a documented default (ServerConfiguration).
struct SnapsyncdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapsyncd",
        abstract: "The SnapSync daemon: one authoritative snapshot per room, every change streamed as a diff.",
        discussion: """
            Listens for SnapSync clients (Protocol/PROTOCOL.md) and logs to stderr, one line per \
            event (journald priorities when JOURNAL_STREAM is set). Sizes take K, M, G suffixes \
            (binary: 64KiB, 16MiB); durations take ms, s, m, h (500ms, 10s). SIGTERM or SIGINT \
            shut down cleanly: stop accepting, flush, close every connection, checkpoint the rooms \
            written since their checkpoint when the log to replay is long, exit 0. Under systemd \
            (NOTIFY_SOCKET) it sends EXTEND_TIMEOUT_USEC every 5 s of a long recovery (in cluster \
            mode, while it waits for NATS servers that cannot serve yet), READY=1 once recovered (or \
            connected to NATS) and listening, and STOPPING=1 at shutdown. With --auth-keys every client \
            needs a signed token (docs/auth.md; snapsyncd keygen and snapsyncd token make keys and \
            tokens), and SIGHUP reloads the key file without dropping connections. With \
            --tls-listen it also serves TLS (docs/tls.md); SIGHUP reloads the certificate and key \
            for new connections.
            """,
        // Serving stays the command itself (its flags, its --help); these are the key tools of docs/auth.md.
        subcommands: [TokenCommand.self, KeygenCommand.self, RepairCommand.self]
    )

    private static let defaults = ServerConfiguration()
    private static func size(_ value: Int) -> String { ConfigurationValue.describe(byteCount: value) }
    private static func time(_ value: Duration) -> String { ConfigurationValue.describe(duration: value) }

    @Option(help: "Address to listen on: IPv4, IPv6 (::1) or a host name.")
    var host: String = defaults.host

    @Option(help: "TCP port of the plain (unencrypted) listener; 0 picks a free one (the log says which); off serves TLS only (needs --tls-listen).")
    var port: String = "\(defaults.port)"

    @Option(
        help: ArgumentHelp(
            "Also serve TLS on this address, e.g. 0.0.0.0:7443 (port 0 picks a free one); needs --tls-cert and --tls-key. (default: off)",
            valueName: "host:port"))
    var tlsListen: String?

    @Option(help: ArgumentHelp("PEM certificate chain of the TLS listener (server certificate first); re-read on SIGHUP.", valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("PEM private key of --tls-cert; re-read on SIGHUP.", valueName: "file"))
    var tlsKey: String?

    @Option(
        help: ArgumentHelp(
            "PEM CA certificates for mutual TLS: every TLS client must present a certificate signed by one of them. (default: no client certificate asked)",
            valueName: "file"))
    var tlsClientCa: String?

    @Option(
        help: ArgumentHelp(
            "With --tls-client-ca and --auth required: what a client authenticated by its certificate alone (HELLO without a token) may do, MATCH=RIGHT[,RIGHT...] as in a token (e.g. 'board:*=read'); repeat for more. Its certificate's subject stands for sub. (default: a certificate alone authenticates no one)",
            valueName: "grant"))
    var tlsClientGrant: [String] = []

    @Option(help: ArgumentHelp("Lowest TLS version accepted: 1.2 or 1.3.", valueName: "1.2|1.3"))
    var tlsMinVersion: String = TLSSettings.MinimumVersion.tls12.rawValue

    @Option(
        help: ArgumentHelp(
            "OpenSSL cipher list for TLS 1.2 (TLS 1.3 keeps OpenSSL's default suites). (default: OpenSSL's default)",
            valueName: "list"))
    var tlsCiphers: String?

    @OptionGroup(title: "Cluster mode (docs/cluster.md)")
    var clusterOptions: ClusterOptions

    @Option(help: ArgumentHelp("Directory for durable state, created if missing. (default: $STATE_DIRECTORY if set, else ./data)", valueName: "path"))
    var dataDir: String?

    @Option(
        help: ArgumentHelp(
            "When the write-ahead log is fsynced: always (an ACK means on disk; one fsync per loop pass), everysec (a machine crash may lose the last second of acknowledged writes, up to 3 s on a slow disk), no (left to the kernel). A crash of the daemon alone loses nothing in any mode.",
            valueName: "always|everysec|no"))
    var fsync: String = FsyncPolicy.always.rawValue

    @Option(
        help: "Longest time between checkpoints of a room that was written (also: whenever the log reaches --log-segment-bytes). (default: 5m)",
        transform: ConfigurationValue.duration)
    var checkpointInterval: Duration = .seconds(300)

    @Option(
        help: "Size at which the write-ahead log moves to a new segment and older ones are checkpointed away. (default: 64MiB)",
        transform: ConfigurationValue.byteCount)
    var logSegmentBytes: Int = 64 << 20

    @Option(
        help: ArgumentHelp(
            "Refuse to start when the data directory's filesystem has less free space than this (0: never refuse; below one log segment a warning is logged either way). (default: 0)",
            valueName: "min-free-bytes"),
        transform: ConfigurationValue.byteCount)
    var minFreeBytes: Int = 0

    @Option(help: "Least severe level logged: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    @Option(
        help: "Largest frame body accepted and announced (max_frame_bytes). (default: \(size(defaults.wire.maxFrameBytes)))",
        transform: ConfigurationValue.byteCount)
    var maxFrameBytes: Int = defaults.wire.maxFrameBytes

    @Option(help: "Connections served at once; one more gets ERROR too_many_connections.")
    var maxConnections: Int = defaults.maxConnections

    @Option(
        help:
            "Threads that send a loop pass's output: the loop's own and N - 1 helpers, which share the sends of a pass with many connections to write (a big room's fan-out); requests are still handled on the loop's thread alone. 1 sends everything on the loop's thread. Default: $SNAPSYNCD_IO_THREADS when set (the test lanes run every daemon with 2), else the cores this process may run on, at most 16."
    )
    var ioThreads: Int = SnapsyncdCommand.defaultIOThreads

    @Option(
        help:
            "Connections an IO thread takes at a time; a pass with no more connections to write than this is sent by the loop's thread alone (waking a thread costs about as much as a few sends). Default: $SNAPSYNCD_IO_THREAD_BATCH when set, else 32."
    )
    var ioThreadBatch: Int = SnapsyncdCommand.environmentInteger("SNAPSYNCD_IO_THREAD_BATCH") ?? defaults.ioThreadBatch

    static var defaultIOThreads: Int { environmentInteger("SNAPSYNCD_IO_THREADS") ?? min(Server.availableCores(), 16) }

    /// An option's default from the environment, so that a test lane can run every daemon it
    /// starts (through any harness or script) with the same setting. Not an integer: unset.
    static func environmentInteger(_ name: String) -> Int? {
        getenv(name).flatMap { Int(String(cString: $0)) }
    }

    @Option(
        help:
            "Rooms held in memory; a request needing one more evicts the longest-idle memberless room when rooms sleep (--room-idle), else gets REJECT too_many_rooms."
    )
    var maxRooms: Int = defaults.maxRooms

    @Option(
        help:
            "Rooms the data directory may hold, awake or asleep; a request that would create one more (its first write, or a SET_TTL) gets REJECT quota_exceeded. Rooms that exist are never refused. (default: \(defaults.maxStoredRooms))"
    )
    var maxStoredRooms: Int = defaults.maxStoredRooms

    @Option(
        help: ArgumentHelp(
            "Once the data directory takes this much disk (measured every 5 s), no room is created (REJECT quota_exceeded); rooms that exist go on. 0: no limit of its own. Either way no room is created while the disk has less free than two log segments, kept for the rooms that exist. (default: 0)",
            valueName: "max-data-bytes"),
        transform: ConfigurationValue.byteCount)
    var maxDataBytes: Int = defaults.maxDataBytes

    @Option(
        help:
            "Rooms one principal (a token's sub, a client certificate's subject, else the client's name) may create per minute, in a burst or spread out; beyond, REJECT quota_exceeded. 0: no limit. (default: \(defaults.roomCreationsPerMinute))"
    )
    var roomCreationsPerMinute: Int = defaults.roomCreationsPerMinute

    @Option(
        help: ArgumentHelp(
            "A room with no members and no writes for this long is evicted from memory and sleeps in its checkpoint until a JOIN or write names it; off (or 0): rooms never sleep. (default: \(defaults.roomIdle.map(time) ?? "off"))",
            valueName: "duration|off"))
    var roomIdle: String?

    @Option(help: "Rooms one connection may have joined at once.")
    var maxRoomsPerConnection: Int = defaults.wire.maxRoomsPerConnection

    @Option(
        help: ArgumentHelp(
            "Largest presence state a member may set (SET_PRESENCE, protocol version 4), announced in WELCOME; beyond, REJECT payload_too_large. (default: 1KiB)",
            valueName: "max-presence-bytes"),
        transform: ConfigurationValue.byteCount)
    var maxPresenceBytes: Int = defaults.wire.maxPresenceBytes

    @Option(
        help:
            "Members of a room's presence a watcher is shown and kept up to date on (the view; the rest are counted and listed a page of this many at a time). (default: \(defaults.wire.presenceView))"
    )
    var presenceView: Int = defaults.wire.presenceView

    @Option(
        help:
            "Rows a windowed member may follow (WINDOW, protocol version 4), all its sections together, announced in WELCOME; beyond, REJECT window_too_large. (default: \(defaults.wire.maxWindowRows))"
    )
    var maxWindowRows: Int = defaults.wire.maxWindowRows

    @Option(
        help: ArgumentHelp(
            "How long a windowed member's section counts may lag while its window does not change: count-only WINDOW_DIFFs are coalesced to one per this interval; 0 sends one per change. (default: \(time(defaults.windowCountsInterval)))",
            valueName: "duration"),
        transform: ConfigurationValue.duration)
    var windowCountsInterval: Duration = defaults.windowCountsInterval

    @Option(
        help:
            "Shortest time between two presence updates (PRESENCE_DIFF) of a room; a room with n watchers waits this × ⌈n / 1000⌉, at most 1s. Changes in between are coalesced. (default: \(time(defaults.presenceInterval)))",
        transform: ConfigurationValue.duration)
    var presenceInterval: Duration = defaults.presenceInterval

    @Option(
        help:
            "SET_PRESENCE requests one connection may make per second, sustained, in bursts of as many; beyond, REJECT busy. (default: \(defaults.presenceUpdatesPerSecond))"
    )
    var presenceUpdatesPerSecond: Int = defaults.presenceUpdatesPerSecond

    @Option(help: "Items one room may hold.")
    var maxItemsPerRoom: Int = defaults.wire.model.maxItems

    @Option(help: "Sections one room may hold.")
    var maxSectionsPerRoom: Int = defaults.wire.model.maxSections

    @Option(
        help: "Largest section or item payload. (default: \(size(defaults.wire.model.maxPayloadBytes)))",
        transform: ConfigurationValue.byteCount)
    var maxPayloadBytes: Int = defaults.wire.model.maxPayloadBytes

    @Option(help: "Longest section or item identifier, in bytes. (default: \(defaults.wire.model.maxIdentifierBytes))", transform: ConfigurationValue.byteCount)
    var maxIdentifierBytes: Int = defaults.wire.model.maxIdentifierBytes

    @Option(help: "Levels of an outline (items with children; protocol version 2): roots are level 0, so the deepest item is at level N - 1.")
    var maxOutlineDepth: Int = defaults.wire.model.maxOutlineDepth

    @Option(
        help: ArgumentHelp("Largest encoded room snapshot. (default: --max-frame-bytes minus 64KiB)", valueName: "max-snapshot-bytes"),
        transform: ConfigurationValue.byteCount)
    var maxSnapshotBytes: Int?

    @Option(
        help: "Unsent output allowed per connection before it is cut off as a slow consumer. (default: \(size(defaults.maxOutputBytes)))",
        transform: ConfigurationValue.byteCount)
    var maxOutputBytes: Int = defaults.maxOutputBytes

    @Option(
        help:
            "Bytes held for unfinished frames, all connections together (their buffers take at most an eighth more, or 4KiB per connection); past it the connections with the largest ones get ERROR input_budget_exceeded. At least --max-frame-bytes plus 128KiB. (default: \(size(defaults.maxInputBytes)))",
        transform: ConfigurationValue.byteCount)
    var maxInputBytes: Int = defaults.maxInputBytes

    @Option(
        help:
            "Memory of unsent output, all connections together (a DIFF or SNAPSHOT body queued to many counted once); past it the connections with the largest queues get ERROR slow_consumer. At least --max-output-bytes and --max-frame-bytes plus 128KiB. (default: \(size(defaults.maxOutputTotalBytes)))",
        transform: ConfigurationValue.byteCount)
    var maxOutputTotalBytes: Int = defaults.maxOutputTotalBytes

    @Option(
        help:
            "Bytes of all rooms together (snapshot encodings, DIFF history, 128 B per remembered DIFF and write id, the undos kept to fold resumes); a write that could pass it gets REJECT server_full. At least twice --max-snapshot-bytes (once without --fold-resumes) plus --history-bytes. (default: \(size(defaults.maxRoomTotalBytes)))",
        transform: ConfigurationValue.byteCount)
    var maxRoomTotalBytes: Int = defaults.maxRoomTotalBytes

    @Option(
        help:
            "Versions each room keeps for resume and write-id deduplication (with --history-bytes, the resume window): a JOIN resuming within it gets the DIFFs it missed, or one folded DIFF."
    )
    var historyCount: Int = defaults.wire.historyCount

    @Option(
        help: "Bytes of DIFFs each room keeps for resume (the resume window's size). (default: \(size(defaults.historyBytes)))",
        transform: ConfigurationValue.byteCount)
    var historyBytes: Int = defaults.historyBytes

    @Flag(
        inversion: .prefixedNo,
        help:
            "Answer a protocol version 3 resume with one DIFF from the client's version to the room's when that is smaller than the DIFFs it missed. Each written room keeps the undo of each write in its resume window for this: about the window's DIFFs again, at most the room's own size, or one earlier state of a small busy room (counted in --max-room-total-bytes)."
    )
    var foldResumes = defaults.foldResumes

    @Option(
        help: ArgumentHelp(
            "Time-to-live of rooms that set none with SET_TTL: a room with no member and no write for this long expires (deleted for good, like DROP). never or 0: rooms do not expire. (default: never)",
            valueName: "duration"),
        transform: ConfigurationValue.durationOrNever)
    var roomTtl: Duration? = nil

    @Option(
        help: "Time a new connection has to send HELLO. (default: \(time(defaults.handshakeTimeout)))",
        transform: ConfigurationValue.duration)
    var handshakeTimeout: Duration = defaults.handshakeTimeout

    @Option(
        help:
            "Time without a whole frame before a PING; as long again without one closes (so also the longest a frame may take to arrive, twice this). (default: \(time(defaults.idleTimeout)))",
        transform: ConfigurationValue.duration)
    var idleTimeout: Duration = defaults.idleTimeout

    @Option(
        help: "Longest wait for queued output at shutdown and when closing a connection. (default: \(time(defaults.shutdownTimeout)))",
        transform: ConfigurationValue.duration)
    var shutdownTimeout: Duration = defaults.shutdownTimeout

    @Option(help: "listen(2) backlog.")
    var backlog: Int = defaults.listenBacklog

    @Option(
        help: ArgumentHelp(
            "Key file (JWKS, docs/auth.md) that clients' tokens are verified with; SIGHUP reloads it. Implies --auth required.",
            valueName: "file"))
    var authKeys: String?

    @Option(
        help: ArgumentHelp(
            "required: every HELLO needs a valid token and every request a grant for its room; off: no token is looked at, allowed only on a loopback --host unless --insecure-no-auth. (default: required with --auth-keys, else off)",
            valueName: "required|off"))
    var auth: String?

    @Option(
        help: ArgumentHelp(
            "Clock skew allowed for a token's exp, nbf and iat; a session ends this long after its token's exp. (default: 30s)",
            valueName: "duration"),
        transform: ConfigurationValue.duration)
    var authLeeway: Duration = TokenVerifier.defaultLeeway

    @Option(help: ArgumentHelp("When set, tokens must name it in their aud; when not, tokens with an aud are refused.", valueName: "aud"))
    var authAudience: String?

    @Flag(help: "Serve without authentication on a non-loopback --host: anyone who can reach the port reads and writes every room.")
    var insecureNoAuth = false

    @Option(
        help: ArgumentHelp(
            "Serve Prometheus /metrics and /healthz over HTTP on this address, e.g. 127.0.0.1:9400 (no authentication: keep it on loopback or a private network; any other address is logged as a warning). (default: off)",
            valueName: "host:port"))
    var metricsListen: String?

    /// The authentication flags, unchecked.
    var authSettings: AuthSettings {
        AuthSettings(keyFile: authKeys, mode: auth.flatMap(AuthMode.init(rawValue:)), audience: authAudience, insecureNoAuth: insecureNoAuth)
    }

    /// The flags as a checked configuration.
    func serverConfiguration() throws(ConfigurationError) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        configuration.host = host
        if port == "off" {
            configuration.plainListener = false
        } else {
            guard let number = Int(port) else { throw ConfigurationError(message: "--port must be a number in 0...65535 or off, not \(port)") }
            configuration.port = number
        }
        configuration.tls = try tlsSettings()
        configuration.dataDirectory = dataDir ?? DataDirectory.defaultPath()
        configuration.wire.maxFrameBytes = maxFrameBytes
        configuration.wire.maxRoomsPerConnection = maxRoomsPerConnection
        configuration.wire.model.maxItems = maxItemsPerRoom
        configuration.wire.model.maxSections = maxSectionsPerRoom
        configuration.wire.model.maxOutlineDepth = maxOutlineDepth
        configuration.wire.model.maxPayloadBytes = maxPayloadBytes
        configuration.wire.model.maxIdentifierBytes = maxIdentifierBytes
        configuration.wire.model.maxSnapshotBytes = maxSnapshotBytes ?? ServerConfiguration.snapshotBytes(forFrameBytes: maxFrameBytes)
        configuration.wire.historyCount = historyCount
        configuration.wire.maxPresenceBytes = maxPresenceBytes
        configuration.wire.presenceView = presenceView
        configuration.wire.maxWindowRows = maxWindowRows
        configuration.windowCountsInterval = windowCountsInterval
        configuration.presenceInterval = presenceInterval
        configuration.presenceUpdatesPerSecond = presenceUpdatesPerSecond
        configuration.maxConnections = maxConnections
        configuration.ioThreads = ioThreads
        configuration.ioThreadBatch = ioThreadBatch
        configuration.maxRooms = maxRooms
        configuration.maxStoredRooms = maxStoredRooms
        configuration.maxDataBytes = maxDataBytes
        configuration.newRoomFreeBytes = 2 * logSegmentBytes
        configuration.roomCreationsPerMinute = roomCreationsPerMinute
        configuration.maxOutputBytes = maxOutputBytes
        configuration.maxInputBytes = maxInputBytes
        configuration.maxOutputTotalBytes = maxOutputTotalBytes
        configuration.maxRoomTotalBytes = maxRoomTotalBytes
        configuration.historyBytes = historyBytes
        configuration.foldResumes = foldResumes
        configuration.roomTTL = roomTtl
        if let roomIdle {
            let idle = roomIdle == "off" ? .zero : try ConfigurationValue.duration(roomIdle)
            configuration.roomIdle = idle == .zero ? nil : idle
        }
        configuration.handshakeTimeout = handshakeTimeout
        configuration.idleTimeout = idleTimeout
        configuration.shutdownTimeout = shutdownTimeout
        configuration.listenBacklog = backlog
        try configuration.validate()
        return configuration
    }

    /// The TLS listener's flags, checked; nil without --tls-listen.
    func tlsSettings() throws(ConfigurationError) -> TLSSettings? {
        guard let tlsListen else {
            if tlsCert != nil || tlsKey != nil || tlsClientCa != nil || tlsCiphers != nil || !tlsClientGrant.isEmpty {
                throw ConfigurationError(message: "--tls-cert, --tls-key, --tls-client-ca, --tls-client-grant and --tls-ciphers need --tls-listen")
            }
            return nil
        }
        let (tlsHost, tlsPort) = try MetricsEndpoint.parse(tlsListen, flag: "--tls-listen")
        guard let tlsCert, let tlsKey else { throw ConfigurationError(message: "--tls-listen needs --tls-cert and --tls-key") }
        guard let minimum = TLSSettings.MinimumVersion(rawValue: tlsMinVersion) else {
            throw ConfigurationError(message: "--tls-min-version must be 1.2 or 1.3, not \(tlsMinVersion)")
        }
        var settings = TLSSettings(host: tlsHost, port: tlsPort, certificatePath: tlsCert, keyPath: tlsKey)
        settings.clientCAPath = tlsClientCa
        if !tlsClientGrant.isEmpty {
            guard tlsClientCa != nil else {
                throw ConfigurationError(message: "--tls-client-grant needs --tls-client-ca: only a certificate the handshake verified can stand for sub")
            }
            guard authSettings.effectiveMode == .required else {
                throw ConfigurationError(
                    message: "--tls-client-grant needs --auth required (--auth-keys FILE): without authentication no grant is checked, so it would mean nothing"
                )
            }
            var grants: [RoomGrant] = []
            for spec in tlsClientGrant {
                do {
                    grants.append(try RoomGrant(spec: spec))
                } catch {
                    throw ConfigurationError(message: "--tls-client-grant \(spec): \(error)")
                }
            }
            settings.clientCertificateGrants = grants
        }
        settings.minimumVersion = minimum
        settings.ciphers = tlsCiphers
        return settings
    }

    /// The store's options: the data directory, the fsync policy and checkpointing.
    func storeOptions(_ configuration: ServerConfiguration) -> StoreOptions {
        StoreOptions(
            directory: configuration.dataDirectory, fsync: FsyncPolicy(rawValue: fsync) ?? .always,
            segmentBytes: logSegmentBytes, maxDiffFrameBytes: configuration.wire.maxFrameBytes + 4,
            checkpointInterval: checkpointInterval, historyLimit: configuration.wire.historyCount,
            sleepingRooms: configuration.roomIdle != nil, keepsResumeBases: configuration.foldResumes)
    }

    func validate() throws {
        guard FsyncPolicy(rawValue: fsync) != nil else {
            throw ValidationError("--fsync must be one of always, everysec, no")
        }
        guard minFreeBytes >= 0 else { throw ValidationError("--min-free-bytes must not be negative") }
        guard logSegmentBytes >= 4096 else { throw ValidationError("--log-segment-bytes must be at least 4KiB") }
        guard checkpointInterval > .zero else { throw ValidationError("--checkpoint-interval must be positive") }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        if let auth, AuthMode(rawValue: auth) == nil { throw ValidationError("--auth must be required or off, not \(auth)") }
        if let metricsListen {
            do {
                _ = try MetricsEndpoint.parse(metricsListen)
            } catch {
                throw ValidationError(error.message)
            }
        }
        do {
            _ = try authSettings.check(listeningOn: host)
            // The TLS listener's host is held to the same rule: TLS hides the traffic, not the rooms.
            if let tlsListen { _ = try authSettings.check(listeningOn: try MetricsEndpoint.parse(tlsListen, flag: "--tls-listen").host) }
        } catch {
            throw ValidationError(error.message)
        }
        do {
            _ = try serverConfiguration()
            try clusterOptions.check(dataDir: dataDir, roomTTL: roomTtl != nil, roomIdle: roomIdle)
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// Opens the data directory (telling systemd it is still working during a long recovery)
    /// and hands the rooms to a new server. The recovered rooms are dropped on return, so the
    /// server's rooms own their snapshots alone and the first write to each does not copy it.
    ///
    /// With `metrics`, its requests are answered at each progress report (503 on /healthz), and
    /// the test hook `SNAPSYNCD_TEST_HOLD_RECOVERY=FILE` holds the start here, after the log is
    /// read and before the rooms are handed over, serving the endpoint until FILE exists (the
    /// integration tests' way to see /healthz during a recovery without timing it).
    private func recover(
        _ configuration: ServerConfiguration, logger: Logger, loop: EventLoop, metrics: MetricsEndpoint?
    ) throws -> (DurableStore, Server) {
        let startup = StartupNotifier(logger: logger)
        let (store, recovered) = try DurableStore.open(
            options: storeOptions(configuration), logger: logger,
            progress: { progress in
                startup.recovery(progress)
                metrics?.serveWhileStarting()
            })
        if let metrics, let raw = getenv("SNAPSYNCD_TEST_HOLD_RECOVERY") {
            let gate = String(cString: raw)
            logger.notice("holding recovery until \(gate) exists (SNAPSYNCD_TEST_HOLD_RECOVERY)")
            while access(gate, F_OK) != 0 {
                metrics.serveWhileStarting()
                usleep(5_000)
            }
        }
        let server = try Server(configuration: configuration, logger: logger, store: store, loop: loop)
        // A server made with a store runs the local engine, the one that restores rooms.
        try server.hub.localEngine!.restore(recovered)
        return (store, server)
    }

    /// The key file, loaded and checked, when the daemon authenticates; nil with `--auth off`
    /// (after the warnings that mode calls for).
    private func loadAuthKeys(logger: Logger) throws -> AuthKeyStore? {
        let settings = authSettings
        guard settings.effectiveMode == .required, let path = settings.keyFile else {
            if settings.keyFile != nil {
                logger.warning("--auth off: the key file is not loaded and no token is checked", metadata: ["file": "\(authKeys ?? "")"])
            }
            if settings.insecureNoAuth {
                logger.warning(
                    "authentication is off (--insecure-no-auth): anyone who can reach \(host) port \(port) reads and writes every room")
            }
            return nil
        }
        let (audience, leeway) = (authAudience, authLeeway)
        do {
            // Loading is async (jwt-kit binds each key through an actor); start-up waits for it.
            let keys = try waitForTask { try await AuthKeyStore(path: path, audience: audience, leeway: leeway) }
            logger.info(
                "authentication required",
                metadata: [
                    "file": "\(path)", "kids": "\(keys.current.keys.keyIDs.joined(separator: ","))",
                    "audience": "\(audience ?? "none")", "leeway": "\(ConfigurationValue.describe(duration: leeway))",
                ])
            return keys
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode.failure
        }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { _ in JournalLogHandler(level: level) }
        let logger = Logger(label: "snapsyncd")
        var configuration = try serverConfiguration()
        configuration.authKeys = try loadAuthKeys(logger: logger)
        if clusterOptions.cluster != nil {
            try runCluster(configuration, logger: logger)
            return
        }
        do {
            try DataDirectory.prepare(configuration.dataDirectory)
            try DataDirectory.checkFreeSpace(
                configuration.dataDirectory, minimum: minFreeBytes,
                warnBelow: logSegmentBytes, logger: logger)
            Server.ignoreReloadUntilStarted()
            let loop = try EventLoop()
            let metrics = try metricsListen.map { listen throws(ServerError) in
                try MetricsEndpoint(
                    listen: listen, loop: loop, logger: logger,
                    build: [("fsync", fsync), ("auth", configuration.authKeys == nil ? "off" : "required")])
            }
            let (store, server) = try recover(configuration, logger: logger, loop: loop, metrics: metrics)
            metrics?.attach(server, store: store)
            // READY=1 goes out here, once recovered and listening; /healthz says 200 from here.
            try server.start()
            try server.run()
            metrics?.close()
            Server.ignoreSignalsAfterRun()
            try store.close(checkpointing: server.hub.localEngine!.roomImages(store.roomsDueAtClose()))
        } catch {
            logger.critical("\(error)")
            switch error as? StoreError {
            case .corrupt?, .inconsistent?: throw ExitCode(RepairCommand.damagedExitStatus)
            default: throw ExitCode.failure
            }
        }
    }
}
