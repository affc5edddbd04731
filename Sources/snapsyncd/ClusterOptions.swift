import ArgumentParser
import SnapSyncCluster
import SnapSyncHub
import SnapSyncServer

#if canImport(Glibc)
    import Glibc
#endif

/// The flags of cluster mode (docs/cluster.md): several snapsyncd nodes sharing rooms
/// through a NATS JetStream stream instead of the local write-ahead log.
struct ClusterOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Cluster mode: keep rooms in NATS JetStream at these servers (comma-separated nats://host:port, or all tls://host:port to require TLS with verified server certificates) instead of the local data directory, so that several snapsyncd nodes serve the same rooms (docs/cluster.md). Not with --data-dir, --room-ttl or --room-idle.",
            valueName: "urls"))
    var cluster: String?

    @Option(help: "Cluster mode: the node that writes a room's version N × this saves the room's checkpoint to the JetStream key-value bucket.")
    var clusterCheckpointEvery: Int = 1000

    @Option(
        help:
            "Cluster mode: records the stream keeps per room (max_msgs_per_subject), at least twice --cluster-checkpoint-every; a resume from before them gets a resync, and a room loads from its checkpoint plus them."
    )
    var clusterRetain: Int = 10_000

    @Option(
        help: ArgumentHelp(
            "Cluster mode over tls:// URLs: PEM certificates trusted as roots for the NATS servers' certificates, besides the system's.",
            valueName: "file"))
    var clusterCa: String?

    @Option(
        help: ArgumentHelp(
            "Cluster mode over tls:// URLs: PEM client certificate chain shown to NATS servers that verify clients; needs --cluster-key.",
            valueName: "file"))
    var clusterCert: String?

    @Option(help: ArgumentHelp("PEM private key of --cluster-cert.", valueName: "file"))
    var clusterKey: String?

    @Flag(
        help:
            "Cluster mode: start even when a NATS server is older than 2.10.23, whose JetStream is known to lose acknowledged writes (logged as a warning); without it such a server is refused (docs/cluster.md)."
    )
    var clusterAllowUnsafeNatsServer = false

    @Option(
        help: ArgumentHelp(
            "Cluster mode: how long a starting node waits for NATS servers that cannot serve yet (not reachable, no answer, JetStream temporarily unavailable or without a leader), trying again with a backoff from 0.5 s doubling up to 10 s and telling systemd it is still starting; then it exits with status 1 naming what it waited for. 0 tries once. A permanent failure (refused server version, authentication, TLS, stream conflict) exits at once.",
            valueName: "seconds"))
    var clusterStartTimeout: Int = 300

    @Option(
        help: ArgumentHelp(
            "Cluster mode: how long another node may go unheard (its presence heartbeat comes every third of this, at most every second) before it is declared lost and its members leave every room's presence with reason node_lost. Give every node the same value.",
            valueName: "seconds"))
    var clusterPresenceTimeout: Double = 3

    /// `--cluster-presence-timeout` as a duration.
    var presenceTimeout: Duration { .milliseconds(Int64((clusterPresenceTimeout * 1000).rounded())) }

    /// The NATS server URLs of `--cluster`, checked; empty without it.
    func servers() throws(ConfigurationError) -> [String] {
        guard let cluster else { return [] }
        let urls = cluster.split(separator: ",").map { String($0).trimmingWhitespace() }.filter { !$0.isEmpty }
        guard !urls.isEmpty else { throw ConfigurationError(message: "--cluster needs at least one nats://host:port URL") }
        for url in urls where !(url.hasPrefix("nats://") || url.hasPrefix("tls://")) {
            throw ConfigurationError(message: "--cluster: \(NATSURLRedaction.redacted(url)) is not a nats://host:port or tls://host:port URL")
        }
        guard NATSTLS.required(by: urls) != nil else {
            throw ConfigurationError(
                message: "--cluster mixes nats:// and tls:// URLs: give every server as tls:// (TLS required of all) or every one as nats://")
        }
        return urls
    }

    /// The TLS files of `--cluster-ca`, `--cluster-cert` and `--cluster-key`, checked: only with
    /// `tls://` URLs, the certificate with its key, each file readable.
    func tls() throws(ConfigurationError) -> NATSTLS {
        let files = NATSTLS(trustedCertificatesFile: clusterCa, certificateChainFile: clusterCert, privateKeyFile: clusterKey)
        if files.isEmpty { return files }
        guard try NATSTLS.required(by: servers()) == true else {
            throw ConfigurationError(message: "--cluster-ca, --cluster-cert and --cluster-key need --cluster with tls:// URLs")
        }
        guard (clusterCert == nil) == (clusterKey == nil) else {
            throw ConfigurationError(message: "--cluster-cert and --cluster-key go together: a client certificate needs its key")
        }
        for (flag, path) in [("--cluster-ca", clusterCa), ("--cluster-cert", clusterCert), ("--cluster-key", clusterKey)] {
            guard let path else { continue }
            let fd = open(path, O_RDONLY)
            guard fd >= 0 else {
                throw ConfigurationError(message: "\(flag) \(path): cannot be read (\(String(cString: strerror(errno))))")
            }
            close(fd)
        }
        return files
    }

    /// Cluster mode's own limits, and the single-node flags it cannot honour.
    func check(dataDir: String?, roomTTL: Bool, roomIdle: String?) throws(ConfigurationError) {
        guard cluster != nil else {
            if clusterCheckpointEvery != 1000 || clusterRetain != 10_000 {
                throw ConfigurationError(message: "--cluster-checkpoint-every and --cluster-retain need --cluster")
            }
            if clusterCa != nil || clusterCert != nil || clusterKey != nil {
                throw ConfigurationError(message: "--cluster-ca, --cluster-cert and --cluster-key need --cluster with tls:// URLs")
            }
            if clusterAllowUnsafeNatsServer {
                throw ConfigurationError(message: "--cluster-allow-unsafe-nats-server needs --cluster")
            }
            if clusterStartTimeout != 300 {
                throw ConfigurationError(message: "--cluster-start-timeout needs --cluster")
            }
            if clusterPresenceTimeout != 3 {
                throw ConfigurationError(message: "--cluster-presence-timeout needs --cluster")
            }
            return
        }
        _ = try servers()
        _ = try tls()
        // The room lives in JetStream: a local log would be a second, diverging copy; a TTL or
        // an idle eviction decided by one node alone would end a room the others still serve.
        if dataDir != nil { throw ConfigurationError(message: "--cluster keeps rooms in JetStream: --data-dir does not apply") }
        if roomTTL { throw ConfigurationError(message: "--room-ttl is not supported with --cluster (docs/cluster.md)") }
        if let roomIdle, roomIdle != "off" { throw ConfigurationError(message: "--room-idle is not supported with --cluster (docs/cluster.md)") }
        guard clusterStartTimeout >= 0 else { throw ConfigurationError(message: "--cluster-start-timeout must be 0 or more seconds") }
        // Three heartbeats fit in it; at least 0.3 s, at most 10 minutes.
        guard clusterPresenceTimeout >= 0.3, clusterPresenceTimeout <= 600 else {
            throw ConfigurationError(message: "--cluster-presence-timeout must be between 0.3 and 600 seconds")
        }
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
