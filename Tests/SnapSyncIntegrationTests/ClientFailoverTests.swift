@_spi(Testing) @testable import SnapSync
import SnapSyncClientTestSupport
import Testing

// The client with several endpoints (Configuration.endpoints) against real daemons and dead
// ports (Support/ClosedPort.swift): connect() goes past a dead endpoint, a client whose daemon
// is killed fails over to the next and resumes there, and a client whose every endpoint is down
// gives up with the error that names them; over TLS, each endpoint's certificate is checked
// against its own host. Every wait has a deadline.

extension DaemonProcess {
    var endpoint: SnapSyncClient.Endpoint { .init(host: host, port: port) }
}

extension ClosedPort {
    var endpoint: SnapSyncClient.Endpoint { .init(host: host, port: port) }
}

/// A client of `endpoints` with quick reconnects, not connected yet.
private func failoverClient(_ endpoints: [SnapSyncClient.Endpoint], _ name: String, maximumAttempts: Int? = nil) -> SnapSyncClient {
    SnapSyncClient(
        configuration: .init(
            endpoints: endpoints, clientName: name, connectTimeout: hangBound, requestTimeout: hangBound,
            reconnect: .init(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200), maximumAttempts: maximumAttempts)))
}

@Suite("Client failover between endpoints", .serialized)
struct ClientFailoverTests {
    @Test("connect() goes past a dead first endpoint to the live second one", .timeLimit(.minutes(5)))
    func skipsDeadEndpoint() async throws {
        let dead = try ClosedPort()
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let client = failoverClient([dead.endpoint, daemon.endpoint], "patient")
        #expect(client.endpoint == nil, "no attempt yet")
        try await client.connect()
        #expect(client.state == .connected)
        #expect(client.endpoint == daemon.endpoint)
        let replica = try await client.join("room")
        try await client.mutate("room", [.appendSections(["s"])])
        #expect(replica.position.version == 1)
        await client.close()
    }

    @Test(
        "a client whose daemon is killed fails over to the next endpoint, resyncs there and follows its writes",
        .timeLimit(.minutes(5)))
    func failsOverAfterKill() async throws {
        let a = try DaemonProcess.start(), b = try DaemonProcess.start()
        defer {
            a.stop()
            b.stop()
        }
        let room = "roaming"
        let client = failoverClient([a.endpoint, b.endpoint], "roaming")
        let events = EventLog.start(client)
        try await client.connect()
        #expect(client.endpoint == a.endpoint)
        let replica = try await client.join(room)
        let log = ChangeLog.start(replica)
        try await client.mutate(room, [.appendSections(["on-a"]), .appendItems(["a1", "a2"], toSection: "on-a")])
        let onA = replica.position
        // B holds the same room with other content, under an epoch of its own.
        let writer = try await connectedClient(b, "writer-on-b")
        try await writer.mutate(room, [.appendSections(["on-b"]), .appendItems(["b1"], toSection: "on-b")])

        a.kill()
        let changes = try await log.wait(for: "the resync from b") { $0.contains { $0.kind.isResync } }
        #expect(client.endpoint == b.endpoint)
        let resync = try #require(changes.first { $0.kind.isResync })
        #expect(resync.kind == .resync(.historyUnavailable), "another daemon: the resume position is not its room's")
        #expect(resync.previousPosition == onA)
        #expect(resync.position.epoch != onA.epoch)
        #expect(replica.snapshot.itemIdentifiers == ["b1"])

        // B's writes, another client's and this one's, reach the replica.
        try await writer.mutate(room, [.appendItems(["b2"], toSection: "on-b")])
        try await client.mutate(room, [.appendItems(["c1"], toSection: "on-b")])
        let observer = try await connectedClient(b, "observer-on-b")
        let truth = try await observer.join(room)
        try await eventually("the replica at b's position") { replica.position == truth.position }
        #expect(replica.snapshot == truth.snapshot)
        #expect(replica.snapshot.itemIdentifiers == ["b1", "b2", "c1"])
        expectConsistentStream(await log.changes, "roaming")

        let log2 = await events.events
        #expect(log2.contains { if case .disconnected = $0 { true } else { false } }, "\(log2)")
        #expect(log2.contains { if case .connected(_, _, true) = $0 { true } else { false } }, "\(log2)")
        #expect(log2.contains { if case .resyncing(room, .historyUnavailable) = $0 { true } else { false } }, "\(log2)")
        for client in [client, writer, observer] { await client.close() }
    }

    @Test(
        "every endpoint down: after the policy's rounds the client stops with the error naming the endpoints in the order tried",
        .timeLimit(.minutes(5)))
    func allEndpointsDown() async throws {
        let dead1 = try ClosedPort(), dead2 = try ClosedPort()
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let client = failoverClient([dead1.endpoint, daemon.endpoint, dead2.endpoint], "stranded", maximumAttempts: 2)
        let events = EventLog.start(client)
        try await client.connect()
        #expect(client.endpoint == daemon.endpoint)
        _ = try await client.join("room")

        // Held after the drop, so that a write is surely waiting when the rounds start.
        await client.dropConnection(reconnect: false)
        try await eventually("reconnecting") { client.state.isReconnecting }
        daemon.kill()
        let pending = Task { try await client.mutate("room", [.appendSections(["s"])]) }
        try await eventually("the write waiting") { await !client.writes.isEmpty }
        await client.resumeReconnecting()

        // Each round starts after the endpoint that failed last: the daemon's, then dead2's.
        let roundOrder = [dead2.endpoint, dead1.endpoint, daemon.endpoint]
        let error = await #expect(throws: SnapSyncError.self) { try await pending.value }
        guard let (tried, last) = error?.endpointFailures else {
            Issue.record("expected .allEndpointsFailed, got \(String(describing: error))")
            return
        }
        #expect(tried == roundOrder)
        #expect(last.kind == .connectFailed, "\(last)")
        for endpoint in roundOrder { #expect("\(error!)".contains(endpoint.description)) }
        #expect(client.state == .disconnected)
        try await eventually("the stop event") { await events.events.contains { if case .stopped = $0 { true } else { false } } }
        let log = await events.events
        #expect(log.contains { if case .stopped(let why) = $0 { why == error } else { false } }, "\(log)")
        let rounds = log.filter { if case .reconnecting = $0 { true } else { false } }
        #expect(rounds.count == 2, "one per round, maximumAttempts of them: \(rounds)")

        // connect() makes one round from the first endpoint, and throws the same kind of error.
        let again = await #expect(throws: SnapSyncError.self) { try await client.connect() }
        guard let triedAgain = again?.endpointFailures?.tried else {
            Issue.record("expected .allEndpointsFailed, got \(String(describing: again))")
            return
        }
        #expect(triedAgain == [dead1.endpoint, daemon.endpoint, dead2.endpoint])
        await client.close()
    }
}

@Suite("Client failover between TLS endpoints", .clientTLSCertificates)
struct ClientTLSFailoverTests {
    var certificates: ClientTLSCertificates { ClientTLSCertificates.current! }

    @Test(
        "each endpoint's certificate is checked against its own host; a refused one moves on to the next endpoint",
        .timeLimit(.minutes(5)))
    func perEndpointNames() async throws {
        // Both serve `named`, for DNS:localhost only: reached as 127.0.0.1, a daemon is refused.
        let a = try DaemonProcess.start(arguments: certificates.daemonArguments(certificate: "named"))
        let b = try DaemonProcess.start(arguments: certificates.daemonArguments(certificate: "named"))
        defer {
            a.stop()
            b.stop()
        }
        let asAddress = SnapSyncClient.Endpoint(host: "127.0.0.1", port: try a.tlsPort())
        let asName = SnapSyncClient.Endpoint(host: "localhost", port: try b.tlsPort())
        let tls = SnapSyncClient.TLSConfiguration(trustRoots: .certificates(pem: try certificates.pem("ca.pem")))
        let client = SnapSyncClient(configuration: .init(endpoints: [asAddress, asName], clientName: "tls", tls: tls))
        try await client.connect()
        #expect(client.endpoint == asName)
        try await client.mutate("r", [.appendSections(["s"])])
        await client.close()

        let refused = SnapSyncClient(
            configuration: .init(endpoints: [asAddress, .init(host: "127.0.0.1", port: asName.port)], clientName: "tls", tls: tls))
        let error = await #expect(throws: SnapSyncError.self) { try await refused.connect() }
        guard let (tried, last) = error?.endpointFailures, last.kind == .tlsHostnameMismatch, let host = last.host else {
            Issue.record("expected .allEndpointsFailed after a host name mismatch, got \(String(describing: error))")
            return
        }
        #expect(tried == [asAddress, .init(host: "127.0.0.1", port: asName.port)])
        #expect(host == "127.0.0.1")
        await refused.close()
    }
}
