@testable import SnapSync
import Testing

// The platform-neutral parts of the client's TLS: base64, PEM, the SPKI pin. The handshakes
// themselves are in SnapSyncIntegrationTests/ClientTLSTests.swift, against the real daemon.

@Suite("Client: TLS configuration")
struct ClientTLSConfigurationTests {
    @Test("base64 follows RFC 4648's test vectors both ways and refuses what is not base64")
    func base64() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(Base64.decode(encoded) == Array(plain.utf8))
        }
        #expect(Base64.decode("Zm9v\nYmFy\r\n") == Array("foobar".utf8), "PEM's line breaks are skipped")
        for bad in ["Zm9", "Zm9v!", "Zg=a", "Z===", "===="] {
            #expect(Base64.decode(bad) == nil, "\(bad)")
        }
    }

    @Test("PEM: every block with its label; text around blocks ignored; broken blocks refused with the reason")
    func pem() throws {
        let text = """
            Certificate:
                (openssl x509 -text output)
            -----BEGIN CERTIFICATE-----
            Zm9v
            YmFy
            -----END CERTIFICATE-----
            -----BEGIN PRIVATE KEY-----
            Zg==
            -----END PRIVATE KEY-----\r
            -----BEGIN CERTIFICATE-----
            Zm8=
            -----END CERTIFICATE-----
            """
        #expect(try PEM.certificates(in: text) == [Array("foobar".utf8), Array("fo".utf8)])
        #expect(try PEM.blocks(in: text).map(\.label) == ["CERTIFICATE", "PRIVATE KEY", "CERTIFICATE"])
        let broken = [
            "-----BEGIN CERTIFICATE-----\nZm9v\n": "no END line",
            "-----BEGIN CERTIFICATE-----\nZm9v!\n-----END CERTIFICATE-----": "not base64",
            "-----BEGIN CERTIFICATE-----\nZm9v\n-----END PRIVATE KEY-----": "without its BEGIN",
            "no blocks at all": "no CERTIFICATE block",
        ]
        for (text, reason) in broken {
            #expect { try PEM.certificates(in: text) } throws: { "\($0)".contains(reason) }
        }
    }

    @Test("the pin is the SHA-256 of the certificate's SubjectPublicKeyInfo; a mismatch names both keys")
    func pin() throws {
        // A minimal certificate: [0] version, serial, signature, issuer, validity, subject, SPKI.
        let spki: [UInt8] = [0x30, 0x05, 0x30, 0x00, 0x03, 0x01, 0x00]
        let tbsFields: [UInt8] =
            [0xA0, 0x03, 0x02, 0x01, 0x02] + [0x02, 0x01, 0x01] + [0x30, 0x00] + [0x30, 0x00] + [0x30, 0x00] + [0x30, 0x00] + spki
        let tbs: [UInt8] = [0x30, UInt8(tbsFields.count)] + tbsFields
        let certificate: [UInt8] = [0x30, 0x81, UInt8(tbs.count + 4)] + tbs + [0x30, 0x00, 0x03, 0x00]
        #expect(CertificatePin.subjectPublicKeyInfo(ofCertificate: certificate) == spki)
        #expect(CertificatePin.subjectPublicKeyInfo(ofCertificate: Array(certificate.dropLast(12))) == nil, "truncated")
        #expect(CertificatePin.subjectPublicKeyInfo(ofCertificate: [0x04, 0x00]) == nil, "not a SEQUENCE")

        // SHA-256 of those 7 bytes, by `printf '\x30\x05\x30\x00\x03\x01\x00' | openssl dgst -sha256 -binary | base64`.
        let expected = "el/0McHnwpuNV2vL9PrFOaCURNH8xo2Kq/T2Or74t8k="
        let matching = try CertificatePin(base64: expected, host: "h")
        #expect(matching.check(leafDER: certificate, host: "h") == nil)
        let other = try CertificatePin(base64: Base64.encode([UInt8](repeating: 7, count: 32)), host: "h")
        #expect(other.check(leafDER: certificate, host: "h") == .tlsPinMismatch(host: "h", expected: other.base64, presented: expected))
        #expect(throws: SnapSyncError.tlsConfigurationInvalid(host: "h", reason: "the pinned key hash \"Zm9v\" is not the base64 of a 32-byte SHA-256")) {
            try CertificatePin(base64: "Zm9v", host: "h")
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
            guard case .tlsConfigurationInvalid("db.example", let reason) = error as? SnapSyncError else { return false }
            return reason.contains("no CERTIFICATE block")
        }
        await client.close()
    }
}
