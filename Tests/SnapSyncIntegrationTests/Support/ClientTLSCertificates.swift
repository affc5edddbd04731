import Foundation
import Testing

/// The certificates of the client's TLS tests, made once per suite with the openssl tool in a
/// temporary directory (never committed) and removed after it (`ClientTLSCertificates.Fixture`):
///
/// - `ca`: the CA the client trusts; `server` (DNS:localhost, IP:127.0.0.1), `expired` (the
///   same names, expired a day ago), `named` (DNS:localhost only) and `client`
///   (CN=snapsync-test-client) are signed by it;
/// - `other-ca`: a CA nobody trusts, for "untrusted" and for a pin that does not match;
///   `other-client` (CN=snapsync-test-client) is signed by it.
///
/// The SPKI pins are computed by openssl too, so that the client's own SPKI reading is checked
/// against an independent one.
final class ClientTLSCertificates: Sendable {
    let directory: String
    /// base64 SHA-256 of the SubjectPublicKeyInfo, by openssl.
    let serverPin: String
    let otherPin: String

    @TaskLocal static var current: ClientTLSCertificates?

    init() throws {
        directory = NSTemporaryDirectory() + "snapsync-client-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
        try "subjectAltName=DNS:localhost\n".write(toFile: directory + "/named.ext", atomically: true, encoding: .utf8)
        for ca in ["ca", "other-ca"] {
            try TestCertificates.openssl(
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                    "-subj", "/CN=SnapSync test \(ca)", "-keyout", "\(ca).key", "-out", "\(ca).pem",
                ], in: directory)
        }
        for (name, ca, serial, days, cn, ext) in [
            ("server", "ca", "0x2001", "2", "localhost", ["-extfile", "server.ext"]),
            ("expired", "ca", "0x2002", "-1", "localhost", ["-extfile", "server.ext"]),
            ("named", "ca", "0x2003", "2", "localhost", ["-extfile", "named.ext"]),
            ("client", "ca", "0x2004", "2", "snapsync-test-client", []),
            ("other-client", "other-ca", "0x2005", "2", "snapsync-test-client", []),
        ] {
            try TestCertificates.openssl(
                [
                    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=\(cn)",
                    "-keyout", "\(name).key", "-out", "\(name).csr",
                ], in: directory)
            try TestCertificates.openssl(
                ["x509", "-req", "-in", "\(name).csr", "-CA", "\(ca).pem", "-CAkey", "\(ca).key", "-set_serial", serial, "-days", days, "-out", "\(name).pem"]
                    + ext, in: directory)
        }
        serverPin = try Self.pin(of: "server.pem", in: directory)
        otherPin = try Self.pin(of: "other-ca.pem", in: directory)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func path(_ name: String) -> String { directory + "/" + name }

    func pem(_ name: String) throws -> String { try String(contentsOfFile: path(name), encoding: .utf8) }

    /// A daemon's TLS listener on an ephemeral loopback port serving `certificate` (`server`,
    /// `expired` or `named`).
    func daemonArguments(certificate: String = "server", port: Int = 0) -> [String] {
        ["--tls-listen", "127.0.0.1:\(port)", "--tls-cert", path("\(certificate).pem"), "--tls-key", path("\(certificate).key")]
    }

    /// The RFC 7469 pin of a certificate's key: `openssl x509 -pubkey | openssl pkey -pubin
    /// -outform der | openssl dgst -sha256 -binary | base64`.
    private static func pin(of certificate: String, in directory: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = [
            "-c",
            "openssl x509 -in \(certificate) -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
        ]
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let pin = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0, pin.count == 44 else { throw DaemonError("computing the pin of \(certificate) failed: \(pin)") }
        return pin
    }

    /// Makes the certificates once for the suite it is attached to; tests read them as
    /// `ClientTLSCertificates.current`.
    struct Fixture: SuiteTrait, TestScoping {
        func provideScope(for test: Test, testCase: Test.Case?, performing function: () async throws -> Void) async throws {
            let certificates = try ClientTLSCertificates()
            try await ClientTLSCertificates.$current.withValue(certificates) { try await function() }
        }
    }
}

extension Trait where Self == ClientTLSCertificates.Fixture {
    /// Certificates made once for the suite (`ClientTLSCertificates.current`).
    static var clientTLSCertificates: Self { Self() }
}
