// Option groups shared by several subcommands, declared once so that the same flag means the
// same thing everywhere.
import ArgumentParser

/// `--server-binary`: the snapsyncd a command starts.
struct ServerBinaryOption: ParsableArguments {
    @Option(
        name: .customLong("server-binary"),
        help: "snapsyncd to start (default: <repo>/.build/release/snapsyncd, which must not be older than its sources).")
    var serverBinary: String?
}

/// How `fanout` and `memory` start snapsyncd: which binary, its --fsync policy, extra flags.
struct DaemonOptions: ParsableArguments {
    @OptionGroup var binary: ServerBinaryOption

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

/// `--redis-binary`: the redis-server a comparison starts.
struct RedisBinaryOption: ParsableArguments {
    @Option(name: .customLong("redis-binary"), help: "redis-server to start (default: from PATH).")
    var redisBinary: String?
}

/// `--dir`: where the durable benchmarks put their data.
struct DataDirectoryOption: ParsableArguments {
    @Option(
        help:
            "Directory for the data directories (and Redis's AOF): put it on the disk to measure (default: $TMPDIR or /var/tmp).")
    var dir: String?
}

/// `--json`: machine-readable output for the commands that print text by default.
struct JSONOutputOption: ParsableArguments {
    @Flag(help: "One JSON object per case per line.")
    var json = false
}
