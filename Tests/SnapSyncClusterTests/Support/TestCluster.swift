import Foundation
import Testing

/// The real 3-server NATS JetStream cluster of `scripts/cluster`, on loopback ports it picks free,
/// in a throwaway directory; `down()` stops it and removes the directory.
final class TestCluster {
    let directory: String
    /// `nats://127.0.0.1:PORT` of each server, from `scripts/cluster up`'s `NATS_URLS=` line.
    let urls: [String]

    /// The repository's root directory.
    static var repository: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }

    static var script: String { repository + "/scripts/cluster" }

    init() throws {
        // A port `scripts/cluster` found free may be taken before its server binds it (clusters
        // of tests running in parallel open route connections from ephemeral ports): then that
        // server exits at start, and a new directory gets new ports.
        var attempt = 1
        while true {
            let directory = NSTemporaryDirectory() + "snapsync-cluster-\(getpid())-\(UInt32.random(in: 0 ... .max))"
            do {
                let output = try Self.run("up", directory)
                guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("NATS_URLS=") }) else {
                    throw TestClusterError(message: "scripts/cluster up printed no NATS_URLS line: \(output)")
                }
                self.directory = directory
                urls = line.dropFirst("NATS_URLS=".count).split(separator: ",").map(String.init)
                return
            } catch {
                // The servers' last words, before `down` removes their logs.
                let logs = (1...3).compactMap { n in
                    (try? String(contentsOfFile: "\(directory)/n\(n)/nats-server.log", encoding: .utf8)).map { "n\(n): \($0.suffix(400))" }
                }
                // What did start must not outlive the test.
                _ = try? Self.run("down", directory)
                guard attempt < 3, "\(error)".contains("exited;") else {
                    throw TestClusterError(message: "\(error)\n" + logs.joined(separator: "\n"))
                }
                attempt += 1
            }
        }
    }

    /// SIGKILL to server `index` (0, 1, 2), by its pid in `cluster.json`.
    func kill(server index: Int) throws {
        Foundation.kill(try pid(server: index), SIGKILL)
    }

    /// SIGSTOP to server `index`: its sockets stay open, but it answers nothing (connections are
    /// accepted by the kernel and then hear no INFO) until `resume`.
    func pause(server index: Int) throws {
        Foundation.kill(try pid(server: index), SIGSTOP)
    }

    func resume(server index: Int) throws {
        Foundation.kill(try pid(server: index), SIGCONT)
    }

    private func pid(server index: Int) throws -> pid_t {
        let data = try Data(contentsOf: URL(fileURLWithPath: directory + "/cluster.json"))
        guard let state = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let servers = state["servers"] as? [[String: Any]], let pid = servers[index]["pid"] as? Int
        else { throw TestClusterError(message: "no pid of server \(index) in \(directory)/cluster.json") }
        return pid_t(pid)
    }

    /// Starts again the servers that are down, on their ports and stores.
    func up() throws {
        _ = try Self.run("up", directory)
    }

    func down() throws {
        _ = try Self.run("down", directory)
    }

    @discardableResult
    private static func run(_ command: String, _ directory: String) throws -> String {
        // NATS servers only: these tests drive the log, not snapsyncd nodes.
        try runScript([command, "--dir", directory] + (command == "up" ? ["--nodes", "0"] : []))
    }

    /// Runs `scripts/cluster` with `arguments` (and `environment` added to the test's), and
    /// returns its standard output; a non-zero exit throws with its standard error.
    @discardableResult
    static func runScript(_ arguments: [String], environment: [String: String] = [:]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: script)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestClusterError(
                message: "scripts/cluster \(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(String(decoding: err, as: UTF8.self))")
        }
        return String(decoding: out, as: UTF8.self)
    }
}

struct TestClusterError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
