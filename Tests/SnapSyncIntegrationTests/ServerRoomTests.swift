import Testing
import SnapSyncModel
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

// Rooms on the real daemon: fan-out, atomic validation, compare-and-set, idempotent retries,
// REPLACE, LEAVE and the room limits (PROTOCOL.md §7, §9, §10).

extension ServerIntegration {
    @Suite struct Rooms {
        @Test func twoClientsSeeEachOthersWritesInTheSameOrder() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let a = try RawClient.ready(daemon), b = try RawClient.ready(daemon)
            try a.mustMutate("chat", [.appendSections([.named("s")])])
            let start = try a.state(of: "chat")
            guard case .snapshot = try b.join("chat") else { Issue.record("B could not join"); return }
            // Both pipeline 20 writes each, interleaved on the wire.
            let rounds = 20
            for i in 0..<rounds {
                try a.send(
                    .mutate(
                        requestID: 1000 + UInt64(i), room: "chat", expectedVersion: nil, writeID: [],
                        ops: [.appendItems([.named("a\(i)")], toSection: "s")]))
                try b.send(
                    .mutate(
                        requestID: 2000 + UInt64(i), room: "chat", expectedVersion: nil, writeID: [],
                        ops: [.appendItems([.named("b\(i)")], toSection: "s")]))
            }
            var streams: [[Message]] = []
            for (client, base) in [(a, UInt64(1000)), (b, UInt64(2000))] {
                var diffs: [Message] = [], acks: [UInt64: UInt64] = [:]
                var mine = Set<UInt64>()
                while acks.count < rounds || diffs.count < 2 * rounds {
                    let message = try client.receive()
                    switch message {
                    case .diff(_, _, let version, _, _):
                        diffs.append(message)
                        mine.insert(version)
                    case .ack(let id, _, let version):
                        #expect(id >= base && id < base + UInt64(rounds))
                        // The writer's own DIFF came before its ACK.
                        #expect(mine.contains(version), "ACK \(version) before its DIFF")
                        acks[id] = version
                    default:
                        Issue.record("unexpected \(summary(message))")
                    }
                }
                streams.append(diffs)
            }
            // Every version exactly once, in order, and both saw the same sequence.
            let versions = streams[0].map { message -> UInt64 in
                if case .diff(_, _, let version, _, _) = message { return version } else { return 0 }
            }
            #expect(versions == Array((start.version + 1)...(start.version + UInt64(2 * rounds))))
            #expect(streams[0] == streams[1])
            // Replaying the DIFFs on the first snapshot gives the room's state.
            var replica = start.snapshot
            for case .diff(_, _, _, let ops, _) in streams[0] { try replica.apply(ops, limits: .unlimited) }
            let fresh = try RawClient.ready(daemon).state(of: "chat")
            #expect(replica == fresh.snapshot)
            #expect(replica.digest == fresh.digest)
            #expect(fresh.version == start.version + UInt64(2 * rounds))
            #expect(fresh.snapshot.numberOfItems == 2 * rounds)
        }

        /// Each batch's first op is valid, so a REJECT also proves the batch was not half applied.
        @Test func everyValidationErrorReachesTheWriterAndChangesNothing() throws {
            let daemon = try DaemonProcess.start(arguments: [
                "--max-identifier-bytes", "16", "--max-payload-bytes", "64", "--max-items-per-room", "6",
                "--max-sections-per-room", "4", "--max-frame-bytes", "64KiB", "--max-snapshot-bytes", "512",
            ])
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon), watcher = try RawClient.ready(daemon)
            try writer.mustMutate(
                "r",
                [
                    .appendSections([.named("s1"), .named("s2")]),
                    .appendItems([.named("i1"), .named("i2")], toSection: "s1"),
                ])
            let before = try watcher.state(of: "r")
            let valid = SnapshotOperation.appendItems([.named("new")], toSection: "s2")
            let long = String(repeating: "x", count: 17)
            let p64 = String(repeating: "p", count: 64)
            let cases: [(ops: [SnapshotOperation], code: ErrorCode, index: UInt64?, identifier: SnapshotIdentifier?)] = [
                ([valid, .appendSections([.named("s1")])], .duplicateSection, 1, "s1"),
                ([valid, .appendItems([.named("i1")], toSection: "s2")], .duplicateItem, 1, "i1"),
                ([valid, .deleteSections(["nope"])], .sectionNotFound, 1, "nope"),
                ([valid, .deleteItems(["nope"])], .itemNotFound, 1, "nope"),
                ([valid, .insertSections([.named("s9")], .before("nope"))], .anchorSectionNotFound, 1, "nope"),
                ([valid, .insertItems([.named("i9")], .after("nope"))], .anchorItemNotFound, 1, "nope"),
                ([valid, .deleteAllItems, .appendItems([.named("i9")], toSection: nil)], .noSections, 2, nil),
                ([valid, .moveSection("s1", .before("s1"))], .anchorIsSelf, 1, "s1"),
                ([valid, .appendItems([.named(long)], toSection: "s1")], .identifierTooLong, 1, SnapshotIdentifier(long)),
                ([valid, .updateItems([.named("i1", String(repeating: "p", count: 65))], .reload)], .payloadTooLarge, 1, "i1"),
                ([valid, .appendItems((0..<4).map { .named("many\($0)") }, toSection: "s1")], .tooManyItems, 1, nil),
                ([valid, .appendSections([.named("s3"), .named("s4"), .named("s5")])], .tooManySections, 1, nil),
                // 344 bytes of encoding before the last op, 548 after it: over 512.
                (
                    [
                        valid, .updateSections([.named("s1", p64), .named("s2", p64)]),
                        .updateItems([.named("i1", p64), .named("i2", p64), .named("new", p64)], .reload),
                        .appendItems([.named("n1", p64), .named("n2", p64), .named("n3", p64)], toSection: "s1"),
                    ],
                    .snapshotTooLarge, 3, nil
                ),
            ]
            for (ops, code, index, identifier) in cases {
                let (answer, skipped) = try writer.mutate("r", ops)
                #expect(skipped.isEmpty)
                guard case .reject(_, let raw, let opIndex, let id, let message) = answer else {
                    Issue.record("\(code.name): expected REJECT, got \(summary(answer))")
                    continue
                }
                #expect(ErrorCode(rawValue: raw) == code, "expected \(code.name), got \(raw): \(message)")
                #expect(opIndex == index, "\(code.name) op_index")
                #expect(id == identifier, "\(code.name) identifier")
                #expect(!message.isEmpty)
            }
            // Nothing changed: same version, same digest, and the member got no DIFF.
            let after = try RawClient.ready(daemon).state(of: "r")
            #expect(after.version == before.version)
            #expect(after.digest == before.digest)
            #expect(after.epoch == before.epoch)
            #expect(watcher.isQuiet(for: 0.2))
            // The writer's connection is still fine.
            #expect(try writer.mustMutate("r", [valid]) == before.version + 1)
        }

        @Test func expectedVersionMakesAWriteCompareAndSet() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let client = try RawClient.ready(daemon)
            try client.mustMutate("cas", [.appendSections([.named("s")])])
            let (stale, _) = try client.mutate("cas", [.appendSections([.named("t")])], expectedVersion: 0)
            guard case .reject(_, let code, nil, nil, let message) = stale else { Issue.record("expected REJECT, got \(summary(stale))"); return }
            #expect(ErrorCode(rawValue: code) == .versionMismatch)
            #expect(message.contains("version 1"), "the message names the current version: \(message)")
            let (fresh, _) = try client.mutate("cas", [.appendSections([.named("t")])], expectedVersion: 1)
            guard case .ack(_, _, 2) = fresh else { Issue.record("expected ACK 2, got \(summary(fresh))"); return }
        }

        @Test func aRetriedWriteIDIsAcknowledgedOnceAndAppliedOnce() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon), member = try RawClient.ready(daemon)
            _ = try member.join("idem")
            let id: [UInt8] = Array("0123456789abcdef".utf8)
            let first = try writer.mustMutate("idem", [.appendSections([.named("s")])], writeID: id)
            try writer.mustMutate("idem", [.appendSections([.named("t")])])
            let (retry, _) = try writer.mutate("idem", [.appendSections([.named("s")])], writeID: id)
            guard case .ack(_, _, let version) = retry else { Issue.record("expected ACK, got \(summary(retry))"); return }
            #expect(version == first)
            // The member saw exactly two DIFFs, and the room is at version 2.
            let diffs = try (0..<2).map { _ in try member.receive() }
            #expect(diffs.allSatisfy { if case .diff = $0 { true } else { false } })
            #expect(member.isQuiet(for: 0.2))
            #expect(try writer.state(of: "idem").version == 2)
        }

        @Test func replaceSendsOneDiffAndAnEqualReplaceChangesNothing() throws {
            let daemon = try DaemonProcess.start(arguments: ["--max-identifier-bytes", "8"])
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon), member = try RawClient.ready(daemon)
            try writer.mustMutate("doc", [.appendSections([.named("a"), .named("b")]), .appendItems([.named("x"), .named("y")], toSection: "a")])
            let before = try member.state(of: "doc")
            let target = try RoomSnapshot([
                (SnapshotElement.named("b", "B"), [SnapshotElement.named("y"), SnapshotElement.named("z")]), (SnapshotElement.named("c"), []),
            ])
            let (answer, _) = try writer.request { .replace(requestID: $0, room: "doc", expectedVersion: before.version, writeID: [], snapshot: target) }
            guard case .ack(_, _, let version) = answer else { Issue.record("expected ACK, got \(summary(answer))"); return }
            #expect(version == before.version + 1)
            guard case .diff(_, _, version, let ops, _) = try member.receive() else { Issue.record("expected one DIFF"); return }
            var replica = before.snapshot
            try replica.apply(ops, limits: .unlimited)
            #expect(replica == target)
            // The same content again: ACK at the same version, no DIFF.
            let (again, _) = try writer.request { .replace(requestID: $0, room: "doc", expectedVersion: nil, writeID: [], snapshot: target) }
            guard case .ack(_, _, version) = again else { Issue.record("expected ACK \(version), got \(summary(again))"); return }
            #expect(member.isQuiet(for: 0.2))
            // A REPLACE breaking a content limit is a REJECT, and the connection goes on.
            let bad = try RoomSnapshot([(SnapshotElement.named("much-too-long"), [])], limits: .unlimited)
            let (refused, _) = try writer.request { .replace(requestID: $0, room: "doc", expectedVersion: nil, writeID: [], snapshot: bad) }
            guard case .reject(_, let code, _, let identifier, _) = refused else { Issue.record("expected REJECT, got \(summary(refused))"); return }
            #expect(ErrorCode(rawValue: code) == .identifierTooLong)
            #expect(identifier == "much-too-long")
            #expect(try writer.state(of: "doc").snapshot == target)
        }

        @Test func anEmptyBatchIsAcknowledgedWithoutANewVersion() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let client = try RawClient.ready(daemon)
            _ = try client.join("quiet")
            try client.mustMutate("quiet", [.appendSections([.named("s")])])
            let (answer, skipped) = try client.mutate("quiet", [])
            #expect(skipped.isEmpty)  // version 1's DIFF came before its ACK, read by mustMutate
            guard case .ack(_, _, 1) = answer else { Issue.record("expected ACK 1, got \(summary(answer))"); return }
            #expect(client.isQuiet(for: 0.2))
        }

        @Test func leaveStopsTheDiffsAndLeavingTwiceIsRejected() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon), member = try RawClient.ready(daemon)
            _ = try member.join("l")
            try writer.mustMutate("l", [.appendSections([.named("s")])])
            let (left, skipped) = try member.request { .leave(requestID: $0, room: "l") }
            guard case .ack(_, _, 1) = left else { Issue.record("expected ACK 1, got \(summary(left))"); return }
            #expect(skipped.count == 1)
            try writer.mustMutate("l", [.appendSections([.named("t")])])
            #expect(member.isQuiet(for: 0.2))
            let (again, _) = try member.request { .leave(requestID: $0, room: "l") }
            guard case .reject(_, let code, _, _, _) = again else { Issue.record("expected REJECT, got \(summary(again))"); return }
            #expect(ErrorCode(rawValue: code) == .notJoined)
        }

        @Test func roomLimitsAndNamesAreEnforced() throws {
            let daemon = try DaemonProcess.start(arguments: ["--max-rooms", "2", "--max-rooms-per-connection", "1"])
            defer { daemon.stop() }
            let a = try RawClient.ready(daemon), b = try RawClient.ready(daemon)
            guard case .snapshot = try a.join("one") else { Issue.record("first room"); return }
            func rejection(_ answer: Message) -> ErrorCode? {
                if case .reject(_, let code, _, _, _) = answer { ErrorCode(rawValue: code) } else { nil }
            }
            #expect(rejection(try a.join("two")) == .tooManyRoomsForConnection)
            // Re-joining a joined room is not a new membership.
            guard case .snapshot = try a.join("one") else { Issue.record("re-join"); return }
            guard case .snapshot = try b.join("two") else { Issue.record("second room"); return }
            #expect(rejection(try b.mutate("three", [.appendSections([.named("s")])]).answer) == .tooManyRooms)
            #expect(rejection(try RawClient.ready(daemon).join("three")) == .tooManyRooms)
            #expect(rejection(try b.join("")) == .invalidRoomName)
            #expect(rejection(try b.join(String(repeating: "n", count: 129))) == .invalidRoomName)
            #expect(try b.stats()["rooms"] == 2)
        }
    }
}
