import Foundation
import Testing
import SnapSyncModel
import SnapSyncWire

extension ServerIntegration {
    /// Outlines and REPLACE_SECTION (protocol version 2) against the real daemon: negotiation,
    /// the version 1 rules, `--max-outline-depth`, and durability across kill -9 and checkpoints.
    @Suite struct ServerOutlineTests {
        /// Section `s`: `a` { `a1` { `a11` }, `a2` }, `b`; section `t`: `c`.
        static let build: [SnapshotOperation] = [
            .appendSections([SnapshotElement("s"), SnapshotElement("t")]),
            .appendItems(["a", "b"], toSection: "s"),
            .appendItems(["c"], toSection: "t"),
            .appendChildren(["a1", "a2"], toParent: "a"),
            .appendChildren([SnapshotElement("a11", payload: "deep")], toParent: "a1"),
        ]

        static func levels(_ snapshot: RoomSnapshot) -> [String] {
            snapshot.itemIdentifiers.map { "\($0):\(snapshot.level(of: $0)!)" }
        }

        @Test func negotiationAndTheVersion1Rules() throws {
            let daemon = try DaemonProcess.start(arguments: ["--max-outline-depth", "3"])
            defer { daemon.stop() }
            let new = try RawClient(host: daemon.host, port: daemon.port)
            guard case .welcome(2, _, _, let limits) = try new.handshake(versions: [2, 1]) else {
                Issue.record("no WELCOME 2")
                return
            }
            #expect(WireLimits(welcome: limits).model.maxOutlineDepth == 3)
            let old = try RawClient.ready(daemon)
            _ = try old.join("room")
            try new.mustMutate("room", Array(Self.build.prefix(3)))
            _ = try old.receive()  // the flat DIFF
            // The version 1 member is sent LEFT in place of the DIFF that makes an outline.
            try new.mustMutate("room", Array(Self.build.suffix(2)))
            guard case .left("room", let code, _) = try old.receive() else {
                Issue.record("no LEFT for the version 1 member")
                return
            }
            #expect(code == ErrorCode.outlineUnsupported.rawValue)
            guard case .reject(_, let refused, nil, nil, _) = try old.join("room") else {
                Issue.record("a version 1 JOIN of an outline room was not refused")
                return
            }
            #expect(refused == ErrorCode.outlineUnsupported.rawValue)
            // One level deeper than --max-outline-depth allows.
            let (answer, _) = try new.mutate("room", [.appendChildren(["x"], toParent: "a11")])
            guard case .reject(_, let deep, 0, "x", _) = answer else {
                Issue.record("too deep: \(answer)")
                return
            }
            #expect(deep == ErrorCode.outlineTooDeep.rawValue)
            let state = try RawClient.ready(daemon, versions: [2, 1]).state(of: "room")
            #expect(Self.levels(state.snapshot) == ["a:0", "a1:1", "a11:2", "a2:1", "b:0", "c:0"])
        }

        /// Outlines written by MUTATE and REPLACE_SECTION come back after kill -9, from the log
        /// and from a checkpoint, with the same digest; a resume gets the version 2 DIFFs.
        @Test func outlinesSurviveKillAndCheckpoints() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            var daemon = try dir.start(["--checkpoint-interval", "200ms"])
            let client = try RawClient.ready(daemon, versions: [2, 1])
            try client.mustMutate("o", Self.build)
            try client.mustMutate("o", [.moveItemToParent("b", parent: "a2")])
            // Checkpointed (the one-second maintenance timer), then written again after it.
            #expect(
                waitUntil(timeout: 60) {
                    ((try? FileManager.default.contentsOfDirectory(atPath: dir.data)) ?? []).contains { $0.hasPrefix("ckpt-") }
                })
            let held = try client.state(of: "o")
            var items = try SectionSnapshot([SnapshotElement("a2"), SnapshotElement("n"), SnapshotElement("a")])
            try items.setOutlineLevels([0, 1, 0], maxOutlineDepth: .max)
            let (answer, _) = try client.request {
                .replaceSection(requestID: $0, room: "o", expectedVersion: held.version, writeID: [7], section: "s", items: items)
            }
            guard case .ack(_, _, let written) = answer else {
                Issue.record("REPLACE_SECTION answered \(answer)")
                return
            }
            let before = try RawClient.ready(daemon, versions: [2, 1]).state(of: "o")
            #expect(Self.levels(before.snapshot) == ["a2:0", "n:1", "a:0", "c:0"])
            daemon.kill()

            daemon = try dir.start()
            defer { daemon.stop() }
            let after = try RawClient.ready(daemon, versions: [2, 1]).state(of: "o")
            #expect(after.version == written && after.epoch == before.epoch)
            #expect(after.snapshot.digest == before.snapshot.digest && Self.levels(after.snapshot) == Self.levels(before.snapshot))
            // Resume from the checkpointed position: CATCHUP with the REPLACE_SECTION's DIFF.
            let resumed = try RawClient.ready(daemon, versions: [2, 1])
            guard case .catchup(_, _, _, let from, let to, _) = try resumed.join("o", resume: RoomPosition(epoch: held.epoch, version: held.version)) else {
                Issue.record("no CATCHUP")
                return
            }
            #expect(from == held.version && to == written)
            var replica = held.snapshot
            guard case .diff(_, _, _, let ops, _) = try resumed.receive() else {
                Issue.record("no DIFF")
                return
            }
            try replica.apply(ops)
            #expect(replica.digest == after.snapshot.digest)
            // The retried REPLACE_SECTION is recognised across the restart.
            let (retry, _) = try resumed.request {
                .replaceSection(requestID: $0, room: "o", expectedVersion: held.version, writeID: [7], section: "s", items: items)
            }
            guard case .ack(_, _, written) = retry else {
                Issue.record("the retried REPLACE_SECTION was answered \(retry)")
                return
            }
            // A version 1 resume across the outline DIFFs is a resync, refused since the room is an outline.
            guard case .reject = try RawClient.ready(daemon).join("o", resume: RoomPosition(epoch: held.epoch, version: 1)) else {
                Issue.record("a version 1 resume of an outline room was not refused")
                return
            }
        }

        /// A data directory written by the previous release (protocol version 1 only; a
        /// checkpoint, then a log tail cut by kill -9) recovers unchanged: same epochs,
        /// versions, digests, and its kept write id is still a retry.
        @Test func previousReleaseDataRecovers() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Fixtures/previous-release-data")
            try FileManager.default.createDirectory(atPath: dir.data, withIntermediateDirectories: true)
            for name in try FileManager.default.contentsOfDirectory(atPath: fixture.path) where name != "README.md" {
                try FileManager.default.copyItem(atPath: fixture.appendingPathComponent(name).path, toPath: dir.data + "/" + name)
            }
            let daemon = try dir.start()
            defer { daemon.stop() }
            for versions in [[1], [2, 1]] as [[UInt64]] {
                let client = try RawClient.ready(daemon, versions: versions)
                let board = try client.state(of: "board")
                #expect(board.epoch == 16_510_082_150_868_778_457 && board.version == 7)
                #expect(board.snapshot.digest.description == "e7654d7b64287843d0a423269d5bfbd957649c7edd31d1a46620258a358b3786")
                #expect(itemNames(board.snapshot) == ["tea", "eggs", "bread"])
                let notes = try client.state(of: "notes")
                #expect(notes.epoch == 18_357_069_662_390_844_217 && notes.version == 3)
                #expect(notes.snapshot.digest.description == "d4b340682cb019c207d5ba4afd21a199fadb48d801b4aa38b28bba351594c47c")
            }
            let client = try RawClient.ready(daemon)
            let (retry, _) = try client.mutate(
                "notes", [.appendItems([SnapshotElement("d", payload: "last")], toSection: SnapshotIdentifier([0x00, 0xff]))],
                writeID: Array("w-last".utf8))
            guard case .ack(_, _, 3) = retry else {
                Issue.record("the retried write was answered \(retry)")
                return
            }
        }
    }
}
