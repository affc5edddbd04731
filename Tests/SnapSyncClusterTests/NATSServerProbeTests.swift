import Testing
import SnapSyncTestSupport

@testable import SnapSyncCluster

extension RealNATSCluster {
    /// Cluster mode's start-up version check against the real, pinned nats-server: its INFO
    /// line is read, in plaintext even from a server that requires TLS, and it is accepted.
    /// (The refusal of old versions is the unit lane's NATSServerVersionCheckTests; the
    /// project installs no old server to start.)
    @Suite struct NATSServerProbeTests {
        @Test func thePinnedServerGivesItsVersionAndIsAccepted() throws {
            let server = try SingleNATSServer(tls: nil)
            defer { server.stop() }
            let info = try NATSServerProbe.info(url: server.url()).get()
            #expect(info.version == NATSServerBinary.pinnedVersion)
            #expect(info.name != nil)
            #expect(NATSServerVersion(info.version).map { $0.knownDataLoss == nil } == true, "\(info.version)")
            let lines = LogLines()
            try NATSServerVersionCheck.check(servers: [server.url()], allowUnsafe: false, logger: lines.logger)
            #expect(lines.contains("is version \(info.version)"), "\(lines.all)")
            #expect(!lines.all.contains { $0.hasPrefix("warning") || $0.hasPrefix("notice") }, "\(lines.all)")
        }

        @Test func aServerThatRequiresTLSGivesItsVersionBeforeTheHandshake() throws {
            let certificates = try NATSCertificates()
            let server = try SingleNATSServer(tls: .init(certificate: certificates.path("server.pem"), key: certificates.path("server.key")))
            defer { server.stop() }
            let info = try NATSServerProbe.info(url: server.url("tls")).get()
            #expect(info.version == NATSServerBinary.pinnedVersion)
        }

        @Test func aPortWithoutAServerIsAFailureNotARefusal() throws {
            // Started and stopped: its port is free again.
            let server = try SingleNATSServer(tls: nil)
            let url = server.url()
            server.stop()
            let result = NATSServerProbe.info(url: url, timeout: .seconds(60))
            #expect(throws: NATSServerProbe.ProbeFailure.self) { try result.get() }
            let lines = LogLines()
            try NATSServerVersionCheck.check(servers: [url], allowUnsafe: false, logger: lines.logger)
            #expect(lines.contains("could not learn the version of the nats-server at \(url)"), "\(lines.all)")
        }
    }
}
