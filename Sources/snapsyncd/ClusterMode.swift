import ArgumentParser
import Logging
import SnapSyncCluster
import SnapSyncHub
import SnapSyncLoop
import SnapSyncServer
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

extension SnapsyncdCommand {
    /// Cluster mode (`--cluster`, docs/cluster.md): the rooms' log is a NATS JetStream stream
    /// shared by every node, reached on this daemon's own libevent loop; there is no data
    /// directory and no recovery (a room loads from its checkpoint and its stream when a client
    /// first names it).
    func runCluster(_ flags: ServerConfiguration, logger: Logger) throws {
        var configuration = flags
        configuration.clusterCheckpointInterval = clusterOptions.clusterCheckpointEvery
        do {
            let servers = try clusterOptions.servers()
            let tls = try clusterOptions.tls()
            Server.ignoreReloadUntilStarted()
            // libnats's own threads touch the loop's event_base: its locking goes on before the
            // base exists, and this base is made with locks (single-node's is not).
            try EventLoop.enableThreadedAccess()
            let loop = try EventLoop(locking: true)
            // Blocking, before the loop runs: connect, and create the stream and the checkpoint
            // bucket if they are missing (docs/cluster.md, "traps": never block on the loop thread).
            // Nothing listens yet, so no client is told WELCOME by a node that cannot serve, and
            // READY=1 waits until the server listens, after this.
            let log = try JetStreamRoomLog.connect(
                servers: servers, tls: tls, loop: loop, retain: clusterOptions.clusterRetain, logger: logger,
                allowUnsafeServer: clusterOptions.clusterAllowUnsafeNatsServer, retry: startRetry(logger: logger))
            // A record is the DIFF frame plus its other fields and the message's headers: a
            // frame the servers would refuse to store must be refused by the daemon first, with
            // a typed REJECT (libnats refuses headers + payload over max_payload).
            let frameLimit = log.maxPayload - Self.recordOverhead
            if configuration.wire.maxFrameBytes > frameLimit {
                logger.notice(
                    "max_frame_bytes lowered to fit a NATS message",
                    metadata: ["max_frame_bytes": "\(frameLimit)", "nats_max_payload": "\(log.maxPayload)"])
                configuration.wire.maxFrameBytes = frameLimit
                configuration.wire.model.maxSnapshotBytes = min(
                    configuration.wire.model.maxSnapshotBytes, ServerConfiguration.snapshotBytes(forFrameBytes: frameLimit))
            }
            logger.info("cluster mode", metadata: ["nats": "\(NATSURLRedaction.redacted(servers))", "retain": "\(clusterOptions.clusterRetain)"])
            let metrics = try metricsListen.map { listen throws(ServerError) in
                try MetricsEndpoint(
                    listen: listen, loop: loop, logger: logger,
                    build: [("mode", "cluster"), ("auth", configuration.authKeys == nil ? "off" : "required")])
            }
            let server = try Server(configuration: configuration, logger: logger, store: MemoryStore(), loop: loop, log: log)
            // Presence between nodes, over core NATS on the log's connection; before the
            // server accepts anyone: its session ids take the node's tag.
            let presence = try PresenceExchange(log: log, hub: server.hub, loop: loop, timeout: clusterOptions.presenceTimeout, logger: logger)
            metrics?.attach(server, store: nil)
            try server.start()
            try server.run()
            metrics?.close()
            Server.ignoreSignalsAfterRun()
            presence.close()
            log.close()
        } catch {
            logger.critical("\(error)")
            throw ExitCode.failure
        }
    }

    /// How the start waits for NATS servers that cannot serve yet (`--cluster-start-timeout`):
    /// each wait logged as a warning, and systemd told that the node is still starting, so that
    /// neither the unit's TimeoutStartSec= nor a restart loop ends a node that would serve once
    /// the servers recover.
    func startRetry(logger: Logger) -> ClusterStartRetry {
        let startup = StartupNotifier(logger: logger)
        return ClusterStartRetry(timeout: .seconds(clusterOptions.clusterStartTimeout)) { wait in
            logger.warning(
                "NATS cannot serve yet; waiting for \(wait.step)",
                metadata: [
                    "error": "\(wait.error)", "attempt": "\(wait.attempt)", "retry_in": "\(ClusterStartRetry.seconds(wait.delay)) s",
                    "gives_up_in": "\((wait.delay + wait.remaining).components.seconds) s",
                ])
            // Until the deadline and a minute beyond (an attempt under way when it passes still
            // ends, then the node exits on its own): one step may take longer than the usual
            // extension (a server that accepts but does not answer takes libnats's timeouts).
            startup.progress("waiting for NATS: \(wait.step): \(wait.error.text)", extendBy: wait.delay + wait.remaining + .seconds(60))
        }
    }

    /// The most a published record adds to its DIFF frame: its other fields (kind, room name
    /// up to 128 bytes, epoch, version, write id up to 32 bytes, length varints:
    /// `WriteRecord.payloadSizeUpperBound`, under 200 bytes) and its headers (`NATS/1.0`, a
    /// `Nats-Msg-Id` of hex room, hex write id and a sequence, up to 342 bytes, and
    /// `Nats-Expected-Last-Subject-Sequence`, up to 58: under 450 bytes), rounded up.
    static let recordOverhead = 1024
}
