#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
@_spi(Testing) import SnapSync
import SnapSyncClientTestSupport
import Testing

// The client over TLS (Configuration.tls) against the real snapsyncd's --tls-listen port, with
// certificates made once for the suite (Support/ClientTLSCertificates.swift): the core flow
// also run in clear text for comparison, each refusal as its typed error, pinning, and mutual
// TLS. Every wait has a deadline, a hang bound only.

@Suite("Client over TLS against the real daemon", .clientTLSCertificates)
struct ClientTLSTests {
    enum Transport: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case plain, tls
        var testDescription: String { rawValue }
    }

    var certificates: ClientTLSCertificates { ClientTLSCertificates.current! }

    /// Trusts the suite's CA; `host` is 127.0.0.1, so the certificate's IP entry is what matches.
    func tls(
        roots: String = "ca.pem", pin: String? = nil, client: String? = nil, serverName: String? = nil
    ) throws -> SnapSyncClient.TLSConfiguration {
        SnapSyncClient.TLSConfiguration(
            trustRoots: .certificates(pem: try certificates.pem(roots)), pinnedPublicKeySHA256: pin,
            clientCertificate: try client.map {
                .init(certificateChainPEM: try certificates.pem("\($0).pem"), privateKeyPEM: try certificates.pem("\($0).key"))
            },
            serverName: serverName)
    }

    func client(port: Int, _ name: String, tls: SnapSyncClient.TLSConfiguration?) -> SnapSyncClient {
        SnapSyncClient(
            configuration: .init(
                host: "127.0.0.1", port: port, clientName: name, connectTimeout: hangBound, requestTimeout: hangBound,
                reconnect: .init(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200)), tls: tls))
    }

    /// What `connect()` throws with `tls` to a daemon serving `certificate` (nil: it connected).
    /// Either way the client made one TCP connection, so one handshake: the certificate is
    /// verified inside it, and a refusal is not looked at again over another connection (the
    /// daemon logs each connection it accepts at debug level).
    func connectError(
        _ tls: SnapSyncClient.TLSConfiguration, certificate: String = "server", daemonArguments: [String] = []
    ) async throws -> SnapSyncError? {
        // A handshake timeout that can never matter (an hour; the client's connectTimeout, the
        // hang bound, ends a stuck attempt long before): the client's handshake runs in this
        // test process, which other tests can keep from running for many seconds on a loaded
        // 2-core machine. Had the daemon's timer cut a handshake short (its default 10 s once
        // did), the typed TLS errors these tests expect would have become EOFs.
        let daemon = try DaemonProcess.start(
            arguments: certificates.daemonArguments(certificate: certificate) + ["--log-level", "debug", "--handshake-timeout", "1h"]
                + daemonArguments)
        defer { daemon.stop() }
        let client = client(port: try daemon.tlsPort(), "refused", tls: tls)
        let refusal: SnapSyncError?
        do {
            try await client.connect()
            // Connected: the session must work, not merely have handshaken.
            try await client.mutate("r", [.appendSections(["s"])])
            refusal = nil
        } catch {
            refusal = error
        }
        await client.close()
        daemon.stop()
        #expect(daemon.waitForLog("shutting down"))
        let accepted = daemon.log.split(separator: "\n").filter { $0.contains("connection accepted") }
        #expect(accepted.count == 1, "one connection, one handshake: \(accepted)")
        return refusal
    }

    @Test(
        "join, mutate, changes, and a resume after the daemon closed every connection (a restart)",
        .timeLimit(.minutes(5)), arguments: Transport.allCases)
    func coreFlow(_ transport: Transport) async throws {
        let directory = try DurableDirectory()
        defer { directory.remove() }
        let tlsArguments = transport == .tls ? certificates.daemonArguments() : []
        var daemon = try directory.start(tlsArguments)
        let plainPort = daemon.port
        let port = transport == .tls ? try daemon.tlsPort() : plainPort
        let tls = transport == .tls ? try tls() : nil
        let a = client(port: port, "a", tls: tls), b = client(port: port, "b", tls: tls)
        let eventsA = EventLog.start(a)
        try await a.connect()
        try await b.connect()
        let replicaA = try await a.join("core"), replicaB = try await b.join("core")
        let logA = ChangeLog.start(replicaA)
        try await b.mutate("core", [.appendSections(["s"])])
        try await a.mutate("core", [.appendItems(["a0"], toSection: "s")])
        _ = try await logA.wait(for: "a's two diffs") { $0.last?.version == 2 }
        try await eventually("b at v2") { replicaB.position.version == 2 }
        #expect(replicaB.snapshot == replicaA.snapshot)

        // The daemon ends every session (ERROR shutting_down) and comes back on the same ports.
        #expect(daemon.stop() == 0)
        try await eventually("a reconnecting") { a.state.isReconnecting }
        let samePorts = ["--port", "\(plainPort)"] + (transport == .tls ? certificates.daemonArguments(port: port) : [])
        daemon = try directory.start(samePorts)
        defer { daemon.stop() }
        try await eventually("both back") { a.state == .connected && b.state == .connected }
        for i in 1...3 { try await b.mutate("core", [.appendItems([SnapshotElement(SnapshotIdentifier("b\(i)"))], toSection: "s")]) }
        try await eventually("a at v5, has \(replicaA.position)") { replicaA.position.version == 5 }
        #expect(replicaA.snapshot == replicaB.snapshot)
        #expect(replicaA.snapshot.numberOfItems == 4)
        let changes = try await logA.wait(for: "a's last change") { $0.last?.version == 5 }
        expectConsistentStream(changes, "a")
        #expect(!changes.contains { $0.kind.isResync }, "the room resumed from a's position")
        let events = await eventsA.events
        #expect(events.contains { if case .connected(_, _, true) = $0 { true } else { false } }, "\(events)")
        #expect(await !eventsA.disconnections.isEmpty)
        await a.close()
        await b.close()
    }

    @Test("a certificate for another name is refused as .tlsHostnameMismatch naming the name; its own name is accepted")
    func wrongHostName() async throws {
        // `named` is for DNS:localhost only: neither 127.0.0.1 nor another name matches it.
        for (serverName, expected) in [(nil, "127.0.0.1"), ("sync.example.com", "sync.example.com")] {
            let error = try await connectError(try tls(serverName: serverName), certificate: "named")
            guard let error, error.kind == .tlsHostnameMismatch, let host = error.host else {
                Issue.record("expected tlsHostnameMismatch for \(expected), got \(String(describing: error))")
                continue
            }
            #expect(host == expected)
            #expect(error.description.contains(expected))
        }
        #expect(try await connectError(try tls(serverName: "localhost"), certificate: "named") == nil)
    }

    @Test("an expired certificate is refused as .tlsCertificateExpired")
    func expiredCertificate() async throws {
        let error = try await connectError(try tls(), certificate: "expired")
        guard let error, error.kind == .tlsCertificateExpired, let host = error.host, let reason = error.reason else {
            Issue.record("expected tlsCertificateExpired, got \(String(describing: error))")
            return
        }
        #expect(host == "127.0.0.1")
        #expect(reason.contains("CN=localhost expired at"), "\(reason)")
    }

    @Test("a certificate from a CA that is not a trust root is refused as .tlsUntrustedCertificate")
    func untrustedCertificate() async throws {
        let error = try await connectError(try tls(roots: "other-ca.pem"))
        guard let error, error.kind == .tlsUntrustedCertificate, let host = error.host, let reason = error.reason else {
            Issue.record("expected tlsUntrustedCertificate, got \(String(describing: error))")
            return
        }
        #expect(host == "127.0.0.1")
        #expect(reason.contains("does not lead to a trust root"), "\(reason)")
        #expect(error.description.contains("127.0.0.1"))
    }

    @Test("the system's trust roots (the distribution's CA bundle) do not include the suite's CA: .tlsUntrustedCertificate")
    func systemRoots() async throws {
        let error = try await connectError(SnapSyncClient.TLSConfiguration())
        guard let error, error.kind == .tlsUntrustedCertificate, let host = error.host else {
            Issue.record("expected tlsUntrustedCertificate, got \(String(describing: error))")
            return
        }
        #expect(host == "127.0.0.1")
    }

    @Test("a pinned key that matches connects; another is refused as .tlsPinMismatch naming the key presented")
    func pinning() async throws {
        #expect(try await connectError(try tls(pin: certificates.serverPin)) == nil)
        let error = try await connectError(try tls(pin: certificates.otherPin))
        #expect(error == .tlsPinMismatch(host: "127.0.0.1", expected: certificates.otherPin, presented: certificates.serverPin))
    }

    @Test("mutual TLS (--tls-client-ca): a client certificate from the CA is accepted; none, or one from another CA, is refused")
    func mutualTLS() async throws {
        let requireClient = ["--tls-client-ca", certificates.path("ca.pem")]
        #expect(try await connectError(try tls(client: "client"), daemonArguments: requireClient) == nil)
        // The daemon's alerts: certificate_required, and unknown_ca (OpenSSL's answer to a chain
        // it cannot verify).
        for (client, alert) in [(nil, "CERTIFICATE_REQUIRED"), ("other-client", "UNKNOWN_CA")] {
            let error = try await connectError(try tls(client: client), daemonArguments: requireClient)
            guard let error, error.kind == .tlsHandshakeFailed, let host = error.host, let reason = error.reason else {
                Issue.record("\(client ?? "no certificate"): expected tlsHandshakeFailed, got \(String(describing: error))")
                continue
            }
            #expect(host == "127.0.0.1")
            #expect(reason.contains(alert), "\(client ?? "no certificate"): \(reason)")
        }
    }
}
