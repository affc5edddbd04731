import Testing
import SnapSyncTestThreads
@testable import SnapSyncCluster

// Cluster mode's patience at start, on a clock of the test's own: which failures it waits out,
// how long it waits, and how it gives up (the real fault, paused nats-servers, is
// scripts/tests/test_cluster_start.py's).

@Suite(.unitTests) struct ClusterStartRetryTests {
    /// A clock that only the retry's sleeps move, and what it was told.
    final class Clock {
        var now = ContinuousClock.now
        var sleeps: [Duration] = []
        var waits: [ClusterStartRetry.Wait] = []

        func retry(timeout: Duration) -> ClusterStartRetry {
            ClusterStartRetry(
                timeout: timeout, onWait: { self.waits.append($0) }, now: { self.now },
                sleep: {
                    self.sleeps.append($0); self.now += $0
                })
        }
    }

    static let unavailable = NATSError(
        operation: "js_AddStream", identifier: "stream snapsync-rooms", code: .jetStream(NATSError.temporarilyUnavailable),
        text: "JetStream system temporarily unavailable")

    @Test func transientFailuresAreWaitedOutWithADoublingDelayUpToTenSeconds() throws {
        let clock = Clock()
        var calls = 0
        let value = try clock.retry(timeout: .seconds(300)).run("stream snapsync-rooms") { () throws(NATSError) -> Int in
            calls += 1
            if calls <= 7 { throw Self.unavailable }
            return 42
        }
        #expect(value == 42)
        #expect(calls == 8)
        #expect(clock.sleeps == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10)])
        #expect(clock.waits.map(\.attempt) == Array(1...7))
        #expect(clock.waits.allSatisfy { $0.step == "stream snapsync-rooms" && $0.error == Self.unavailable })
        // What is left after each wait, for systemd's extension.
        #expect(clock.waits.first?.remaining == .seconds(300) - .milliseconds(500))
    }

    @Test func aPermanentFailureEndsTheStartAtOnce() {
        let clock = Clock()
        let conflict = NATSError(
            operation: "js_UpdateStream", identifier: "stream snapsync-rooms", code: .jetStream(NATSError.streamNameExists), text: "stream name already in use")
        var calls = 0
        #expect(throws: conflict) {
            try clock.retry(timeout: .seconds(300)).run("stream snapsync-rooms") { () throws(NATSError) in
                calls += 1
                throw conflict
            }
        }
        #expect(calls == 1)
        #expect(clock.sleeps.isEmpty)
    }

    @Test func theDeadlineEndsTheWaitNamingTheStepAndTheLastFailure() throws {
        let clock = Clock()
        var calls = 0
        let error = try #require(
            throws: NATSError.self,
            performing: {
                try clock.retry(timeout: .seconds(5)).run("bucket snapsync-checkpoints") { () throws(NATSError) in
                    calls += 1
                    throw Self.unavailable
                }
            })
        // 0.5 + 1 + 2, then the 1.5 s left rather than 4: the last attempt is at the deadline.
        #expect(clock.sleeps == [.milliseconds(500), .seconds(1), .seconds(2), .milliseconds(1500)])
        #expect(calls == 5)
        #expect(error.code == .startDeadline)
        #expect(!error.isTransientAtStart)
        #expect(error.description.contains("waiting for bucket snapsync-checkpoints"))
        #expect(error.description.contains("--cluster-start-timeout 5 s"))
        #expect(error.description.contains("JetStream system temporarily unavailable"))
    }

    @Test func onceTriesOnceAndThrowsTheFailureAsItIs() {
        var calls = 0
        #expect(throws: Self.unavailable) {
            try ClusterStartRetry.once.run("stream snapsync-rooms") { () throws(NATSError) in
                calls += 1
                throw Self.unavailable
            }
        }
        #expect(calls == 1)
    }

    @Test func whichFailuresAreTransient() {
        func jetStream(_ code: UInt32) -> NATSError { NATSError(operation: "op", identifier: "id", code: .jetStream(code), text: "") }
        #expect(jetStream(NATSError.temporarilyUnavailable).isTransientAtStart)
        #expect(jetStream(NATSError.clusterNotLeader).isTransientAtStart)
        #expect(jetStream(NATSError.clusterNoPeers).isTransientAtStart)
        #expect(NATSError.notFound("$JS.API.STREAM.MSG.GET", "salt", text: "no salt stored").isTransientAtStart)
        #expect(!jetStream(NATSError.streamNameExists).isTransientAtStart)
        #expect(!jetStream(NATSError.wrongLastSequence).isTransientAtStart)
        #expect(!NATSError.failed("op", "id", text: "refused").isTransientAtStart)
        #expect(!NATSError(operation: "server version check", identifier: "nats://h", code: .refusedServer, text: "").isTransientAtStart)
    }

    @Test func secondsAreWrittenWithoutNeedlessDecimals() {
        #expect(ClusterStartRetry.seconds(.seconds(10)) == "10")
        #expect(ClusterStartRetry.seconds(.milliseconds(500)) == "0.5")
    }
}
