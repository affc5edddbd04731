import ArgumentParser
import SnapSyncServer

/// The flags of cluster mode (#20, docs/cluster.md): several snapsyncd nodes sharing rooms
/// through a NATS JetStream stream instead of the local write-ahead log.
struct ClusterOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Cluster mode: keep rooms in NATS JetStream at these servers (comma-separated nats://host:port) instead of the local data directory, so that several snapsyncd nodes serve the same rooms (docs/cluster.md). Not with --data-dir, --room-ttl or --room-idle.",
            valueName: "urls"))
    var cluster: String?

    @Option(help: "Cluster mode: the node that writes a room's version N × this saves the room's checkpoint to the JetStream key-value bucket.")
    var clusterCheckpointEvery: Int = 1000

    @Option(
        help:
            "Cluster mode: records the stream keeps per room (max_msgs_per_subject), at least twice --cluster-checkpoint-every; a resume from before them gets a resync, and a room loads from its checkpoint plus them."
    )
    var clusterRetain: Int = 10_000

    /// The NATS server URLs of `--cluster`, checked; empty without it.
    func servers() throws(ConfigurationError) -> [String] {
        guard let cluster else { return [] }
        let urls = cluster.split(separator: ",").map { String($0).trimmingWhitespace() }.filter { !$0.isEmpty }
        guard !urls.isEmpty else { throw ConfigurationError(message: "--cluster needs at least one nats://host:port URL") }
        for url in urls where !(url.hasPrefix("nats://") || url.hasPrefix("tls://")) {
            throw ConfigurationError(message: "--cluster: \(url) is not a nats://host:port URL")
        }
        return urls
    }

    /// Cluster mode's own limits, and the single-node flags it cannot honour.
    func check(dataDir: String?, roomTTL: Bool, roomIdle: String?) throws(ConfigurationError) {
        guard cluster != nil else {
            if clusterCheckpointEvery != 1000 || clusterRetain != 10_000 {
                throw ConfigurationError(message: "--cluster-checkpoint-every and --cluster-retain need --cluster")
            }
            return
        }
        _ = try servers()
        // The room lives in JetStream: a local log would be a second, diverging copy; a TTL or
        // an idle eviction decided by one node alone would end a room the others still serve.
        if dataDir != nil { throw ConfigurationError(message: "--cluster keeps rooms in JetStream: --data-dir does not apply") }
        if roomTTL { throw ConfigurationError(message: "--room-ttl is not supported with --cluster (docs/cluster.md)") }
        if let roomIdle, roomIdle != "off" { throw ConfigurationError(message: "--room-idle is not supported with --cluster (docs/cluster.md)") }
        guard clusterCheckpointEvery >= 1 else { throw ConfigurationError(message: "--cluster-checkpoint-every must be at least 1") }
        // A room loads from its checkpoint plus the records after it: the stream must keep at
        // least the records between two checkpoints, with margin for a checkpoint that failed.
        guard clusterRetain >= 2 * clusterCheckpointEvery else {
            throw ConfigurationError(
                message:
                    "--cluster-retain (\(clusterRetain)) must be at least twice --cluster-checkpoint-every (\(clusterCheckpointEvery)): a room loads from its checkpoint plus the records after it"
            )
        }
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        String(self.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
