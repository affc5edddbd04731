import Foundation

/// The certificates of the TLS-to-NATS tests, made with the openssl tool in a temporary directory
/// (never committed), removed when released: a CA (`ca.pem`), the server's certificate
/// (`server.pem`, `server.key`) naming only IP:127.0.0.1, so that `localhost` does not match it,
/// and a client certificate (`client.pem`, `client.key`, for servers with `verify: true`), both
/// signed by the CA.
final class NATSCertificates {
    let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "snapsync-nats-tls-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: path("server.ext"), atomically: true, encoding: .utf8)
        try "extendedKeyUsage=clientAuth\n".write(toFile: path("client.ext"), atomically: true, encoding: .utf8)
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=SnapSync NATS test CA", "-keyout", "ca.key", "-out", "ca.pem",
        ])
        for (name, serial) in [("server", "0x3001"), ("client", "0x3002")] {
            try openssl([
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=snapsync-nats-\(name)",
                "-keyout", "\(name).key", "-out", "\(name).csr",
            ])
            try openssl([
                "x509", "-req", "-in", "\(name).csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", serial, "-days", "2",
                "-extfile", "\(name).ext", "-out", "\(name).pem",
            ])
        }
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func path(_ name: String) -> String { directory + "/" + name }

    private func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestClusterError(message: "openssl \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
    }
}
