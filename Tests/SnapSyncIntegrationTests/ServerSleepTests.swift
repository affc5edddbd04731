import Testing
import SnapSyncModel
import SnapSyncWire

extension ServerIntegration {
    /// Sleeping rooms in the real daemon: with `--room-idle 1s`, memberless rooms leave
    /// memory (STATS `rooms_sleeping`, polled, never timed) and come back on the next request
    /// with the same state, history and write ids, also after a restart.
    @Suite struct ServerSleepTests {
        @Test func idleRoomsSleepAndWakeWithTheirStateAcrossARestart() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let arguments = ["--room-idle", "1s", "--fsync", "no"]
            var daemon = try dir.start(arguments)
            defer { daemon.kill() }
            var client = try RawClient.ready(daemon)
            try client.mustMutate("a", [.appendSections([.named("s")]), .appendItems([.named("x", "1")], toSection: "s")], writeID: [1])
            try client.mustMutate("a", [.appendItems([.named("y", "2")], toSection: "s")], writeID: [2])
            try client.mustMutate("b", [.appendSections([.named("s")])], writeID: [3])
            let a = try client.state(of: "a")
            _ = try client.state(of: "kept")  // a member: it never sleeps
            _ = try client.request { .leave(requestID: $0, room: "a") }

            #expect(try waitUntil(timeout: 60) { try client.stats()["rooms_sleeping"] == 2 }, "a and b go to sleep")
            let asleep = try client.stats()
            #expect(asleep["rooms"] == 1 && (asleep["rooms_evicted"] ?? 0) >= 2 && asleep["rooms_woken"] == 0)

            // Woken by a JOIN: the same epoch, version and digest; by a retried write: its ACK.
            let woken = try client.state(of: "a")
            #expect(woken.epoch == a.epoch && woken.version == 2 && woken.digest == a.digest && woken.snapshot == a.snapshot)
            let (retry, _) = try client.mutate("b", [.appendSections([.named("s")])], writeID: [3])
            guard case .ack(_, _, 1) = retry else {
                Issue.record("a retried write after a sleep must get its original ACK: \(summary(retry))")
                return
            }
            #expect(try client.stats()["rooms_woken"] == 2)

            #expect(daemon.stop() == 0)
            daemon = try dir.start(arguments)
            client = try RawClient.ready(daemon)
            let resumed = try client.join("a", resume: RoomPosition(epoch: a.epoch, version: 1))
            guard case .catchup(_, "a", a.epoch, 1, 2, _) = resumed else {
                Issue.record("CATCHUP across a sleep and a restart expected: \(summary(resumed))")
                return
            }
            #expect(try client.state(of: "b").version == 1)
        }
    }
}
