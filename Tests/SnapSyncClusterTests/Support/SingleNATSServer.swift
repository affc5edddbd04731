import Foundation

/// One real nats-server with JetStream on an ephemeral loopback port, in a throwaway directory,
/// optionally serving TLS only (`tls {}`) and verifying clients' certificates; `stop()` ends it
/// and removes the directory. JetStream streams on it have one replica.
final class SingleNATSServer {
    /// What the server's `tls {}` block holds.
    struct TLS {
        var certificate: String
        var key: String
        /// Require a client certificate signed by this CA (`verify: true`).
        var verifyClientsWith: String?
    }

    let directory: String
    let port: Int
    private let process: Process

    init(tls: TLS?) throws {
        directory = NSTemporaryDirectory() + "snapsync-nats-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var config = """
            host: 127.0.0.1
            port: -1
            jetstream {
              store_dir: "\(directory)/js"
              sync_interval: always
            }

            """
        if let tls {
            config += "tls {\n  cert_file: \"\(tls.certificate)\"\n  key_file: \"\(tls.key)\"\n"
            if let ca = tls.verifyClientsWith { config += "  ca_file: \"\(ca)\"\n  verify: true\n" }
            config += "}\n"
        }
        try config.write(toFile: directory + "/nats-server.conf", atomically: true, encoding: .utf8)
        let log = directory + "/nats-server.log"
        process = Process()
        process.executableURL = URL(fileURLWithPath: NATSServerBinary.path)
        process.arguments = ["-c", directory + "/nats-server.conf", "-l", log]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // The port it picked, from its log, once it says it is ready (well under a second; the
        // bound is for a server that never gets there).
        let marker = "Listening for client connections on 127.0.0.1:"
        var found: Int?
        for _ in 0..<200 where found == nil && process.isRunning {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if text.contains("Server is ready"), let range = text.range(of: marker) {
                found = Int(text[range.upperBound...].prefix { $0.isNumber })
            } else {
                usleep(50_000)
            }
        }
        guard let found else {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            try? FileManager.default.removeItem(atPath: directory)
            throw TestClusterError(message: "nats-server did not get ready: \(text.suffix(800))")
        }
        port = found
    }

    /// `scheme://127.0.0.1:port`.
    func url(_ scheme: String = "nats", host: String = "127.0.0.1") -> String { "\(scheme)://\(host):\(port)" }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
