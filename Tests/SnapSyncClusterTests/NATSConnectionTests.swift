import SnapSyncLoop
@testable import SnapSyncCluster
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension RealNATSCluster {
    /// `NATSConnection` on a libevent loop, against the real 3-server cluster: a room's writes are
    /// ordered by the subject's expected last sequence, de-duplicated by message id, and every
    /// outcome comes back on the thread that runs the loop.
    @Suite struct NATSConnectionTests {
        /// One publish, waited for by running the loop: its outcome and whether it came on this thread.
        static func publish(
            _ connection: NATSConnection, _ loop: EventLoop, subject: String, after sequence: UInt64, id: String,
            timeout: Duration = .seconds(5)
        ) throws -> (result: Result<PublishAck, NATSError>, onLoopThread: Bool) {
            let loopThread = pthread_self()
            var outcome: (Result<PublishAck, NATSError>, Bool)?
            try connection.publish(subject: subject, payload: Array("diff \(id)".utf8), expectedLastSubjectSequence: sequence, messageID: id, timeout: timeout)
            {
                outcome = ($0, pthread_equal(pthread_self(), loopThread) != 0)
            }
            // libnats's MaxWait bounds this: the completion comes, an ack or NATS_TIMEOUT.
            while outcome == nil { try loop.runOnce() }
            return outcome!
        }

        /// The first publish of a test, retried while nothing serves the subject yet: a stream just
        /// made reaches the other servers' interest over the routes a moment later, and meanwhile a
        /// connection to one of them gets no responders (or a timeout while the stream elects its
        /// leader). The same message id makes a retry after a timeout the same entry.
        static func publishOnceServed(
            _ connection: NATSConnection, _ loop: EventLoop, subject: String, id: String, bound: Duration = .seconds(30)
        ) throws -> (result: Result<PublishAck, NATSError>, onLoopThread: Bool) {
            let deadline = ContinuousClock.now + bound
            while true {
                let outcome = try publish(connection, loop, subject: subject, after: 0, id: id)
                guard case let .failure(error) = outcome.result, error.isNoResponders || error.isTimeout,
                    ContinuousClock.now < deadline
                else { return outcome }
                usleep(100_000)
            }
        }

        @Test func publishesAreOrderedPerSubjectDeduplicatedAndAckedOnTheLoopThread() throws {
            let cluster = try TestCluster()
            defer { try? cluster.down() }
            try EventLoop.enableThreadedAccess()
            try StreamProvisioning.ensureStream(.rooms(), servers: cluster.urls)
            try StreamProvisioning.ensureStream(.rooms(), servers: cluster.urls)  // idempotent

            let loop = try EventLoop(locking: true)
            let connection = try NATSConnection(servers: cluster.urls, loop: loop)
            defer { connection.close() }

            let lobby = "snapsync.room.lobby"
            let first = try Self.publishOnceServed(connection, loop, subject: lobby, id: "w1")
            #expect(first.onLoopThread)
            // The stream's first sequences are the salt's (snapsync.salt), one per proposal stored.
            let s1 = try first.result.get().sequence
            #expect(try first.result.get() == PublishAck(stream: "snapsync-rooms", sequence: s1, duplicate: false))

            // A node that has not seen w1 expects the subject to be empty: refused.
            let stale = try Self.publish(connection, loop, subject: lobby, after: 0, id: "w2")
            #expect(stale.onLoopThread)
            #expect(throws: NATSError.self) { try stale.result.get() }
            if case let .failure(error) = stale.result { #expect(error.isWrongLastSequence, "\(error)") }

            // w1 again (a client's retry through another node): the same entry, not a second one.
            let retry = try Self.publish(connection, loop, subject: lobby, after: 0, id: "w1")
            #expect(try retry.result.get() == PublishAck(stream: "snapsync-rooms", sequence: s1, duplicate: true))

            let second = try Self.publish(connection, loop, subject: lobby, after: s1, id: "w2")
            #expect(try second.result.get().sequence == s1 + 1)

            // Another room's subject has its own last sequence (none yet); the stream's is shared.
            let other = try Self.publish(connection, loop, subject: "snapsync.room.other", after: 0, id: "o1")
            #expect(try other.result.get().sequence == s1 + 2)

            // A message id still pending is refused up front, without a completion.
            try connection.publish(subject: lobby, payload: [], expectedLastSubjectSequence: s1 + 1, messageID: "w3") { _ in }
            #expect(throws: NATSError.self) {
                try connection.publish(subject: lobby, payload: [], expectedLastSubjectSequence: s1 + 1, messageID: "w3") { _ in }
            }
        }

        /// With two of three servers gone the stream has no quorum: the publish fails (JetStream has
        /// no leader to answer, so libnats reports no responders, or a timeout) and is never acked.
        @Test func withoutAQuorumAPublishFailsOnTheLoopThreadAndIsNeverAcked() throws {
            let cluster = try TestCluster()
            defer { try? cluster.down() }
            try EventLoop.enableThreadedAccess()
            try StreamProvisioning.ensureStream(.rooms(), servers: cluster.urls)
            let loop = try EventLoop(locking: true)
            // Connected to the first server only, so that the connection stays up when the others go.
            let connection = try NATSConnection(servers: [cluster.urls[0]], loop: loop)
            defer { connection.close() }
            let room = "snapsync.room.quorum"
            let s1 = try Self.publishOnceServed(connection, loop, subject: room, id: "q1").result.get().sequence
            #expect(s1 > 0)

            try cluster.kill(server: 1)
            try cluster.kill(server: 2)
            let refused = try Self.publish(connection, loop, subject: room, after: s1, id: "q2", timeout: .seconds(2))
            #expect(refused.onLoopThread)
            #expect(throws: NATSError.self) { try refused.result.get() }
        }
    }
}
