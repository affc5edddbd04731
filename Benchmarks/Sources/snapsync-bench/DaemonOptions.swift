import ArgumentParser

/// How `fanout` and `memory` start snapsyncd: which binary, its --fsync policy, extra flags.
struct DaemonOptions: ParsableArguments {
    @Option(name: .customLong("server-binary"), help: "snapsyncd to start (default: <repo>/.build/release/snapsyncd, built first if older than its sources).")
    var serverBinary: String?

    @Option(
        name: .customLong("server-arg"), parsing: .unconditionalSingleValue,
        help: "An extra argument for snapsyncd (repeatable).")
    var serverArguments: [String] = []

    @Option(
        help: ArgumentHelp(
            "snapsyncd's --fsync policy for the daemon this command starts: no (the write-ahead log is written but not fsynced; redis-server runs with no persistence at all), everysec or always.",
            valueName: "always|everysec|no"))
    var fsync: String = "no"

    func validate() throws {
        if !["always", "everysec", "no"].contains(fsync) { throw ValidationError("--fsync must be always, everysec or no") }
    }

    /// The daemon's arguments: --fsync (unless --server-arg gives one), then --server-arg.
    var arguments: [String] {
        serverArguments.contains(where: { $0 == "--fsync" || $0.hasPrefix("--fsync=") }) ? serverArguments : ["--fsync", fsync] + serverArguments
    }
}
