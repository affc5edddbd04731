import SnapSyncLoop
import Logging
import SnapSyncCluster

/// The set-up of most room-log tests: a real JetStream cluster (`TestCluster`), an event loop
/// (with locking, as cluster mode's) that the test runs (`runLoop`), and the nodes' room logs on
/// it. `down()` closes the logs, then stops the cluster; the loop is freed with the set-up.
final class LoopOnCluster {
    let cluster: TestCluster
    let loop: EventLoop
    private var logs: [JetStreamRoomLog] = []

    init() throws {
        cluster = try TestCluster()
        do {
            try EventLoop.enableThreadedAccess()
            loop = try EventLoop(locking: true)
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
        recoveryAttempts: Int = JetStreamRoomLog.defaultRecoveryAttempts, retry: ClusterStartRetry = .once
    ) throws -> JetStreamRoomLog {
        let log = try JetStreamRoomLog.connect(
            servers: servers ?? cluster.urls, loop: loop, retain: retain, logger: logger,
            requestTimeout: requestTimeout, heartbeat: heartbeat, recoveryAttempts: recoveryAttempts, retry: retry)
        logs.append(log)
        return log
    }

    func down() {
        for log in logs.reversed() { log.close() }
        try? cluster.down()
    }
}
