import Testing
import SnapSyncModel
import SnapSyncWire

// Resume on the real daemon (PROTOCOL.md §9): a JOIN with a position inside the room's history
// gets CATCHUP and exactly the DIFFs it missed, the very ones live members got; any other
// position gets SNAPSHOT resync.

extension ServerIntegration {
    @Suite struct Resume {
        /// Writes `count` versions to `room` while `member` records the DIFFs.
        private func write(_ count: Int, to room: String, by writer: RawClient, seenBy member: RawClient) throws -> [Message] {
            var diffs: [Message] = []
            for i in 0..<count {
                try writer.mustMutate(room, [.appendSections([.named("s\(i)", "payload \(i)")])])
                diffs.append(try member.receive())
            }
            return diffs
        }

        @Test func aPositionInsideHistoryGetsCatchupAndTheExactDiffs() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon), member = try RawClient.ready(daemon)
            let start = try member.state(of: "r")
            let diffs = try write(10, to: "r", by: writer, seenBy: member)
            let resumer = try RawClient.ready(daemon)
            let answer = try resumer.join("r", resume: .init(epoch: start.epoch, version: 3))
            guard case .catchup(_, "r", start.epoch, 3, 10, _) = answer else { Issue.record("expected CATCHUP 3...10, got \(summary(answer))"); return }
            let caughtUp = try (0..<7).map { _ in try resumer.receive() }
            #expect(caughtUp == Array(diffs[3...]), "versions 4...10, byte for byte as the live member got them")
            #expect(resumer.isQuiet(for: 0.2))
            // And it is a member now: the next DIFF arrives.
            try writer.mustMutate("r", [.appendSections([.named("after")])])
            guard case .diff(_, _, 11, _, _) = try resumer.receive() else { Issue.record("no live DIFF after the catch-up"); return }
        }

        @Test func aCurrentPositionGetsAnEmptyCatchup() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon), member = try RawClient.ready(daemon)
            let start = try member.state(of: "r")
            _ = try write(2, to: "r", by: writer, seenBy: member)
            let answer = try RawClient.ready(daemon).join("r", resume: .init(epoch: start.epoch, version: 2))
            guard case .catchup(_, _, _, 2, 2, _) = answer else { Issue.record("expected CATCHUP 2...2, got \(summary(answer))"); return }
        }

        @Test func aPositionOlderThanHistoryGetsResync() throws {
            let daemon = try DaemonProcess.start(arguments: ["--history-count", "4"])
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon), member = try RawClient.ready(daemon)
            let start = try member.state(of: "r")
            _ = try write(10, to: "r", by: writer, seenBy: member)
            let current = try RawClient.ready(daemon).state(of: "r")
            let resumer = try RawClient.ready(daemon)
            // History keeps versions 7...10: position 6 is the oldest that can catch up.
            guard case .catchup(_, _, _, 6, 10, _) = try resumer.join("r", resume: .init(epoch: start.epoch, version: 6)) else {
                Issue.record("position 6 is inside the history")
                return
            }
            _ = try (0..<4).map { _ in try resumer.receive() }
            let answer = try RawClient.ready(daemon).join("r", resume: .init(epoch: start.epoch, version: 5))
            guard case .snapshot(_, _, let epoch, let version, .resync, let digest, let snapshot, _) = answer else {
                Issue.record("expected SNAPSHOT resync, got \(summary(answer))")
                return
            }
            #expect(epoch == start.epoch && version == 10)
            #expect(digest == current.digest && snapshot == current.snapshot)
        }

        @Test func anotherEpochOrAPositionAheadGetsResync() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon), member = try RawClient.ready(daemon)
            let start = try member.state(of: "r")
            _ = try write(3, to: "r", by: writer, seenBy: member)
            for position in [RoomPosition(epoch: start.epoch &+ 1, version: 3), .init(epoch: start.epoch, version: 4)] {
                let answer = try RawClient.ready(daemon).join("r", resume: position)
                guard case .snapshot(_, _, start.epoch, 3, .resync, _, let snapshot, _) = answer else {
                    Issue.record("\(position): expected SNAPSHOT resync at version 3, got \(summary(answer))")
                    continue
                }
                #expect(snapshot.numberOfSections == 3)
            }
            // A room the daemon has never seen is created; a resume position there is from
            // another epoch by definition.
            let answer = try RawClient.ready(daemon).join("new", resume: .init(epoch: 5, version: 5))
            guard case .snapshot(_, "new", _, 0, .resync, _, let empty, _) = answer, empty.isEmpty else {
                Issue.record("expected SNAPSHOT resync of an empty room, got \(summary(answer))")
                return
            }
        }
    }
}
