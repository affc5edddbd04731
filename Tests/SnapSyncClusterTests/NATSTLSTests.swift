import SnapSyncLoop
import SnapSyncCluster
import Testing

extension RealNATSCluster {
    /// TLS to NATS (`--cluster tls://...`), against one real nats-server serving TLS only, or
    /// plaintext only: a `tls://` URL requires TLS and a server certificate that verifies (chain
    /// and host name), `--cluster-ca` adds a trust root, a client certificate satisfies a server
    /// that verifies clients, and nothing falls back to plaintext.
    @Suite struct NATSTLSTests {
        /// A one-replica stream: the server is alone.
        static let stream = StreamSpec(name: "tls-test", subjects: ["snapsync.room.>"], replicas: 1, duplicateWindow: .seconds(120))

        /// Makes the stream over a connection of its own, then publishes over a loop connection:
        /// both with `tls`. Throws what either refused.
        static func ensureAndPublish(servers: [String], tls: NATSTLS) throws -> PublishAck {
            try EventLoop.enableThreadedAccess()
            try StreamProvisioning.ensureStream(stream, servers: servers, tls: tls, timeout: .seconds(5))
            let loop = try EventLoop(locking: true)
            let connection = try NATSConnection(servers: servers, tls: tls, loop: loop)
            defer { connection.close() }
            return try NATSConnectionTests.publish(connection, loop, subject: "snapsync.room.tls", after: 0, id: "t1").result.get()
        }

        /// The text of the error `body` threw, which must be a `NATSError` of `operation`.
        static func refusal(_ operation: String, _ body: () throws -> Void) -> String {
            do {
                try body()
            } catch let error as NATSError {
                #expect(error.operation == operation, "\(error)")
                return error.text
            } catch {
                Issue.record("not a NATSError: \(error)")
                return "\(error)"
            }
            Issue.record("\(operation) was not refused")
            return ""
        }

        @Test func withTheCAAStreamIsMadeAndAPublishIsAckedOverTLS() throws {
            let certificates = try NATSCertificates()
            let server = try SingleNATSServer(tls: .init(certificate: certificates.path("server.pem"), key: certificates.path("server.key")))
            defer { server.stop() }
            let ack = try Self.ensureAndPublish(servers: [server.url("tls")], tls: NATSTLS(trustedCertificatesFile: certificates.path("ca.pem")))
            #expect(ack == PublishAck(stream: "tls-test", sequence: 1, duplicate: false))
        }

        @Test func aServerCertificateThatDoesNotVerifyIsRefused() throws {
            let certificates = try NATSCertificates()
            let server = try SingleNATSServer(tls: .init(certificate: certificates.path("server.pem"), key: certificates.path("server.key")))
            defer { server.stop() }
            // The system's roots only: the test CA is not among them, for either connection.
            let untrusted = Self.refusal("natsConnection_Connect") {
                try StreamProvisioning.ensureStream(Self.stream, servers: [server.url("tls")], timeout: .seconds(5))
            }
            #expect(untrusted.contains("unable to get local issuer certificate"), "\(untrusted)")
            let eventLoop = try EventLoop(locking: true)
            let loop = Self.refusal("natsConnection_Connect") { _ = try NATSConnection(servers: [server.url("tls")], loop: eventLoop) }
            #expect(loop.contains("unable to get local issuer certificate"), "\(loop)")
            // A trusted chain for another name: the certificate names IP:127.0.0.1 only.
            let misnamed = Self.refusal("natsConnection_Connect") {
                try StreamProvisioning.ensureStream(
                    Self.stream, servers: [server.url("tls", host: "localhost")], tls: NATSTLS(trustedCertificatesFile: certificates.path("ca.pem")),
                    timeout: .seconds(5))
            }
            #expect(misnamed.contains("hostname mismatch"), "\(misnamed)")
        }

        @Test func aTLSURLToAPlaintextServerIsRefusedNotConnectedInPlaintext() throws {
            let certificates = try NATSCertificates()
            let server = try SingleNATSServer(tls: nil)
            defer { server.stop() }
            let text = Self.refusal("natsConnection_Connect") {
                _ = try Self.ensureAndPublish(servers: [server.url("tls")], tls: NATSTLS(trustedCertificatesFile: certificates.path("ca.pem")))
            }
            #expect(text.contains("the server does not offer TLS"), "\(text)")
            // The same server takes the same work over nats://: only TLS was missing.
            #expect(try Self.ensureAndPublish(servers: [server.url()], tls: NATSTLS()).sequence == 1)
        }

        @Test func aServerThatVerifiesClientsTakesOnlyAClientWithACertificate() throws {
            let certificates = try NATSCertificates()
            let server = try SingleNATSServer(
                tls: .init(
                    certificate: certificates.path("server.pem"), key: certificates.path("server.key"),
                    verifyClientsWith: certificates.path("ca.pem")))
            defer { server.stop() }
            let anonymous = NATSTLS(trustedCertificatesFile: certificates.path("ca.pem"))
            let refused = Self.refusal("natsConnection_Connect") { _ = try Self.ensureAndPublish(servers: [server.url("tls")], tls: anonymous) }
            #expect(refused.contains("it may require a client certificate"), "\(refused)")
            var client = anonymous
            client.certificateChainFile = certificates.path("client.pem")
            client.privateKeyFile = certificates.path("client.key")
            #expect(try Self.ensureAndPublish(servers: [server.url("tls")], tls: client).sequence == 1)
        }

        /// Refused before connecting, so no server is needed.
        @Test func mixedSchemesAndUnreadableFilesAreRefusedBeforeConnecting() throws {
            let mixed = Self.refusal("natsOptions_SetSecure") {
                try StreamProvisioning.ensureStream(Self.stream, servers: ["nats://127.0.0.1:1", "tls://127.0.0.1:2"])
            }
            #expect(mixed.contains("nats:// and tls:// URLs mixed"), "\(mixed)")
            let plaintext = Self.refusal("natsOptions_SetSecure") {
                try StreamProvisioning.ensureStream(
                    Self.stream, servers: ["nats://127.0.0.1:1"], tls: NATSTLS(trustedCertificatesFile: "/nonexistent/ca.pem"))
            }
            #expect(plaintext.contains("need tls:// URLs"), "\(plaintext)")
            let missing = "/nonexistent/snapsync-ca.pem"
            let unreadable = Self.refusal("natsOptions_LoadCATrustedCertificates") {
                try StreamProvisioning.ensureStream(Self.stream, servers: ["tls://127.0.0.1:1"], tls: NATSTLS(trustedCertificatesFile: missing))
            }
            #expect(unreadable.contains(missing), "\(unreadable)")
        }
    }
}
