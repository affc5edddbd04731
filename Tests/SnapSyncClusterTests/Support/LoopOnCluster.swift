import CLibevent
import Logging
import SnapSyncCluster

/// The set-up of most room-log tests: a real JetStream cluster (`TestCluster`), a libevent base
/// whose loop the test runs (`runLoop`), and the nodes' room logs on it. `down()` closes the
/// logs, frees the base and stops the cluster, in that order.
final class LoopOnCluster {
    let cluster: TestCluster
    let base: OpaquePointer
    private var logs: [JetStreamRoomLog] = []

    init() throws {
        cluster = try TestCluster()
        do {
            try NATSConnection.prepareLibevent()
            guard let base = event_base_new() else { throw TestClusterError(message: "event_base_new") }
            self.base = base
        } catch {
            try? cluster.down()
            throw error
        }
    }

    /// A node's room log connected to `servers` (by default all of them, as `--cluster` is
    /// given them all), closed by `down()` if the test has not closed it.
    ///
    /// A request's timeout is a hang bound here, not the daemon's 5 s: a follow or a proposal
    /// whose answer comes late on a loaded machine has not failed, and only the tests about a
    /// missing quorum, which expect the failure, give a short one.
    func connect(
        servers: [String]? = nil, retain: Int = 10_000, logger: Logger = testLogger,
        requestTimeout: Duration = .seconds(60), heartbeat: Duration = .seconds(5),
        recoveryAttempts: Int = JetStreamRoomLog.defaultRecoveryAttempts
    ) throws -> JetStreamRoomLog {
        let log = try JetStreamRoomLog.connect(
            servers: servers ?? cluster.urls, eventBase: base, retain: retain, logger: logger,
            requestTimeout: requestTimeout, heartbeat: heartbeat, recoveryAttempts: recoveryAttempts)
        logs.append(log)
        return log
    }

    func down() {
        for log in logs.reversed() { log.close() }
        event_base_free(base)
        try? cluster.down()
    }
}
