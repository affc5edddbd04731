import NIOConcurrencyHelpers
import SnapSyncWire

// The connection's life: connect and handshake, keep alive with PING, notice the drop,
// reconnect with backoff (in rounds over the endpoints, EndpointRotation.swift), and on each new
// connection rejoin the rooms and resend the writes.

extension SnapSyncClient {
    /// Starts a connection attempt to the rotation's current endpoint: the token first
    /// (SnapSyncClient+Credentials.swift), then the socket, whose events are handled in order by
    /// one task.
    func startConnection() {
        generation += 1
        let generation = generation
        reconnectTask = nil
        endpointBox.withLockedValue { $0 = currentEndpoint }
        setState(hasConnected ? .reconnecting(attempt: max(reconnectAttempt, 1)) : .connecting)
        let timeout = configuration.connectTimeout
        handshakeTimer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            guard !Task.isCancelled else { return }
            await self?.handshakeTimedOut(generation)
        }
        prepareConnection(generation)
    }

    /// The endpoint of the attempt under way (or of the connection).
    var currentEndpoint: Endpoint {
        configuration.endpoints[rotation.current]
    }

    /// Opens the socket of attempt `generation`, whose HELLO will carry `token`.
    func openConnection(_ generation: Int) {
        let endpoint = currentEndpoint
        let tls: PreparedTLS?
        do {
            tls = try preparedTLS(for: endpoint)
        } catch {
            connectionClosed(error)
            return
        }
        let connection = ClientChannel(
            target: TransportTarget(
                host: endpoint.host, port: endpoint.port, connectTimeout: configuration.connectTimeout, tls: tls))
        link = .handshaking(connection)
        Task { [weak self] in
            for await event in connection.events {
                guard let self else {
                    connection.close(.closed)
                    return
                }
                await self.handle(event, generation: generation)
            }
        }
    }

    /// `Configuration.tls` for `endpoint`, loaded at the first connection and kept (trust roots,
    /// client certificate, pin), or why it cannot be used; nil for clear text. One per name
    /// verified: the configured `serverName` for every endpoint, else each endpoint's host.
    func preparedTLS(for endpoint: Endpoint) throws(SnapSyncError) -> PreparedTLS? {
        guard let tls = configuration.tls else { return nil }
        let name = tls.serverName ?? endpoint.host
        if tlsPreparations[name] == nil {
            do throws(SnapSyncError) {
                tlsPreparations[name] = .success(try ClientTransport.prepare(tls, host: endpoint.host))
            } catch {
                tlsPreparations[name] = .failure(error)
            }
        }
        return try tlsPreparations[name]!.get()
    }

    func handshakeTimedOut(_ generation: Int) {
        guard generation == self.generation else { return }
        switch link {
        case .preparing:
            credentialsTask?.cancel()
            credentialsTask = nil
            connectionClosed(.timedOut("the credentials provider did not answer within \(configuration.connectTimeout)"))
        case .handshaking(let connection):
            connection.close(.timedOut("no WELCOME from \(currentEndpoint) within \(configuration.connectTimeout)"))
        case .none, .ready:
            break
        }
    }

    func handle(_ event: ClientChannel.Event, generation: Int) {
        guard generation == self.generation else { return }
        switch event {
        case .connected:
            link.connection?.send(
                .hello(versions: ProtocolVersion.supported, clientName: configuration.clientName, credentials: token?.bytes ?? []))
        case .message(let message):
            lastHeard = .now
            handle(message)
        case .closed(let reason):
            connectionClosed(serverClosingReason ?? reason)
        }
    }

    func handle(_ message: Message) {
        switch message {
        case .welcome(let version, let sessionID, let serverName, let limits):
            guard case .handshaking(let connection) = link else { return violation("WELCOME after the handshake") }
            guard ProtocolVersion.supported.contains(version) else { return violation("WELCOME chose version \(version), not offered") }
            protocolVersion = version
            serverLimits = WireLimits(welcome: limits)
            session = (sessionID, serverName)
            ready(connection, sessionID: sessionID, serverName: serverName)
        case .error(let code, let text):
            // The server closes after ERROR; report this rather than the bare end of stream.
            if code == ErrorCode.unauthorized.rawValue {
                serverClosingReason = .unauthorized(reason: text)
                credentialsRefused(text)
            } else {
                serverClosingReason = .serverError(.init(rawCode: code, message: text))
            }
            link.connection?.close(serverClosingReason!)
        case .ping(let nonce):
            link.connection?.send(.pong(nonce: nonce))
        case .pong(let nonce):
            if outstandingPing?.nonce == nonce { outstandingPing = nil }
        default:
            guard case .ready = link else { return violation("\(message.type.name) before WELCOME") }
            switch message {
            case .snapshot(let requestID, let room, let epoch, let version, let reason, let digest, let snapshot, let chain):
                handleSnapshot(
                    requestID: requestID, room: room, position: RoomPosition(epoch: epoch, version: version),
                    reason: reason, digest: digest, snapshot: snapshot, chain: chain)
            case .catchup(let requestID, let room, let epoch, let from, let to, let form):
                handleCatchUp(requestID: requestID, room: room, epoch: epoch, from: from, to: to, form: form)
            case .diff(let room, let epoch, let version, let operations, let chain):
                handleDiff(room: room, position: RoomPosition(epoch: epoch, version: version), operations: operations, chain: chain)
            case .ack(let requestID, let epoch, let version):
                handleAck(requestID: requestID, position: RoomPosition(epoch: epoch, version: version))
            case .reject(let requestID, let code, let opIndex, let identifier, let text):
                let rejection = SnapSyncError.Rejection(
                    rawCode: code, operationIndex: opIndex.map { Int(clamping: $0) },
                    identifier: identifier, message: text)
                handleReject(requestID: requestID, rejection)
            case .left(let room, let code, let text):
                handleLeft(room: room, code: code, message: text)
            case .digest(let requestID, let room, let epoch, let version, let digest, let chain):
                handleDigest(requestID: requestID, room: room, position: RoomPosition(epoch: epoch, version: version), digest: digest, chain: chain)
            case .presence(let requestID, let room, let count, let members, let next):
                handlePresence(requestID: requestID, room: room, count: count, members: members, next: next)
            case .presenceDiff(let room, let count, let changes):
                handlePresenceDiff(room: room, count: count, changes: changes)
            case .windowState(let requestID, let room, let epoch, let version, _, let window, let counts, let snapshot):
                handleWindowState(
                    requestID: requestID, room: room, position: RoomPosition(epoch: epoch, version: version), window: window,
                    counts: counts, snapshot: snapshot)
            case .windowDiff(let requestID, let room, let epoch, let version, let window, let counts, let operations):
                handleWindowDiff(
                    requestID: requestID, room: room, position: RoomPosition(epoch: epoch, version: version), window: window,
                    counts: counts, operations: operations)
            case .statsReply:
                // This client sends no STATS.
                violation("STATS_REPLY answers no request")
            default:
                // The decoder accepts server messages only; the rest are handled above.
                violation("unexpected \(message.type.name)")
            }
        }
    }

    /// The server broke the protocol: drop the connection (and reconnect, which starts clean).
    func violation(_ what: String) {
        link.connection?.close(.protocolViolation(what))
    }

    /// WELCOME: requests may flow. Rooms are rejoined from their positions and unanswered
    /// writes resent with their write ids, in the order they were made.
    func ready(_ connection: ClientChannel, sessionID: UInt64, serverName: String) {
        link = .ready(connection)
        handshakeTimer?.cancel()
        handshakeTimer = nil
        let resumed = hasConnected
        hasConnected = true
        reconnectAttempt = 0
        rotation.beginRound()
        serverClosingReason = nil
        setState(.connected)
        eventSink.yield(.connected(sessionID: sessionID, serverName: serverName, resumed: resumed))
        for call in connectCalls { complete(call, .success(.done)) }
        refused = nil
        refreshFailures = 0
        scheduleRefresh()
        startPinging()
        for room in rooms.keys.sorted() { sendJoin(room) }
        // Windows have no resume: each asks for its window again (a WINDOW_STATE answers).
        for room in windows.keys.sorted() { sendWindowJoin(room) }
        for call in writes.keys.sorted() {
            if let error = sendWrite(call) { complete(call, .failure(error)) }
        }
    }

    /// The connection ended (or never came up): the next endpoint of the round at once, or after
    /// the policy's delay a new round (the first after a drop starts after the endpoint that
    /// dropped), or an end.
    func connectionClosed(_ reason: SnapSyncError) {
        let wasReady: Bool, reachedEndpoint: Bool
        switch link {
        case .ready: (wasReady, reachedEndpoint) = (true, true)
        case .handshaking: (wasReady, reachedEndpoint) = (false, true)
        case .none, .preparing: (wasReady, reachedEndpoint) = (false, false)
        }
        link = .none
        serverClosingReason = nil
        handshakeTimer?.cancel()
        handshakeTimer = nil
        pingTask?.cancel()
        pingTask = nil
        credentialsTask?.cancel()
        credentialsTask = nil
        refreshTask?.cancel()
        refreshTask = nil
        token = nil
        outstandingPing = nil
        // A DROP or VERIFY is not resent on the next connection: its caller hears now.
        for request in requests.values {
            switch request {
            case .drop(let room, let call): complete(call, .failure(.connectionLost("DROP \(room): \(reason)")))
            case .verify(let room, let call): complete(call, .failure(.connectionLost("VERIFY \(room): \(reason)")))
            // Nor are presence reads and states: a watch is, after the room's JOIN is answered.
            case .presenceList(let room, let call): complete(call, .failure(.connectionLost("PRESENCE_LIST \(room): \(reason)")))
            case .setPresence(let room, let call?): complete(call, .failure(.connectionLost("SET_PRESENCE \(room): \(reason)")))
            case .join, .leave, .write, .auth, .presenceWatch, .setPresence, .window: break
            }
        }
        requests = [:]
        for room in rooms.keys {
            rooms[room]!.phase = .detached
            rooms[room]!.member = false
            rooms[room]!.watchingPresence = false
        }
        for room in windows.keys { windows[room]!.phase = .detached }
        guard state != .closed else { return }
        if wasReady { eventSink.yield(.disconnected(reason)) }
        // A refused token, or a failure before the socket (the credentials), is not about the
        // endpoint: it ends the round, and the next round starts with the same endpoint.
        var aboutEndpoint = reachedEndpoint
        if reason.kind == .unauthorized { aboutEndpoint = false }
        if aboutEndpoint { rotation.attemptFailed() }
        // A connection that was up starts a round of its own, after the backoff.
        if wasReady { rotation.beginRound() }
        if !wasReady && aboutEndpoint && !rotation.roundIsOver { return startConnection() }
        let reason = aboutEndpoint ? roundFailure(reason) : reason
        rotation.beginRound()
        guard hasConnected else {
            // The first connection: the caller of connect() hears why; no retry.
            setState(.disconnected)
            for call in connectCalls { complete(call, .failure(reason)) }
            return
        }
        let policy = configuration.reconnect
        guard policy.enabled else { return stop(reason) }
        reconnectAttempt += 1
        if let maximum = policy.maximumAttempts, reconnectAttempt > maximum { return stop(reason) }
        var random = SystemRandomNumberGenerator()
        let delay = policy.delay(attempt: reconnectAttempt - 1, using: &random)
        setState(.reconnecting(attempt: reconnectAttempt))
        eventSink.yield(.reconnecting(attempt: reconnectAttempt, delay: delay))
        guard !reconnectHeld else { return }
        let generation = generation
        reconnectTask = Task { [weak self] in
            try? await Task.sleep(for: delay)
            guard !Task.isCancelled else { return }
            await self?.reconnectNow(after: generation)
        }
    }

    /// What a round that ended with `reason` failed with: with several endpoints, when every
    /// one failed, the error that names them.
    func roundFailure(_ reason: SnapSyncError) -> SnapSyncError {
        guard rotation.count > 1, rotation.roundIsOver else { return reason }
        return .allEndpointsFailed(tried: rotation.failedInRound.map { configuration.endpoints[$0] }, last: reason)
    }

    func reconnectNow(after generation: Int) {
        guard generation == self.generation, case .reconnecting = state, case .none = link else { return }
        startConnection()
    }

    /// Stops reconnecting: waiting calls fail, rooms stay (a later `connect()` resumes them).
    /// A refused token fails them as itself, so that callers can tell it from a network failure.
    func stop(_ reason: SnapSyncError) {
        setState(.disconnected)
        reconnectAttempt = 0
        let lost: SnapSyncError
        switch reason.kind {
        case .unauthorized, .allEndpointsFailed: lost = reason
        default: lost = .connectionLost("\(reason)")
        }
        for call in Array(calls.keys) { complete(call, .failure(lost)) }
        // Presence streams end too, rather than wait for a connection that may never come.
        for entry in rooms.values where entry.replica.presenceWanted { entry.replica.presenceFailed(lost) }
        eventSink.yield(.stopped(reason))
    }

    // MARK: Keepalive

    /// Checks a few times per interval: PING after `pingInterval` of silence, drop the
    /// connection when a PING stays unanswered for `pingTimeout`.
    func startPinging() {
        pingTask?.cancel()
        lastHeard = .now
        outstandingPing = nil
        let tick = max(.milliseconds(10), min(configuration.pingInterval, configuration.pingTimeout) / 4)
        let generation = generation
        pingTask = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: tick)
                guard let self, !Task.isCancelled else { return }
                await self.pingTick(generation)
            }
        }
    }

    func pingTick(_ generation: Int) {
        guard generation == self.generation, case .ready(let connection) = link else { return }
        let now = ContinuousClock.now
        if let ping = outstandingPing {
            if now - ping.sentAt >= configuration.pingTimeout {
                connection.close(.timedOut("no PONG within \(configuration.pingTimeout)"))
            }
        } else if now - lastHeard >= configuration.pingInterval {
            nextPingNonce += 1
            outstandingPing = (nextPingNonce, now)
            connection.send(.ping(nonce: nextPingNonce))
        }
    }

    // MARK: Requests

    func newRequest(_ request: Request) -> UInt64 {
        nextRequestID += 1
        requests[nextRequestID] = request
        return nextRequestID
    }

    /// JOIN, resuming from the replica's position unless the replica is new or distrusted; on
    /// version 3 with its chain there, so that a replica on another history than the room's is
    /// sent a SNAPSHOT rather than DIFFs that would not lead it to the room (PROTOCOL.md §9).
    func sendJoin(_ room: String) {
        guard case .ready(let connection) = link, let entry = rooms[room] else { return }
        let requestID = newRequest(.join(room: room))
        rooms[room]!.phase = .joining(requestID: requestID)
        let resume = entry.loaded && !entry.distrusted ? entry.replica.position : nil
        let chain = resume != nil && ProtocolVersion.hasChain(version: protocolVersion) ? entry.chain ?? .unknown : nil
        connection.send(.join(requestID: requestID, room: room, resume: resume, chain: chain))
    }

    func sendLeave(_ room: String, call: UInt64?) {
        guard case .ready(let connection) = link else { return }
        let requestID = newRequest(.leave(room: room, call: call))
        connection.send(.leave(requestID: requestID, room: room))
    }

    /// Sends write `call` with a new request id, or says why it cannot be sent.
    func sendWrite(_ call: UInt64) -> SnapSyncError? {
        guard case .ready(let connection) = link, let write = writes[call] else { return nil }
        nextRequestID += 1
        let requestID = nextRequestID
        let message: Message
        switch write.body {
        case .operations(let operations):
            message = .mutate(
                requestID: requestID, room: write.room, expectedVersion: write.expectedVersion,
                writeID: write.writeID, ops: operations)
        case .snapshot(let snapshot):
            message = .replace(
                requestID: requestID, room: write.room, expectedVersion: write.expectedVersion,
                writeID: write.writeID, snapshot: snapshot)
        case .section(let section, let items):
            message = .replaceSection(
                requestID: requestID, room: write.room, expectedVersion: write.expectedVersion,
                writeID: write.writeID, section: section, items: items)
        }
        // A version 1 server has no outlines (PROTOCOL.md §8.2): it would close the connection on
        // the unknown opcode or type, and the resend after the reconnect would do it again.
        if !ProtocolVersion.hasOutlines(protocolVersion), write.body.needsOutlines {
            return .unsupportedByServer(
                "\(write.body.messageName) on \(write.room) holds an outline, and the server speaks protocol version \(protocolVersion), which has none")
        }
        let frame = FrameEncoder().encode(message)
        // The server would answer an oversized frame by closing the connection, and the resend
        // after the reconnect would do it again: refuse it here instead.
        guard frame.count - 4 <= serverLimits.maxFrameBytes else {
            return .requestTooLarge(size: frame.count - 4, limit: serverLimits.maxFrameBytes)
        }
        requests[requestID] = .write(call: call)
        connection.send(frame: frame)
        return nil
    }

    func write(_ write: PendingWrite) async throws(SnapSyncError) -> RoomPosition {
        try checkUsable()
        let call = newCallID()
        writes[call] = write
        if let error = sendWrite(call) {
            writes[call] = nil
            throw error
        }
        let what = "\(write.body.messageName) on \(write.room)"
        guard case .position(let position) = try await wait(call, what: what).get() else {
            preconditionFailure("a write completes with a position")
        }
        return position
    }
}

extension SnapSyncClient.PendingWrite.Body {
    /// Whether the write needs protocol version 2: REPLACE_SECTION, an outline op, or a
    /// snapshot with a `levels` part.
    var needsOutlines: Bool {
        switch self {
        case .operations(let operations):
            operations.contains(where: \.isOutlineOperation)
        case .snapshot(let snapshot): snapshot.isOutline
        case .section: true
        }
    }

    var messageName: String {
        switch self {
        case .operations: "MUTATE"
        case .snapshot: "REPLACE"
        case .section: "REPLACE_SECTION"
        }
    }
}
