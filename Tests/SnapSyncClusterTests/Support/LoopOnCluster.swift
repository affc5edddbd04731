import Glibc
import SnapSyncLoop
import Logging
import SnapSyncCluster
import SnapSyncStore

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
        try awaitStreamInterest(log)
        try awaitCheckpointsInterest(log)
        return log
    }

    /// Waits (at most `bound`) until a follow's first step through `log`'s server, the direct
    /// get of a room's checkpoint, is answered: right after the checkpoints stream is made, a
    /// server may answer it "no responders" (status 503) for a while, as for the rooms stream
    /// above, and a follow that fails so stays failed in a test (the daemon's engine follows
    /// again; a test's recorder does not). The probe follows a room of its own until its base
    /// (no checkpoint) or a failure, then lets it go. Gives up quietly when the bound passes.
    private func awaitCheckpointsInterest(_ log: JetStreamRoomLog, bound: Duration = .seconds(30)) throws {
        let deadline = ContinuousClock.now + bound
        let room = "checkpoints interest probe"
        while ContinuousClock.now < deadline {
            let recorder = FollowRecorder()
            recorder.follow(log, room: room)
            try runLoop(loop, until: { recorder.hasBase || recorder.failure != nil }, "the checkpoints interest probe")
            log.unfollow(room: room)
            guard recorder.failure != nil else { return }
            usleep(100_000)
        }
    }

    /// Waits (at most `bound`) until a publish to a room subject through `log`'s server reaches
    /// the rooms stream. Right after the stream is made, the server a connection is attached to
    /// may not have learned the stream's interest over the routes yet, and answers a publish "no
    /// responders": set-up, not what any test checks. The probe proposes to a room of its own
    /// after a sequence no subject has, so the stream refuses it (`.superseded`) and stores
    /// nothing. Gives up quietly when the bound passes: a test of a cluster without a quorum
    /// sees its own failure.
    private func awaitStreamInterest(_ log: JetStreamRoomLog, bound: Duration = .seconds(30)) throws {
        let deadline = ContinuousClock.now + bound
        let probe = WriteRecord(room: "stream interest probe", epoch: 1, version: 1, writeID: [], diffFrame: [0])
        while ContinuousClock.now < deadline {
            var outcome: ProposalOutcome?
            log.propose(room: probe.room, expectedSequence: 1 << 62, messageID: [], entry: .write(probe)) { outcome = $0 }
            try runLoop(loop, until: { outcome != nil }, "the stream interest probe")
            guard case .failed? = outcome else { return }
            usleep(100_000)
        }
    }

    func down() {
        for log in logs.reversed() { log.close() }
        try? cluster.down()
    }
}
