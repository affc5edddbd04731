import SnapSyncLoop
import Foundation
import Testing

@testable import SnapSyncCluster

extension RealNATSCluster {
    /// `JetStreamRoomLog.connect` with cluster mode's patience (`ClusterStartRetry`) against the
    /// real faults: servers paused so that JetStream has no quorum, and servers not running.
    /// Each test gives the servers back from the retry's first wait, so it is bounded by one
    /// attempt against the fault plus the cluster's recovery. (The daemon around it, systemd's
    /// messages and the start deadline: scripts/tests/test_cluster_start.py.)
    @Suite struct StartWhileNATSCannotServeTests {
        /// Collects the waits, and does `onFirst` at the first.
        final class Waits {
            var all: [ClusterStartRetry.Wait] = []
            let onFirst: () -> Void

            init(onFirst: @escaping () -> Void) { self.onFirst = onFirst }

            func retry() -> ClusterStartRetry {
                ClusterStartRetry(timeout: .seconds(120)) { wait in
                    self.all.append(wait)
                    if self.all.count == 1 { self.onFirst() }
                }
            }
        }

        /// Two of three servers paused: the one left has no meta leader ("JetStream system
        /// temporarily unavailable", or no answer in time). Once they run again the node connects
        /// and reads the stream's salt, the one it had before.
        @Test func connectWaitsWhileJetStreamHasNoQuorum() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let cluster = setup.cluster
            let salt = try #require(try StreamProvisioning.ensureStream(.rooms(), servers: cluster.urls).salt)
            try cluster.pause(server: 1)
            try cluster.pause(server: 2)
            defer {
                try? cluster.resume(server: 1)
                try? cluster.resume(server: 2)
            }
            let waits = Waits {
                try? cluster.resume(server: 1)
                try? cluster.resume(server: 2)
            }
            let log = try setup.connect(retry: waits.retry())
            #expect(log.salt == salt)
            #expect(!waits.all.isEmpty)
            #expect(waits.all.allSatisfy { $0.error.isTransientAtStart && $0.step == "stream snapsync-rooms" })
            #expect(try lastSequence(log, setup.loop, room: "lobby").get() == 0)
        }

        /// No server running (a node started before them, or all restarting): connections are
        /// refused. The servers started again on their stores serve the same stream.
        @Test func connectWaitsForServersStartedLater() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let cluster = setup.cluster
            let salt = try #require(try StreamProvisioning.ensureStream(.rooms(), servers: cluster.urls).salt)
            for index in 0..<3 { try cluster.kill(server: index) }
            // Gone once their ports refuse connections (the kill does not wait).
            let deadline = ContinuousClock.now + .seconds(10)
            for url in cluster.urls {
                while case .success = NATSServerProbe.info(url: url, timeout: .seconds(1)), ContinuousClock.now < deadline {
                    Thread.sleep(forTimeInterval: 0.05)
                }
            }
            var restarted: (any Error)?
            let waits = Waits {
                do { try cluster.up() } catch { restarted = error }
            }
            let log = try setup.connect(retry: waits.retry())
            #expect(restarted == nil, "\(String(describing: restarted))")
            #expect(log.salt == salt)
            #expect(waits.all.first?.error.operation == "natsConnection_Connect")
            #expect(try lastSequence(log, setup.loop, room: "lobby").get() == 0)
        }
    }
}
