import Testing
import SnapSyncModel
import SnapSyncWire

extension DaemonDurability {
    /// The quotas on new rooms in the real daemon (docs/persistence.md, "Quotas on new rooms"):
    /// the rooms it stores are counted awake, asleep and across a restart; the room refused is
    /// left as it was, and the rooms that exist take writes whatever the quotas.
    @Suite struct DurabilityRoomQuotaTests {
        static func isQuotaExceeded(_ answer: Message) -> Bool {
            if case .reject(_, ErrorCode.quotaExceeded.rawValue, _, _, _) = answer { true } else { false }
        }

        @Test func storedRoomsAreCountedAsleepAndAfterARestart() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let arguments = ["--max-stored-rooms", "3", "--room-idle", "1s", "--fsync", "no"]
            var daemon = try dir.start(arguments)
            var client = try RawClient.ready(daemon)
            for room in ["a", "b", "c"] { try client.mustMutate(room, [.appendSections([SnapshotElement("s")])]) }
            #expect(try waitUntil(timeout: 60) { try client.stats()["rooms_sleeping"] == 3 }, "the rooms go to sleep")
            #expect(Self.isQuotaExceeded(try client.mutate("d", [.appendSections([SnapshotElement("s")])]).answer))
            #expect(try client.stats()["rooms_stored"] == 3)
            _ = daemon.stop()

            daemon = try dir.start(arguments)
            defer { _ = daemon.stop() }
            client = try RawClient.ready(daemon)
            #expect(Self.isQuotaExceeded(try client.mutate("d", [.appendSections([SnapshotElement("s")])]).answer))
            // A sleeping room is woken and written; the refused one never held anything.
            try client.mustMutate("a", [.appendSections([SnapshotElement("t")])])
            let snapshot = try client.join("d")
            guard case .snapshot(_, _, _, 0, _, _, let content, _) = snapshot else {
                Issue.record("d: \(summary(snapshot))")
                return
            }
            #expect(content.numberOfSections == 0)
            let stats = try client.stats()
            #expect(stats["rooms_stored"] == 3)
            #expect(stats["rooms_refused"] == 1)
        }

        /// One client name (no authentication) creates at most its rooms per minute.
        @Test func aClientCreatesAtMostItsRoomsPerMinute() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start(["--room-creations-per-minute", "4", "--fsync", "no"])
            defer { _ = daemon.stop() }
            let client = try RawClient.ready(daemon)
            for room in 0..<4 { try client.mustMutate("r\(room)", [.appendSections([SnapshotElement("s")])]) }
            let refused = try client.mutate("r4", [.appendSections([SnapshotElement("s")])]).answer
            #expect(Self.isQuotaExceeded(refused), "\(summary(refused))")
            try client.mustMutate("r0", [.appendSections([SnapshotElement("t")])])
            #expect(daemon.waitForLog("new room refused (quota_exceeded)"), "the refusal is logged")
        }
    }
}
