import Foundation
import Testing
import SnapSyncModel
import SnapSyncWire

extension DaemonDurability {
    /// Rooms that end, with the real daemon and kill -9 (PROTOCOL.md §9, docs/persistence.md
    /// "Room ends and time-to-live"): a dropped or expired room never comes back, an old resume
    /// position gets a resync, a TTL survives a crash, and the dropped room's files go.
    @Suite struct DurabilityLifecycleTests {
        func files(_ dir: DurableDirectory, _ prefix: String) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: dir.data)) ?? []).filter { $0.hasPrefix(prefix) }.sorted()
        }

        @Test func aDroppedRoomStaysDroppedAfterKill9() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start()
            let writer = try RawClient.ready(daemon)
            let member = try RawClient.ready(daemon)
            for n in 0..<3 {
                try writer.mustMutate("doc", (n == 0 ? [.appendSections([.named("s")])] : []) + [.appendItems([.named("i\(n)")], toSection: "s")])
            }
            guard case .snapshot(_, _, let epoch, 3, _, _, _, _) = try member.join("doc") else {
                Issue.record("the member did not get the room at version 3")
                return
            }
            let (answer, _) = try writer.request { .drop(requestID: $0, room: "doc") }
            #expect(answer == .ack(requestID: answer.requestID ?? 0, epoch: epoch, version: 3))
            let left = try member.receive(timeout: 60)
            #expect(left == .left(room: "doc", code: ErrorCode.roomDeleted.rawValue, message: "room doc was deleted"))
            #expect(try writer.stats()["rooms_deleted"] == 1)
            daemon.kill()

            let restarted = try dir.start()
            defer { restarted.stop() }
            let reader = try RawClient.ready(restarted)
            #expect(try reader.stats()["rooms"] == 0)
            // The old position: a resync of a new, empty room, never a CATCHUP.
            let resumed = try reader.join("doc", resume: RoomPosition(epoch: epoch, version: 3))
            guard case .snapshot(_, _, let newEpoch, let version, let reason, _, let snapshot, _) = resumed else {
                Issue.record("expected SNAPSHOT, got \(summary(resumed))")
                return
            }
            #expect(reason == .resync && newEpoch != epoch && version == 0 && snapshot.isEmpty)
        }

        /// A room given a TTL expires with no member and no write, also when the daemon was
        /// killed in between (the TTL is on disk; the idle time starts again at the restart),
        /// and its end survives the next kill -9.
        @Test func aTTLOutlivesKill9AndTheExpiryIsDurable() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start()
            let client = try RawClient.ready(daemon)
            try client.mustMutate("short", [.appendSections([.named("s")])])
            try client.mustMutate("long", [.appendSections([.named("s")])])
            let (ack, _) = try client.request { .setTTL(requestID: $0, room: "short", seconds: 1) }
            #expect(ack.type == .ack)
            let (longAck, _) = try client.request { .setTTL(requestID: $0, room: "long", seconds: 3600) }
            #expect(longAck.type == .ack)
            let short = try client.state(of: "short")
            try client.send(.leave(requestID: client.requestID(), room: "short"))
            daemon.kill()

            let second = try dir.start()
            let watcher = try RawClient.ready(second)
            #expect(waitUntil(timeout: 30) { (try? watcher.stats()["rooms_expired"]) == 1 }, "the TTL came back from disk")
            #expect(try watcher.stats()["rooms"] == 1, "long is still there")
            second.kill()

            let third = try dir.start()
            defer { third.stop() }
            let reader = try RawClient.ready(third)
            let fresh = try reader.state(of: "short")
            #expect(fresh.epoch != short.epoch && fresh.version == 0 && fresh.snapshot.isEmpty)
            #expect(try reader.state(of: "long").version == 1)
        }

        /// `--room-ttl` applies to rooms that set none.
        @Test func theDefaultTTLExpiresRoomsThatSetNone() throws {
            let daemon = try DaemonProcess.start(arguments: ["--room-ttl", "1s"])
            defer { daemon.stop() }
            let client = try RawClient.ready(daemon)
            try client.mustMutate("a", [.appendSections([.named("s")])])
            let (keep, _) = try client.request { .setTTL(requestID: $0, room: "kept", seconds: 0) }
            #expect(keep.type == .ack)
            #expect(waitUntil(timeout: 30) { (try? client.stats()["rooms_expired"]) == 1 })
            #expect(try client.stats()["rooms"] == 1)
        }

        /// Nothing of a dropped room stays in the data directory: its checkpoint goes, and the
        /// segments holding its writes and its tombstone are switched out and deleted once no
        /// other room needs them (here, a few one-second ticks with `--checkpoint-interval 1s`).
        @Test func aDroppedRoomLeavesNoTraceOnDisk() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start(["--checkpoint-interval", "1s"])
            defer { daemon.stop() }
            let client = try RawClient.ready(daemon)
            let name = "dropped-room-7f3a"
            func mentions() -> [String] {
                files(dir, "").filter { Data(readBytes(dir.data + "/" + $0)).range(of: Data(name.utf8)) != nil }
            }
            for n in 0..<20 {
                try client.mustMutate(
                    name,
                    (n == 0 ? [.appendSections([.named("s")])] : []) + [
                        .appendItems([.named("item-\(n)", String(repeating: "x", count: 1000))], toSection: "s")
                    ])
            }
            #expect(waitUntil(timeout: 30) { files(dir, "ckpt-").count == 1 }, "the room was checkpointed: \(files(dir, ""))")
            try client.mustMutate(name, [.appendItems([.named("after-the-checkpoint")], toSection: "s")])
            try client.mustMutate("other", [.appendSections([.named("s")])])
            #expect(!mentions().isEmpty)
            let (answer, _) = try client.request { .drop(requestID: $0, room: name) }
            #expect(answer.type == .ack)
            #expect(waitUntil(timeout: 30) { mentions().isEmpty }, "still named in \(mentions())")
            #expect(files(dir, "ckpt-").count == 1, "other's checkpoint only: \(files(dir, ""))")
        }
    }
}
