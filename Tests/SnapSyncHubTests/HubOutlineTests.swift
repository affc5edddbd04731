import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub

/// Protocol version 2 in the hub (PROTOCOL.md §8.2, §11.21): negotiation, outlines through
/// MUTATE, REPLACE_SECTION, and what a version 1 session sees of an outline room.
@Suite(.unitTests) struct HubOutlineTests {
    /// Section `s` holding root `a` with child `a1`, then root `b`: an outline.
    static let outline: [SnapshotOperation] = [
        .appendSections([hubElement("s")]),
        .appendItems([hubElement("a"), hubElement("b")], toSection: "s"),
        .appendChildren([hubElement("a1")], toParent: "a"),
    ]

    static func items(_ pairs: [(String, Int)]) throws -> SectionSnapshot {
        var section = try SectionSnapshot(pairs.map { hubElement($0.0) })
        try section.setOutlineLevels(pairs.map(\.1), maxOutlineDepth: .max)
        return section
    }

    // MARK: Negotiation

    @Test func helloChoosesTheHighestVersionOfferedThatTheServerSpeaks() {
        let harness = HubHarness()
        for (offered, chosen) in [
            ([4, 3, 2, 1], 4), ([3, 2, 1], 3), ([2, 1], 2), ([1], 1), ([1, 2], 2), ([3, 2], 3), ([3, 1], 3), ([5, 2], 2), ([5, 1], 1), ([1, 4], 4),
        ]
            as [([UInt64], UInt64)]
        {
            let session = harness.hub.openSession()
            harness.send(.hello(versions: offered, clientName: "x", credentials: []), from: session)
            guard case .welcome(let version, _, _, let limits) = harness.drain(session).first else {
                Issue.record("no WELCOME for \(offered)")
                continue
            }
            #expect(version == chosen, "\(offered)")
            #expect(session.protocolVersion == chosen)
            // max_outline_depth (key 9) only in a WELCOME of version 2 or later.
            #expect(limits.contains { $0.key == LimitKey.maxOutlineDepth.rawValue } == (chosen >= 2), "\(offered)")
            // max_presence_bytes and presence_view (keys 10, 11) only in a version 4 WELCOME.
            #expect(limits.contains { $0.key == LimitKey.presenceView.rawValue } == (chosen >= 4), "\(offered)")
            #expect(limits.contains { $0.key == LimitKey.maxPresenceBytes.rawValue } == (chosen >= 4), "\(offered)")
        }
        let session = harness.hub.openSession()
        harness.send(.hello(versions: [5], clientName: "x", credentials: []), from: session)
        #expect(harness.drain(session).first?.errorCode == .unsupportedVersion)
    }

    @Test func welcomeAnnouncesTheConfiguredOutlineDepth() {
        let harness = HubHarness { $0.wire.model.maxOutlineDepth = 5 }
        let session = harness.hub.openSession()
        harness.send(.hello(versions: [2, 1], clientName: "x", credentials: []), from: session)
        guard case .welcome(_, _, _, let limits) = harness.drain(session).first else {
            Issue.record("no WELCOME")
            return
        }
        #expect(WireLimits(welcome: limits).model.maxOutlineDepth == 5)
    }

    // MARK: Outlines over MUTATE

    @Test func anOutlineReachesVersion2MembersAndAJoinGetsItsLevels() throws {
        let harness = HubHarness()
        let member = harness.connect()
        harness.join(member, "room")
        harness.mutate(member, "room", Self.outline)
        let answers = harness.drain(member)
        #expect(answers.map(\.diffVersion) == [1, nil])
        #expect(answers.last?.ackVersion == 1)
        let reader = harness.connect()
        guard case .snapshot(_, _, _, _, _, let digest, let snapshot, _) = harness.join(reader, "room").first else {
            Issue.record("no SNAPSHOT")
            return
        }
        #expect(snapshot.level(of: "a1") == 1 && snapshot.parent(of: "a1") == "a")
        #expect(snapshot.digest == digest)
        harness.checkInvariants("room")
    }

    @Test func outlineRejectionsCarryTheirCodeOpIndexAndIdentifier() {
        let harness = HubHarness { $0.wire.model.maxOutlineDepth = 2 }
        let writer = harness.connect()
        harness.mutate(writer, "room", Self.outline)
        #expect(harness.drain(writer).first?.ackVersion == 1)
        let cases: [([SnapshotOperation], ErrorCode, SnapshotIdentifier)] = [
            ([.appendChildren([hubElement("x")], toParent: "nope")], .parentNotFound, "nope"),
            ([.moveItemToParent("a", parent: "a1")], .moveIntoOwnSubtree, "a"),
            ([.appendChildren([hubElement("x")], toParent: "a1")], .outlineTooDeep, "x"),
        ]
        for (ops, code, identifier) in cases {
            harness.mutate(writer, "room", [.updateItems([hubElement("b", "B")], .reload)] + ops)
            guard case .reject(_, let got, let opIndex, let id, _) = harness.drain(writer).first else {
                Issue.record("\(ops) not refused")
                continue
            }
            #expect(got == code.rawValue && opIndex == 1 && id == identifier, "\(ops)")
        }
        #expect(harness.hub.rooms["room"]?.version == 1)
    }

    // MARK: Version 1 sessions (§8.2)

    @Test func aVersion1JoinOfAnOutlineRoomIsRefusedAndSubscribesNothing() {
        let harness = HubHarness()
        let writer = harness.connect()
        harness.mutate(writer, "room", Self.outline)
        _ = harness.drain(writer)
        let old = harness.connect(versions: [1])
        let answer = harness.join(old, "room")
        guard case .reject(_, let code, let opIndex, let identifier, _) = answer.first else {
            Issue.record("JOIN answered \(answer)")
            return
        }
        #expect(code == ErrorCode.outlineUnsupported.rawValue && opIndex == nil && identifier == nil)
        #expect(harness.hub.rooms["room"]?.members.count == 0)
        harness.mutate(writer, "room", [.appendItems([hubElement("c")], toSection: "s")])
        #expect(harness.drain(old).isEmpty)
    }

    @Test func aVersion1MemberIsLeftWhenItsRoomBecomesAnOutline() {
        let harness = HubHarness()
        let old = harness.connect(versions: [1])
        let new = harness.connect()
        harness.join(old, "room")
        harness.join(new, "room")
        // A flat write reaches both.
        harness.mutate(old, "room", Array(Self.outline.prefix(2)))
        #expect(harness.drain(old).map(\.diffVersion) == [1, nil])
        #expect(harness.drain(new).map(\.diffVersion) == [1])
        // The version 1 member gets LEFT in place of the DIFF that makes the room an outline.
        harness.mutate(new, "room", Array(Self.outline.suffix(1)), requestID: 9)
        let answers = harness.drain(old)
        guard answers.count == 1, case .left(let room, let code, _) = answers[0] else {
            Issue.record("version 1 member got \(answers)")
            return
        }
        #expect(room == "room" && code == ErrorCode.outlineUnsupported.rawValue)
        #expect(harness.drain(new).map(\.diffVersion) == [2, nil])
        #expect(harness.hub.rooms["room"]?.members.count == 1)
        // A version 1 connection may still write to it: delete_items removes the subtree.
        harness.mutate(old, "room", [.deleteItems(["a"])], requestID: 10)
        #expect(harness.drain(old).map(\.ackVersion) == [3])
        #expect(harness.hub.rooms["room"]?.snapshot.itemIdentifiers == ["b"])
    }

    @Test func aVersion1ResumeAcrossAnOutlineOpGetsASnapshotOfTheFlatRoom() throws {
        let harness = HubHarness()
        let writer = harness.connect()
        harness.mutate(writer, "room", Array(Self.outline.prefix(2)))
        _ = harness.drain(writer)
        let epoch = try #require(harness.hub.rooms["room"]).epoch
        // Version 2 makes the room an outline, then flat again (a1 moved to the roots).
        harness.mutate(writer, "room", Array(Self.outline.suffix(1)))
        harness.mutate(writer, "room", [.moveItem("a1", .after("b"))])
        _ = harness.drain(writer)
        #expect(harness.hub.rooms["room"]?.snapshot.isOutline == false)
        let old = harness.connect(versions: [1])
        let answer = harness.join(old, "room", resume: RoomPosition(epoch: epoch, version: 1))
        guard case .snapshot(_, _, _, let version, let reason, _, _, _) = answer.first else {
            Issue.record("version 1 resume answered \(answer)")
            return
        }
        #expect(reason == .resync && version == 3 && answer.count == 1)
        // Version 2 resumes from the same position with CATCHUP.
        let new = harness.connect()
        let caught = harness.join(new, "room", resume: RoomPosition(epoch: epoch, version: 1))
        guard case .catchup = caught.first else {
            Issue.record("version 2 resume answered \(caught)")
            return
        }
        #expect(caught.compactMap(\.diffVersion) == [2, 3])
        // A resume with nothing of version 2 after it is a CATCHUP for version 1 too.
        let current = harness.join(old, "room", resume: RoomPosition(epoch: epoch, version: 3), requestID: 2)
        guard case .catchup = current.first else {
            Issue.record("current version 1 resume answered \(current)")
            return
        }
    }

    @Test func aVersion1SessionHasNoReplaceSection() {
        let harness = HubHarness()
        let old = harness.connect(versions: [1])
        harness.send(
            .replaceSection(requestID: 1, room: "room", expectedVersion: nil, writeID: [], section: "s", items: SectionSnapshot()), from: old)
        #expect(harness.drain(old).first?.errorCode == .unknownMessageType)
    }

    // MARK: REPLACE_SECTION

    @Test func replaceSectionChangesOnlyItsSectionAndIsAnsweredLikeReplace() throws {
        let harness = HubHarness()
        let writer = harness.connect()
        harness.mutate(writer, "room", Self.outline + [.appendSections([hubElement("t")]), .appendItems([hubElement("c")], toSection: "t")])
        let member = harness.connect()
        harness.join(member, "room")
        _ = harness.drain(writer)
        let items = try Self.items([("b", 0), ("a", 1), ("n", 2)])
        let request = Message.replaceSection(requestID: 4, room: "room", expectedVersion: 1, writeID: [1, 2], section: "s", items: items)
        harness.send(request, from: writer)
        #expect(harness.drain(writer).map(\.ackVersion) == [2])
        let diffs = harness.drain(member)
        guard case .diff(_, _, 2, let ops, _) = diffs.first, diffs.count == 1 else {
            Issue.record("member got \(diffs)")
            return
        }
        #expect(!ops.isEmpty)
        let room = try #require(harness.hub.rooms["room"])
        #expect(room.snapshot.sectionSnapshot(of: "s") == items)
        #expect(room.snapshot.itemIdentifiers(inSection: "t") == ["c"])
        harness.checkInvariants("room")
        // The same request again is a retry; the same items without a write id change nothing.
        harness.send(request, from: writer)
        #expect(harness.drain(writer).map(\.ackVersion) == [2])
        harness.send(.replaceSection(requestID: 5, room: "room", expectedVersion: nil, writeID: [], section: "s", items: items), from: writer)
        #expect(harness.drain(writer).map(\.ackVersion) == [2])
        #expect(harness.drain(member).isEmpty)
        // Another request reusing the write id conflicts.
        harness.send(
            .replaceSection(requestID: 6, room: "room", expectedVersion: 1, writeID: [1, 2], section: "t", items: items), from: writer)
        #expect(harness.drain(writer).first?.errorCode == .writeIDConflict)
    }

    @Test func replaceSectionRefusalsCarryNoOpIndex() throws {
        let harness = HubHarness { $0.wire.model.maxOutlineDepth = 3 }
        let writer = harness.connect()
        harness.mutate(writer, "room", Self.outline + [.appendSections([hubElement("t")]), .appendItems([hubElement("c")], toSection: "t")])
        _ = harness.drain(writer)
        let cases: [(SnapshotIdentifier, SectionSnapshot, ErrorCode, SnapshotIdentifier?)] = [
            ("nope", try Self.items([("x", 0)]), .sectionNotFound, "nope"),
            ("s", try Self.items([("a", 0), ("c", 1)]), .duplicateItem, "c"),
        ]
        for (section, items, code, identifier) in cases {
            harness.send(.replaceSection(requestID: 8, room: "room", expectedVersion: nil, writeID: [], section: section, items: items), from: writer)
            guard case .reject(_, let got, let opIndex, let id, _) = harness.drain(writer).first else {
                Issue.record("\(section) not refused")
                continue
            }
            #expect(got == code.rawValue && opIndex == nil && id == identifier, "\(section)")
        }
        // Too deep for the server: refused while decoding, and the session goes on.
        harness.send(
            .replaceSection(
                requestID: 9, room: "room", expectedVersion: nil, writeID: [], section: "s",
                items: try Self.items([("a", 0), ("b", 1), ("x", 2), ("y", 3)])), from: writer)
        guard case .reject(9, let code, nil, let id, _) = harness.drain(writer).first else {
            Issue.record("too deep not refused")
            return
        }
        #expect(code == ErrorCode.outlineTooDeep.rawValue && id == "y")
        #expect(harness.hub.rooms["room"]?.version == 1)
        harness.send(.ping(nonce: 3), from: writer)
        #expect(harness.drain(writer) == [.pong(nonce: 3)])
    }

    @Test func aReplaceSectionThatMakesTheRoomAnOutlineLeavesVersion1Members() throws {
        let harness = HubHarness()
        let old = harness.connect(versions: [1])
        let writer = harness.connect()
        harness.mutate(writer, "room", Array(Self.outline.prefix(2)))
        _ = harness.drain(writer)
        harness.join(old, "room")
        harness.send(
            .replaceSection(requestID: 2, room: "room", expectedVersion: nil, writeID: [], section: "s", items: try Self.items([("a", 0), ("b", 1)])),
            from: writer)
        #expect(harness.drain(writer).map(\.ackVersion) == [2])
        #expect(harness.drain(old).map(\.errorCode) == [.outlineUnsupported])
    }
}
