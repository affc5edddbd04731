import Testing
import SnapSyncModel
import SnapSyncWire

// The daemon's two global memory budgets: unsent output of all connections together
// (`--max-output-total-bytes`) and the bytes of all rooms together (`--max-room-total-bytes`,
// REJECT server_full). README, "Memory a client can make the daemon hold", adds them up.

extension ServerIntegration {
    @Suite struct MemoryBudget {
        /// 64 connections that never read each JOIN a 1.9 MiB room: 122 MiB of SNAPSHOT replies,
        /// 8× the 16 MiB output budget, each under the per-connection cap. The replies share one
        /// encoding of the room, which the budget counts once: every JOIN is answered, and the
        /// daemon's memory grows by about one copy, not 64.
        @Test func aJoinStormOfOneRoomSharesOneEncoding() throws {
            let daemon = try DaemonProcess.start(arguments: [
                "--max-frame-bytes", "4MiB", "--max-output-bytes", "8MiB", "--max-output-total-bytes", "16MiB",
            ])
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon)
            try writer.mustMutate("big", [.appendSections([.named("s")])])
            let payload = String(repeating: "p", count: 60_000)
            for batch in 0..<2 {
                try writer.mustMutate("big", [.appendItems((0..<16).map { .named("i\(batch)-\($0)", payload) }, toSection: "s")])
            }
            let rssBefore = try #require(residentBytes(of: daemon.pid))
            let storm = try (0..<64).map { _ in try RawClient.ready(daemon, receiveBuffer: 4096) }
            let framesBefore = try #require(try writer.stats()["frames_in"])
            for client in storm { try client.send(.join(requestID: 1, room: "big", resume: nil)) }
            // Every JOIN handled (64 JOINs and the STATS asking).
            #expect(try waitUntil { try writer.stats()["frames_in"]! >= framesBefore + 65 })
            let rssAfter = try #require(residentBytes(of: daemon.pid))
            #expect(try writer.stats()["slow_consumer_disconnects"] == 0)
            for client in storm.prefix(4) {
                let joined = try client.state(of: "big")
                #expect(joined.snapshot.numberOfItems == 32)
            }
            // Generous: one copy of the room plus 24 MiB of allocator slack; 64 copies are 122 MiB.
            #expect(rssAfter - rssBefore < (2 << 20) + (24 << 20), "RSS grew from \(rssBefore) to \(rssAfter) bytes")
        }

        /// 16 connections that never read each JOIN a different 150 KB room: 2.3 MiB of distinct
        /// SNAPSHOTs against a 1 MiB output budget, each under the per-connection cap. The
        /// largest queues are cut off, and a client that reads keeps being served.
        @Test func aJoinStormOfManyRoomsIsCutToTheOutputBudget() throws {
            let budget = 1 << 20
            let daemon = try DaemonProcess.start(arguments: [
                "--max-frame-bytes", "256KiB", "--max-output-bytes", "256KiB", "--max-output-total-bytes", "\(budget)",
            ])
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon)
            let payload = String(repeating: "p", count: 50_000)
            let rooms = (0..<16).map { "r\($0)" }
            for room in rooms {
                try writer.mustMutate(
                    room,
                    [
                        .appendSections([.named("s")]),
                        .appendItems((0..<3).map { .named("i\($0)", payload) }, toSection: "s"),
                    ])
            }
            let reader = try RawClient.ready(daemon)
            let chat = try reader.state(of: "chat")
            let rssBefore = try #require(residentBytes(of: daemon.pid))

            let storm = try rooms.map { _ in try RawClient.ready(daemon, receiveBuffer: 4096) }
            let framesBefore = try #require(try writer.stats()["frames_in"])
            for (client, room) in zip(storm, rooms) { try client.send(.join(requestID: 1, room: room, resume: nil)) }
            #expect(try waitUntil { try writer.stats()["frames_in"]! >= framesBefore + UInt64(storm.count) + 1 })
            let version = try writer.mustMutate("chat", [.appendSections([.named("after")])])
            let (diff, _) = try reader.receive(until: { if case .diff = $0 { true } else { false } })
            guard case .diff("chat", _, let diffVersion, _, _) = diff else { Issue.record("expected DIFF, got \(summary(diff))"); return }
            #expect(diffVersion == version && version == chat.version + 1)
            let rssAfter = try #require(residentBytes(of: daemon.pid))

            var answered = 0, toldSlow = 0, dropped = 0
            for (index, client) in storm.enumerated() {
                do {
                    switch try client.receive() {
                    case .snapshot(1, rooms[index], _, _, _, _, let snapshot, _) where snapshot.numberOfItems == 3: answered += 1
                    case .error(let code, let message):
                        #expect(ErrorCode(rawValue: code) == .slowConsumer && message.contains("--max-output-total-bytes"), "\(message)")
                        toldSlow += 1
                    case let other: Issue.record("unexpected \(summary(other))")
                    }
                } catch RawClientError.closed {
                    dropped += 1  // closed in the middle of its SNAPSHOT
                } catch {
                    Issue.record("storm connection \(index): \(error)")
                }
            }
            // At most 7 SNAPSHOTs of 150 KB fit in 1 MiB; the rest were cut, most with the ERROR.
            #expect(answered + toldSlow + dropped == storm.count)
            #expect(answered <= 7 && toldSlow >= 4, "answered \(answered), ERROR \(toldSlow), dropped \(dropped)")
            #expect(try writer.stats()["slow_consumer_disconnects"] == UInt64(toldSlow + dropped))
            #expect(daemon.waitForLog("output budget exceeded"))
            // Generous: the budget plus 32 MiB of allocator slack.
            #expect(rssAfter - rssBefore < budget + (32 << 20), "RSS grew from \(rssBefore) to \(rssAfter) bytes")
        }

        /// Rooms fill `--max-room-total-bytes`: the write that could pass it gets REJECT
        /// server_full naming its room, which stays exactly as it was; a retried write is still
        /// answered by its write id, and a write that fits is still applied.
        @Test func aWritePastTheRoomBudgetIsRefusedAndChangesNothing() throws {
            let daemon = try DaemonProcess.start(arguments: [
                "--max-frame-bytes", "1MiB", "--history-bytes", "64KiB", "--max-room-total-bytes", "2MiB",
            ])
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon)
            let payload = String(repeating: "p", count: 50_000)
            func fill(_ room: String, _ tag: String) -> [SnapshotOperation] {
                [.appendItems((0..<8).map { .named("\(tag)-\($0)", payload) }, toSection: "s")]
            }
            try writer.mustMutate("r0", [.appendSections([.named("s")])], writeID: Array("first".utf8))
            // 400 KB a write: the 2 MiB budget takes four, and refuses the one that could pass it.
            var refused: (room: String, message: String)?
            for index in 0..<10 where refused == nil {
                let room = "r\(index)"
                if index > 0 { try writer.mustMutate(room, [.appendSections([.named("s")])]) }
                let (answer, _) = try writer.mutate(room, fill(room, "a"))
                switch answer {
                case .ack: continue
                case .reject(_, let code, let opIndex, _, let message):
                    #expect(ErrorCode(rawValue: code) == .serverFull && opIndex == nil, "\(message)")
                    refused = (room, message)
                default: Issue.record("unexpected \(summary(answer))")
                }
            }
            let (room, message) = try #require(refused, "no write was refused")
            #expect(message.contains("room \(room)") && message.contains("--max-room-total-bytes"), "\(message)")

            // An existing, full room: the refused write leaves it exactly as it was.
            let before = try writer.state(of: "r0")
            let (answer, _) = try writer.mutate("r0", fill("r0", "b"))
            guard case .reject(_, let code, _, _, _) = answer else { Issue.record("expected REJECT, got \(summary(answer))"); return }
            #expect(ErrorCode(rawValue: code) == .serverFull)
            let after = try writer.state(of: "r0")
            #expect(after.version == before.version && after.digest == before.digest)
            // A retry is answered by its write id first (PROTOCOL.md §7, order of checks).
            guard case .ack(_, _, 1) = try writer.mutate("r0", [.appendSections([.named("s")])], writeID: Array("first".utf8)).answer else {
                Issue.record("a retried write must get the ACK of its original version"); return
            }
            // A small write still fits.
            #expect(try writer.mustMutate("r0", [.appendItems([.named("small")], toSection: "s")]) == before.version + 1)
        }

        /// Rooms recovered at start count toward the budget as written ones do.
        @Test func recoveredRoomsCountTowardTheRoomBudget() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            // Rooms that sleep (docs/persistence.md) are not resident after a restart and count
            // only once woken; this is about the rooms a start loads.
            let flags = ["--max-frame-bytes", "1MiB", "--history-bytes", "64KiB", "--max-room-total-bytes", "2MiB", "--room-idle", "off"]
            let payload = String(repeating: "p", count: 50_000)
            do {
                let daemon = try dir.start(flags)
                defer { daemon.stop() }
                let writer = try RawClient.ready(daemon)
                // Four rooms of 400 KB: 1.6 MB of the 2 MiB.
                for index in 0..<4 {
                    try writer.mustMutate(
                        "r\(index)",
                        [
                            .appendSections([.named("s")]),
                            .appendItems((0..<8).map { .named("a-\($0)", payload) }, toSection: "s"),
                        ])
                }
            }
            let daemon = try dir.start(flags)
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon)
            let (answer, _) = try writer.mutate(
                "r4",
                [
                    .appendSections([.named("s")]),
                    .appendItems((0..<8).map { .named("a-\($0)", payload) }, toSection: "s"),
                ])
            guard case .reject(_, let code, _, _, let message) = answer else { Issue.record("expected REJECT, got \(summary(answer))"); return }
            #expect(ErrorCode(rawValue: code) == .serverFull, "\(message)")
        }
    }
}
