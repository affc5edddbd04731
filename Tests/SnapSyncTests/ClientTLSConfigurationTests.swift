@testable import SnapSync
import Testing

// The client's TLS configuration as the transport prepares it: PEM and the pin's form. The
// handshakes, the chain's verification and the pin's check are in
// SnapSyncIntegrationTests/ClientTLSTests.swift, against the real daemon and real certificates.

@Suite("Client: TLS configuration")
struct ClientTLSConfigurationTests {
    @Test("the pinned hash must be the base64 of 32 bytes; the message names it")
    func pinConfiguration() throws {
        #expect(try CertificatePin(base64: String(repeating: "A", count: 43) + "=", host: "h").digest == [UInt8](repeating: 0, count: 32))
        for bad in ["Zm9v", "not base64!", String(repeating: "A", count: 44) + "AAAA"] {
            #expect(throws: SnapSyncError.tlsConfigurationInvalid(host: "h", reason: "the pinned key hash \"\(bad)\" is not the base64 of a 32-byte SHA-256")) {
                try CertificatePin(base64: bad, host: "h")
            }
        }
    }

    @Test("PEM: the CERTIFICATE blocks are read, other blocks skipped; a broken or empty text is refused naming what is wrong")
    func pem() throws {
        for (text, reason) in [
            ("not a PEM", "the trust roots:"),
            ("-----BEGIN CERTIFICATE-----\nZm9v!\n-----END CERTIFICATE-----", "the trust roots:"),
            ("-----BEGIN CERTIFICATE-----\nZm9vYmFy\n-----END CERTIFICATE-----", "the trust roots:"),
            ("-----BEGIN PRIVATE KEY-----\nZm9vYmFy\n-----END PRIVATE KEY-----", "the trust roots: no CERTIFICATE block"),
        ] {
            #expect("\(text)") {
                _ = try ClientTransport.prepare(.init(trustRoots: .certificates(pem: text)), host: "h")
            } throws: { error in
                guard let error = error as? SnapSyncError, error.kind == .tlsConfigurationInvalid, error.host == "h" else { return false }
                return error.reason!.hasPrefix(reason)
            }
        }
    }

    @Test("a TLS configuration that cannot be used fails connect() with .tlsConfigurationInvalid naming the host, without connecting")
    func invalidConfiguration() async throws {
        let tls = SnapSyncClient.TLSConfiguration(trustRoots: .certificates(pem: "not a PEM"))
        // Port 1: nothing listens there, so a connection attempt would fail as connectFailed.
        let client = SnapSyncClient(configuration: .init(host: "db.example", port: 1, tls: tls))
        await #expect {
            try await client.connect()
        } throws: { error in
            guard let error = error as? SnapSyncError, error.kind == .tlsConfigurationInvalid, error.host == "db.example" else { return false }
            return error.reason!.hasPrefix("the trust roots: ")
        }
        await client.close()
    }
}
