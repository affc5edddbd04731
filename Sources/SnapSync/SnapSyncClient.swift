import NIOConcurrencyHelpers
import SnapSyncWire

/// A connection to a SnapSync daemon, serving any number of rooms.
///
/// ```swift
/// let client = SnapSyncClient(configuration: .init(host: "127.0.0.1", port: 7400))
/// try await client.connect()
/// let inbox = try await client.join("inbox")
/// for await change in inbox.changes { apply(change.updates, change.snapshot) }
/// ```
///
/// - Joins return a `RoomReplica`, kept up to date from the room's DIFFs.
/// - Writes (`mutate`, `perform`, `replace`) return the room's new position once the server has
///   applied them, or throw the server's typed `REJECT`. When this client has joined the room,
///   the replica already holds the write when the call returns (the server sends the writer's
///   DIFF before its ACK).
/// - When a connection that was up drops, the client reconnects by itself (`ReconnectPolicy`),
///   resumes every room from its replica's position (a `.catchUp` change, or a `.resync` when the
///   server's history no longer reaches back), and resends the writes that were in flight with
///   their original write id: the server applies each write at most once.
/// - With several `Configuration.endpoints` (the nodes of a cluster), it connects to the first
///   that answers and fails over to the next when the connection drops; `endpoint` says which.
/// - With `Configuration.credentials`, each connection is authenticated with the provider's
///   token, refreshed in the live session before it expires; a refused token stops reconnecting
///   unless the provider returns another (`SnapSyncError.unauthorized`).
/// - `events` and `state` tell the app about the connection.
///
/// An actor: every call is safe from any task. The connection runs on SwiftNIO's event loops:
/// Network.framework (NIOTransportServices) on Apple platforms, NIOPosix sockets with NIOSSL on
/// Linux, optionally over TLS (`Configuration.tls`). Call `close()` when done.
public actor SnapSyncClient {
    public nonisolated let configuration: Configuration
    /// Connection and room events. Each access makes a new stream that gets every event from
    /// then on, so any number of consumers may listen, each with its own stream (make it before
    /// the calls whose events it should see, e.g. before `connect()`). A stream keeps the newest
    /// 1024 events its consumer has not read yet. Streams finish after `.closed`.
    public nonisolated var events: AsyncStream<ClientEvent> { eventSink.subscribe() }
    nonisolated let eventSink = Broadcast<Void, ClientEvent>((), bufferingPolicy: .bufferingNewest(1024))
    nonisolated let stateBox = NIOLockedValueBox(ConnectionState.disconnected)

    /// The connection's state, readable from any thread.
    public nonisolated var state: ConnectionState { stateBox.withLockedValue { $0 } }
    nonisolated let endpointBox = NIOLockedValueBox(Endpoint?.none)
    /// The endpoint (of `Configuration.endpoints`) of the connection, or of the attempt under
    /// way while connecting or reconnecting; after a disconnection, the last one tried; `nil`
    /// before the first attempt. Readable from any thread: it is set before the `.connected`
    /// event is emitted, so an app can log it with that event.
    public nonisolated var endpoint: Endpoint? { endpointBox.withLockedValue { $0 } }
    /// The server's limits, from the last WELCOME (the protocol's defaults before).
    public internal(set) var serverLimits = WireLimits.default
    /// The protocol version the last WELCOME chose (PROTOCOL.md §8.2): 4, or 3 from a server
    /// without presence, or 2 from one whose DIFFs carry no chain, or 1 from one without outlines.
    public internal(set) var protocolVersion = ProtocolVersion.current
    /// How many times a replica was found to have diverged from its room (a DIFF's chain was not
    /// the one the replica leads to, `ResyncReason.diverged`, or `verify(_:)` found another
    /// state) and joined again, since this client was made. Also counted, by reason, in the
    /// swift-metrics counter `snapsync_client_divergences_total` (`SnapSyncClient+Verify.swift`).
    public internal(set) var divergences = 0
    /// The session id and server name of the last WELCOME.
    public internal(set) var session: (id: UInt64, serverName: String)?

    // MARK: The connection (see SnapSyncClient+Link.swift)

    enum Link {
        case none
        /// `Configuration.credentials` is asked for the HELLO token; no socket yet.
        case preparing
        /// TCP connect and HELLO/WELCOME under way.
        case handshaking(ClientChannel)
        /// WELCOME received: requests flow.
        case ready(ClientChannel)

        var connection: ClientChannel? {
            switch self {
            case .none, .preparing: nil
            case .handshaking(let c), .ready(let c): c
            }
        }
    }
    var link = Link.none
    /// `Configuration.tls` as the transport uses it, made once per name verified (an
    /// endpoint's host, or the configured `serverName`) (SnapSyncClient+Link.swift).
    var tlsPreparations: [String: Result<PreparedTLS, SnapSyncError>] = [:]
    /// The endpoint of each attempt (EndpointRotation.swift); `connect()` starts it afresh. (It
    /// is never used with no endpoint: `connect()` refuses that first.)
    var rotation: EndpointRotation
    /// Bumped for each connection, so that events of an older one are ignored.
    var generation = 0
    /// A handshake has succeeded once: from then on a drop means reconnect, not fail.
    var hasConnected = false
    var reconnectAttempt = 0
    /// Testing: reconnection waits for `resumeReconnecting()`.
    var reconnectHeld = false
    /// Testing: the next write ACK is treated as lost with the connection.
    var loseNextWriteAck = false
    var reconnectTask: Task<Void, Never>?
    var handshakeTimer: Task<Void, Never>?
    var pingTask: Task<Void, Never>?
    /// Why the server said it would close (ERROR), reported when the socket closes.
    var serverClosingReason: SnapSyncError?
    var lastHeard = ContinuousClock.now
    var outstandingPing: (nonce: UInt64, sentAt: ContinuousClock.Instant)?
    var nextPingNonce: UInt64 = 0

    // MARK: Credentials (see SnapSyncClient+Credentials.swift)

    /// The token the current connection is authenticated with: sent in HELLO, or by the last
    /// acknowledged AUTH.
    var token: SessionToken?
    /// The token the server refused last (empty: none was sent), and its reason; an automatic
    /// reconnect with the same token stops instead.
    var refused: (token: [UInt8], reason: String)?
    var credentialsTask: Task<Void, Never>?
    var refreshTask: Task<Void, Never>?
    /// Refreshes of the current token that failed in a row.
    var refreshFailures = 0

    // MARK: Calls waiting for an answer

    struct Call {
        let continuation: CheckedContinuation<Result<Outcome, SnapSyncError>, Never>
        let timer: Task<Void, Never>
    }
    enum Outcome {
        case done
        case position(RoomPosition)
        case replica(RoomReplica)
        case verification(SnapSyncClient.Verification)
        case presencePage(PresencePage)
        case windowed(WindowedReplica)
    }
    var nextCallID: UInt64 = 0
    var calls: [UInt64: Call] = [:]
    /// `connect()` calls waiting for the handshake.
    var connectCalls: [UInt64] = []
    /// `join` calls, by room.
    var joinCallRooms: [UInt64: String] = [:]
    /// `joinWindow` calls, by room (SnapSyncClient+Windows.swift).
    var windowCallRooms: [UInt64: String] = [:]

    // MARK: Requests on the current connection, by request id

    enum Request {
        case join(room: String)
        /// `call` is nil for the client's own LEAVEs (after an abandoned join).
        case leave(room: String, call: UInt64?)
        /// A DROP (`drop(_:)`): like a LEAVE it ends this connection's membership.
        case drop(room: String, call: UInt64)
        case write(call: UInt64)
        /// A refresh: the token becomes the connection's when acknowledged.
        case auth(SessionToken)
        /// `verify(_:)`: answered by DIGEST.
        case verify(room: String, call: UInt64)
        /// PRESENCE_WATCH (SnapSyncClient+Presence.swift): answered by PRESENCE.
        case presenceWatch(room: String)
        /// PRESENCE_LIST: answered by PRESENCE.
        case presenceList(room: String, call: UInt64)
        /// SET_PRESENCE; `call` is nil for the state set again after a reconnect.
        case setPresence(room: String, call: UInt64?)
        /// WINDOW (SnapSyncClient+Windows.swift): answered by WINDOW_STATE (a join, a rejoin) or
        /// WINDOW_DIFF (a move); which calls it settles is in the room's `WindowEntry`.
        case window(room: String)
    }
    var nextRequestID: UInt64 = 0
    var requests: [UInt64: Request] = [:]

    // MARK: Rooms and writes (see SnapSyncClient+Rooms.swift)

    struct RoomEntry {
        let replica: RoomReplica
        var phase: Phase
        /// The replica holds a snapshot of the room (the first SNAPSHOT arrived).
        var loaded = false
        var joinCalls: [UInt64] = []
        /// Why the client is re-synchronising the replica; a SNAPSHOT that answers is reported
        /// as `.resync(reason)`.
        var resyncReason: ResyncReason?
        /// The replica's content is suspect (a DIFF did not apply, a digest did not match): the
        /// next JOIN is fresh, not a resume from its position.
        var distrusted = false
        var digestFailures = 0
        /// The room's chain at the replica's position (protocol version 3), which the next DIFF
        /// must lead from; nil on an older version.
        var chain: RoomChain?
        /// This connection's JOIN of the room was answered: the server counts it as a member,
        /// whose presence requests it serves.
        var member = false
        /// PRESENCE_WATCH was sent on this connection.
        var watchingPresence = false
        /// The presence state last set (SET_PRESENCE acknowledged), set again after a reconnect.
        var presenceState: [UInt8] = []
    }
    enum Phase {
        /// Not joined on the current connection (or no connection).
        case detached
        case joining(requestID: UInt64)
        /// CATCHUP received; its DIFFs are being applied to `working`.
        case catchingUp(CatchUp)
        case live
    }
    struct CatchUp {
        var epoch: UInt64
        var version: UInt64
        var toVersion: UInt64
        var working: RoomSnapshot
        var operations: [SnapshotOperation]
        /// The chain at `version`.
        var chain: RoomChain?
        /// A folded catch-up (PROTOCOL.md §11.12): one DIFF to `toVersion` follows, after which
        /// the state must have this digest.
        var foldedDigest: SnapshotDigest? = nil
    }
    var rooms: [String: RoomEntry] = [:]
    /// The rooms followed through a window (`joinWindow`), by room: never also in `rooms` (one
    /// membership per room and connection).
    var windows: [String: WindowEntry] = [:]

    struct PendingWrite {
        enum Body {
            case operations([SnapshotOperation])
            case snapshot(RoomSnapshot)
            /// REPLACE_SECTION: one section's items, hierarchy included.
            case section(SnapshotIdentifier, SectionSnapshot)
        }
        var room: String
        var expectedVersion: UInt64?
        /// Random, 16 bytes, kept across resends: the server applies a write id once.
        var writeID: [UInt8]
        var body: Body
    }
    /// Writes not yet answered, by call id (call ids grow, so sorting keeps the callers' order).
    var writes: [UInt64: PendingWrite] = [:]

    // MARK: - API

    public init(configuration: Configuration) {
        self.configuration = configuration
        rotation = EndpointRotation(count: max(1, configuration.endpoints.count))
    }

    public init(host: String, port: Int, clientName: String = "SnapSync client") {
        self.init(configuration: Configuration(host: host, port: port, clientName: clientName))
    }

    deinit {
        link.connection?.close(.closed)
        reconnectTask?.cancel()
        handshakeTimer?.cancel()
        pingTask?.cancel()
        credentialsTask?.cancel()
        refreshTask?.cancel()
        eventSink.finish()
    }

    /// Connects and handshakes, with the token of `Configuration.credentials` if set. Throws
    /// when that fails (no automatic retry for the first connection: a wrong address or a
    /// refused token, `.unauthorized`, should say so); once connected, drops are retried by
    /// themselves. With several endpoints it tries each once, from the first, and throws
    /// `.allEndpointsFailed` when none could be connected to (see `Configuration.endpoints`).
    /// Calling it while connected does nothing. After the client gave up
    /// reconnecting (or stopped on a refused token), it connects again and rejoins the rooms.
    /// A `Configuration.tls` that cannot be used throws `.tlsConfigurationInvalid` before any
    /// attempt; a server certificate that is refused throws its `.tls…` case.
    public func connect() async throws(SnapSyncError) {
        switch state {
        case .closed: throw .closed
        case .connected: return
        case .disconnected:
            let endpoints = configuration.endpoints
            guard !endpoints.isEmpty else { throw .connectFailed("Configuration.endpoints is empty: no daemon to connect to") }
            // A TLS configuration that cannot be used fails here, before any attempt.
            for endpoint in endpoints { _ = try preparedTLS(for: endpoint) }
            // The app asks again: a token refused before is worth one more try.
            refused = nil
            rotation = EndpointRotation(count: endpoints.count)
            startConnection()
        case .connecting, .reconnecting: break
        }
        let call = newCallID()
        connectCalls.append(call)
        let endpoints = configuration.endpoints
        _ = try await wait(
            call, what: "connecting to \(endpoints.map(\.description).joined(separator: ", "))",
            timeout: configuration.connectTimeout * endpoints.count + .seconds(1)
        ).get()
    }

    /// Joins `room` and returns its replica once the room's snapshot has arrived. Joining a
    /// room already joined returns the same replica.
    public func join(_ room: String) async throws(SnapSyncError) -> RoomReplica {
        try checkUsable()
        if let entry = rooms[room], entry.loaded { return entry.replica }
        // A windowed room becomes a full member's: the server answers the JOIN with SNAPSHOT.
        endWindow(room, .notJoined(room: room))
        if rooms[room] == nil {
            rooms[room] = RoomEntry(replica: RoomReplica(room: room, client: self), phase: .detached)
            if case .ready = link { sendJoin(room) }
        }
        let call = newCallID()
        rooms[room]!.joinCalls.append(call)
        joinCallRooms[call] = room
        guard case .replica(let replica) = try await wait(call, what: "JOIN \(room)").get() else {
            preconditionFailure("a join completes with its replica")
        }
        return replica
    }

    /// Leaves `room`: the replica's `changes` finish and DIFFs stop (a windowed replica's too).
    /// Leaving a room not joined does nothing.
    public func leave(_ room: String) async throws(SnapSyncError) {
        if windows[room] != nil { return try await leaveWindow(room) }
        guard let entry = rooms.removeValue(forKey: room) else { return }
        entry.replica.finish()
        for call in entry.joinCalls { complete(call, .failure(.notJoined(room: room))) }
        guard case .ready = link, !entry.phase.isDetached else { return }
        let call = newCallID()
        sendLeave(room, call: call)
        _ = try await wait(call, what: "LEAVE \(room)").get()
    }

    /// The replica of a joined room.
    public func replica(_ room: String) -> RoomReplica? {
        rooms[room]?.replica
    }

    /// Applies `operations` to `room` atomically (MUTATE), whether or not this client has joined it.
    ///
    /// - Parameters:
    ///   - room: the room to write (created if new).
    ///   - operations: the batch, applied in order, all or nothing.
    ///   - expectedVersion: compare-and-set: the server rejects the batch (`version_mismatch`)
    ///     unless the room is at this version.
    /// - Returns: the room's position after the batch.
    /// - Throws: `.rejected` with the server's code, failing operation index and identifier;
    ///   connection errors; `.timedOut` after `requestTimeout`.
    @discardableResult
    public func mutate(_ room: String, _ operations: [SnapshotOperation], expectedVersion: UInt64? = nil) async throws(SnapSyncError) -> RoomPosition {
        try await write(
            PendingWrite(
                room: room, expectedVersion: expectedVersion, writeID: Self.newWriteID(),
                body: .operations(operations)))
    }

    /// Builds a batch with UIKit's mutators against the joined replica's snapshot, validating
    /// each call locally (see `BatchBuilder`), then sends it as `mutate` does.
    ///
    /// `body` runs on the caller's actor (the `isolation` parameter), not the client's, so it may
    /// touch the caller's state. Whatever it throws ends the call, as one typed error: nothing
    /// is sent.
    /// - Throws: `.invalidBatch` when a builder call fails locally (the body threw the builder's
    ///   `BatchError`), a `SnapSyncError` the body threw as it is, `.batchAbandoned` for any other
    ///   error of the body; `.notJoined` when the room is not joined, and what `mutate` throws.
    @discardableResult
    public func perform(
        _ room: String, expectedVersion: UInt64? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (inout BatchBuilder) throws -> Void
    ) async throws(SnapSyncError) -> RoomPosition {
        guard let base = await batchBase(room) else { throw .notJoined(room: room) }
        var builder = BatchBuilder(base: base.snapshot, limits: base.limits)
        do {
            try body(&builder)
        } catch {
            throw SnapSyncError(batchBodyError: error)
        }
        return try await mutate(room, builder.operations, expectedVersion: expectedVersion)
    }

    /// Replaces the whole content of `room` (REPLACE). See `mutate` for the rest.
    @discardableResult
    public func replace(_ room: String, with snapshot: RoomSnapshot, expectedVersion: UInt64? = nil) async throws(SnapSyncError) -> RoomPosition {
        try await write(
            PendingWrite(
                room: room, expectedVersion: expectedVersion, writeID: Self.newWriteID(),
                body: .snapshot(snapshot)))
    }

    /// Closes the connection for good: waiting calls throw `.closed`, replicas' `changes` and
    /// `events` finish.
    public func close() {
        guard state != .closed else { return }
        setState(.closed)
        generation += 1
        link.connection?.close(.closed)
        link = .none
        for task in [reconnectTask, handshakeTimer, pingTask, credentialsTask, refreshTask] { task?.cancel() }
        for call in Array(calls.keys) { complete(call, .failure(.closed)) }
        for entry in rooms.values { entry.replica.finish() }
        rooms = [:]
        for entry in windows.values { entry.replica.finish() }
        windows = [:]
        writes = [:]
        requests = [:]
        eventSink.yield(.closed)
        eventSink.finish()
    }

    // MARK: - Testing

    /// Shuts the socket down as a network failure would. With `reconnect: false` the client
    /// then waits in `.reconnecting` until `resumeReconnecting()`.
    @_spi(Testing) public func dropConnection(reconnect: Bool = true) {
        reconnectHeld = !reconnect
        link.connection?.drop()
    }

    /// Drops the connection when the next write's ACK arrives, as if the network failed just
    /// before it: the write was applied but its caller did not hear so. The write is then resent
    /// with its write id after the reconnect, and the server must answer with the original ACK.
    @_spi(Testing) public func loseNextWriteAcknowledgement() {
        loseNextWriteAck = true
    }

    /// Changes `room`'s replica in place, with no change published and no DIFF, as a fault of
    /// this process would: what `verify(_:)` exists to find.
    @_spi(Testing) public func damageReplica(_ room: String, _ damage: @Sendable (inout RoomSnapshot) -> Void) {
        rooms[room]?.replica.broadcast.publish { state -> RoomChange? in
            damage(&state.snapshot)
            return nil
        }
    }

    @_spi(Testing) public func resumeReconnecting() {
        reconnectHeld = false
        if case .reconnecting = state, case .none = link, reconnectTask == nil { startConnection() }
    }

    // MARK: - Calls

    func newCallID() -> UInt64 {
        nextCallID += 1
        return nextCallID
    }

    /// Waits for call `id` to be completed (by an answer, a failure, its timeout or the
    /// caller's cancellation). The call is registered before this suspends, so an answer can
    /// never arrive unheard.
    func wait(_ id: UInt64, what: String, timeout: Duration? = nil) async -> Result<Outcome, SnapSyncError> {
        let timeout = timeout ?? configuration.requestTimeout
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let timer = Task { [weak self] in
                    try? await Task.sleep(for: timeout)
                    guard !Task.isCancelled else { return }
                    await self?.complete(id, .failure(.timedOut("\(what): no answer within \(timeout)")))
                }
                calls[id] = Call(continuation: continuation, timer: timer)
            }
        } onCancel: {
            Task { [weak self] in await self?.complete(id, .failure(.cancelled)) }
        }
    }

    /// Resumes call `id` once and forgets everything waiting on it.
    func complete(_ id: UInt64, _ result: Result<Outcome, SnapSyncError>) {
        guard let call = calls.removeValue(forKey: id) else { return }
        call.timer.cancel()
        writes[id] = nil
        connectCalls.removeAll { $0 == id }
        if let room = joinCallRooms.removeValue(forKey: id), var entry = rooms[room] {
            entry.joinCalls.removeAll { $0 == id }
            if !entry.loaded && entry.joinCalls.isEmpty {
                // Nobody waits for this room any more; a late SNAPSHOT is answered with LEAVE.
                rooms[room] = nil
                entry.replica.finish()
            } else {
                rooms[room] = entry
            }
        }
        if let room = windowCallRooms.removeValue(forKey: id) { windowCallCompleted(id, room: room) }
        call.continuation.resume(returning: result)
    }

    func checkUsable() throws(SnapSyncError) {
        switch state {
        case .closed: throw .closed
        case .disconnected: throw .connectionLost("not connected: call connect()")
        case .connecting, .connected, .reconnecting: break
        }
    }

    func setState(_ state: ConnectionState) {
        stateBox.withLockedValue { $0 = state }
    }

    static func newWriteID() -> [UInt8] {
        var random = SystemRandomNumberGenerator()
        return (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &random) }
    }

    func batchBase(_ room: String) -> (snapshot: RoomSnapshot, limits: SnapshotLimits)? {
        guard let entry = rooms[room], entry.loaded else { return nil }
        return (entry.replica.snapshot, serverLimits.model)
    }
}

extension SnapSyncClient.Phase {
    var isDetached: Bool {
        if case .detached = self { return true }
        return false
    }
}
