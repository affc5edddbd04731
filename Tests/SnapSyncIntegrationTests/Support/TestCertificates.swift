import Foundation

/// A CA and a server certificate for 127.0.0.1 (serial 1001), made with the openssl tool in a
/// temporary directory for one test, never committed; removed when released.
final class TestCertificates {
    let directory: String

    init() throws {
        directory = NSTemporaryDirectory() + "snapsync-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(toFile: path("server.ext"), atomically: true, encoding: .utf8)
        try Self.openssl(
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=Test CA",
                "-keyout", "ca.key", "-out", "ca.pem",
            ], in: directory)
        try Self.openssl(
            [
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                "-keyout", "server.key", "-out", "server.csr",
            ], in: directory)
        try Self.openssl(
            [
                "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "0x1001",
                "-days", "2", "-extfile", "server.ext", "-out", "server.pem",
            ], in: directory)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func path(_ name: String) -> String { directory + "/" + name }

    /// Arguments for a daemon serving TLS on an ephemeral loopback port with these files.
    var daemonArguments: [String] {
        ["--tls-listen", "127.0.0.1:0", "--tls-cert", path("server.pem"), "--tls-key", path("server.key")]
    }

    /// A self-signed certificate for localhost valid from `notBefore` to `notAfter` (seconds
    /// since the epoch), with its key, as `NAME.pem` and `NAME.key`: `openssl ca`, which (unlike
    /// `req -days`) takes any dates, the past included.
    func makeSelfSigned(_ name: String, notBefore: Int, notAfter: Int) throws {
        let config = """
            [ca]
            default_ca = ca_default
            [ca_default]
            database = \(name).index
            new_certs_dir = .
            serial = \(name).serial
            default_md = sha256
            policy = policy_any
            [policy_any]
            commonName = supplied

            """
        try config.write(toFile: path("\(name).cnf"), atomically: true, encoding: .utf8)
        try "".write(toFile: path("\(name).index"), atomically: true, encoding: .utf8)
        try "2001\n".write(toFile: path("\(name).serial"), atomically: true, encoding: .utf8)
        try Self.openssl(
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "\(name).key", "-out", "\(name).csr"],
            in: directory)
        try Self.openssl(
            [
                "ca", "-config", "\(name).cnf", "-selfsign", "-keyfile", "\(name).key", "-in", "\(name).csr", "-batch", "-notext",
                "-startdate", Self.asn1Time(notBefore), "-enddate", Self.asn1Time(notAfter), "-out", "\(name).pem",
            ], in: directory)
    }

    /// `YYYYMMDDHHMMSSZ`, as `openssl ca -startdate/-enddate` take it.
    static func asn1Time(_ seconds: Int) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMddHHmmss'Z'"
        return formatter.string(from: Date(timeIntervalSince1970: Double(seconds)))
    }

    static func openssl(_ arguments: [String], in directory: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw DaemonError("openssl \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
    }
}

extension DaemonProcess {
    /// The TLS listener's port, from its `TLS listening on HOST:PORT` line.
    func tlsPort(timeout: Double = 60) throws -> Int {
        guard waitForLog("TLS listening on ", timeout: timeout) else { throw DaemonError("no TLS listener", log: log) }
        let text = log
        let rest = text[text.range(of: "TLS listening on ")!.upperBound...].prefix { $0 != " " && $0 != "\n" }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]) else {
            throw DaemonError("cannot read the TLS port", log: text)
        }
        return port
    }
}
