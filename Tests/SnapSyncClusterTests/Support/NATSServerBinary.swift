import Foundation

/// The nats-server the tests run: the one scripts/deps.sh pins and installs, never one found on
/// PATH (Debian's 2.9.10 loses acknowledged writes, and cluster mode refuses it).
enum NATSServerBinary {
    /// `$SNAPSYNC_NATS_SERVER` (scripts/test exports it), else what `snapsync_nats_server` of
    /// scripts/deps.sh names, installed first if missing (a plain `swift test`).
    static let path: String = {
        if let path = ProcessInfo.processInfo.environment["SNAPSYNC_NATS_SERVER"], !path.isEmpty { return path }
        let deps = TestCluster.repository + "/scripts/deps.sh"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", #". "$0" && snapsync_install_nats_server >&2 && snapsync_nats_server"#, deps]
        let output = Pipe()
        process.standardOutput = output
        do { try process.run() } catch { return "nats-server-not-installed (\(error))" }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let path = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return process.terminationStatus == 0 ? path : "nats-server-not-installed (scripts/deps.sh failed)"
    }()

    /// `SNAPSYNC_NATS_VERSION` of scripts/deps.sh: the version the project pins.
    static var pinnedVersion: String? {
        guard let text = try? String(contentsOfFile: TestCluster.repository + "/scripts/deps.sh", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").first { $0.hasPrefix("SNAPSYNC_NATS_VERSION=") }.map { String($0.dropFirst("SNAPSYNC_NATS_VERSION=".count)) }
    }
}
