import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub

// A room's DIFFs reach its members once per pass (Hub+Broadcast.swift): each member's stream is
// still exactly what a fan-out at every write gave it, whatever happens between the writes of a
// pass: a member writing, pinging, joining, leaving, turning windowed, falling behind, or
// speaking an older version. Nothing here calls `drain` between the writes of one "pass",
// since `drain` ends the pass (it flushes the broadcasts, as `finishPass` does).

@Suite(.unitTests) struct HubBroadcastTests {
    /// Writes of one pass: the members' queues are untouched until the pass ends, then each gets
    /// every DIFF, in order, as one queue entry (the DIFFs lie back to back in the room's arena).
    @Test func aPassOfWritesReachesEachMemberAsOneSpanWhenThePassEnds() {
        let harness = HubHarness()
        let writer = harness.connect(), first = harness.connect(), second = harness.connect()
        harness.join(first, "room")
        harness.join(second, "room")
        let framesBefore = harness.hub.stats.framesOut
        let diffsBefore = harness.hub.traffic.framesQueued(type: MessageType.diff.rawValue)
        for index in 0..<10 { harness.mutate(writer, "room", addItem("i\(index)", first: index == 0), requestID: UInt64(index)) }
        #expect(first.output.isEmpty && second.output.isEmpty)
        #expect(harness.hub.pendingBroadcastCount == 1)
        #expect(harness.hub.finishPass())
        #expect(harness.hub.pendingBroadcastCount == 0 && harness.hub.broadcastRooms.isEmpty)
        #expect(first.output.entryCount == 1 && second.output.entryCount == 1)
        #expect(harness.drain(first).map(\.diffVersion) == Array(1...10))
        #expect(harness.drain(second).map(\.diffVersion) == Array(1...10))
        #expect(harness.drain(writer).map(\.ackVersion) == Array(1...10))
        // Counted per DIFF and member, as before: 20 DIFFs, 10 ACKs.
        #expect(harness.hub.stats.framesOut - framesBefore == 30)
        #expect(harness.hub.traffic.framesQueued(type: MessageType.diff.rawValue) - diffsBefore == 20)
        harness.checkInvariants("room")
    }

    /// A writer that has joined gets its own DIFF before its ACK, each write of the pass.
    @Test func aMemberWritingGetsEachDiffBeforeItsAck() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect()
        harness.join(writer, "room")
        harness.join(member, "room")
        for index in 0..<3 { harness.mutate(writer, "room", addItem("i\(index)", first: index == 0), requestID: UInt64(index)) }
        let answers = harness.drain(writer)
        #expect(answers.map(\.diffVersion) == [1, nil, 2, nil, 3, nil])
        #expect(answers.map(\.ackVersion) == [nil, 1, nil, 2, nil, 3])
        #expect(harness.drain(member).map(\.diffVersion) == [1, 2, 3])
    }

    /// A PONG stays behind the DIFFs made before its PING.
    @Test func aPongFollowsTheDiffsMadeBeforeItsPing() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect()
        harness.join(member, "room")
        harness.mutate(writer, "room", addItem("a", first: true))
        harness.send(.ping(nonce: 5), from: member)
        harness.mutate(writer, "room", addItem("b"))
        let got = harness.drain(member)
        #expect(got.count == 3 && got[0].diffVersion == 1 && got[1] == .pong(nonce: 5) && got[2].diffVersion == 2)
    }

    /// A session joining mid-pass gets the pending versions in its SNAPSHOT, not as DIFFs; the
    /// members before it get every DIFF.
    @Test func aJoinerMidPassGetsTheSnapshotAndOnlyLaterDiffs() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect(), joiner = harness.connect()
        harness.join(member, "room")
        harness.mutate(writer, "room", addItem("a", first: true))
        harness.mutate(writer, "room", addItem("b"))
        harness.send(.join(requestID: 3, room: "room", resume: nil, chain: nil), from: joiner)
        harness.mutate(writer, "room", addItem("c"))
        let joined = harness.drain(joiner)
        #expect(joined.count == 2 && joined[0].snapshotVersion == 2 && joined[1].diffVersion == 3)
        #expect(harness.drain(member).map(\.diffVersion) == [1, 2, 3])
        harness.checkInvariants("room")
    }

    /// A member leaving mid-pass gets the DIFFs made while it was one, then the LEAVE's ACK.
    @Test func aLeaverMidPassGetsTheDiffsMadeBeforeItLeft() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect(), stays = harness.connect()
        harness.join(member, "room")
        harness.join(stays, "room")
        harness.mutate(writer, "room", addItem("a", first: true))
        harness.mutate(writer, "room", addItem("b"))
        harness.send(.leave(requestID: 4, room: "room"), from: member)
        harness.mutate(writer, "room", addItem("c"))
        let left = harness.drain(member)
        #expect(left.map(\.diffVersion) == [1, 2, nil] && left.last?.requestID == 4)
        #expect(harness.drain(stays).map(\.diffVersion) == [1, 2, 3])
    }

    /// A member of two rooms gets each room's DIFFs in version order.
    @Test func aMemberOfTwoRoomsGetsEachRoomInOrder() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect()
        harness.join(member, "one")
        harness.join(member, "two", requestID: 2)
        for index in 0..<4 {
            harness.mutate(writer, "one", addItem("a\(index)", first: index == 0))
            harness.mutate(writer, "two", addItem("b\(index)", first: index == 0))
        }
        var versions: [String: [UInt64]] = [:]
        for message in harness.drain(member) {
            guard case .diff(let room, _, let version, _, _) = message else { continue }
            versions[room, default: []].append(version)
        }
        #expect(versions == ["one": [1, 2, 3, 4], "two": [1, 2, 3, 4]])
    }

    /// Version 3 members get the chained copies, version 2 members the DIFFs as they are, from
    /// one pass.
    @Test func version2And3MembersEachGetTheirForm() {
        let harness = HubHarness()
        let writer = harness.connect(), chained = harness.connect(versions: [3]), plain = harness.connect(versions: [2])
        harness.join(chained, "room")
        harness.join(plain, "room")
        for index in 0..<3 { harness.mutate(writer, "room", addItem("i\(index)", first: index == 0)) }
        let room = harness.hub.rooms["room"]!
        let chains = harness.drain(chained).map { message -> RoomChain? in
            guard case .diff(_, _, _, _, let chain) = message else { return nil }
            return chain
        }
        #expect(chains == [room.chain(atVersion: 1), room.chain(atVersion: 2), room.chain(atVersion: 3)])
        let unchained = harness.drain(plain).map { message -> Bool in
            guard case .diff(_, _, _, _, let chain) = message else { return false }
            return chain == nil
        }
        #expect(unchained == [true, true, true])
    }

    /// A version 1 member gets the pass's DIFFs up to the one that makes the room an outline,
    /// then LEFT in its place, and nothing after.
    @Test func aVersion1MemberGetsTheDiffsBeforeTheOutlineThenLeft() {
        let harness = HubHarness()
        let writer = harness.connect(), old = harness.connect(versions: [1]), new = harness.connect()
        harness.join(old, "room")
        harness.join(new, "room")
        harness.mutate(writer, "room", Array(HubOutlineTests.outline.prefix(2)))
        harness.mutate(writer, "room", Array(HubOutlineTests.outline.suffix(1)))
        harness.mutate(writer, "room", [.appendItems([hubElement("c")], toSection: "s")])
        let answers = harness.drain(old)
        guard answers.count == 2, case .left(_, let code, _) = answers[1] else {
            Issue.record("version 1 member got \(answers)")
            return
        }
        #expect(answers[0].diffVersion == 1 && code == ErrorCode.outlineUnsupported.rawValue)
        #expect(harness.drain(new).map(\.diffVersion) == [1, 2, 3])
        #expect(harness.hub.rooms["room"]?.members.sessions.map(\.id) == [new.id])
    }

    /// A member that stops reading is cut off at the DIFF that passes its cap, inside a pass,
    /// as it was when each DIFF was queued at its write; a member that reads after every pass
    /// gets every DIFF.
    @Test func aMemberPastItsCapWithinAPassIsCutOffAtThatDiff() {
        let harness = HubHarness { $0.maxOutputBytes = 4096 }
        let writer = harness.connect(), slow = harness.connect(), reader = harness.connect()
        harness.join(slow, "room")
        harness.join(reader, "room")
        let payload = String(repeating: "p", count: 400)
        var received: [UInt64] = []
        var cutInPass: Int?
        for pass in 0..<5 {
            for write in 0..<4 {
                let index = pass * 4 + write
                let item: SnapshotOperation = .appendItems([hubElement("i\(index)", payload)], toSection: "s")
                harness.mutate(writer, "room", (index == 0 ? [.appendSections([hubElement("s")])] : []) + [item])
            }
            #expect(harness.hub.finishPass())
            received += harness.drain(reader).compactMap(\.diffVersion)
            if cutInPass == nil && slow.state == .closing { cutInPass = pass }
        }
        #expect(received == Array(1...20))
        #expect(slow.state == .closing && slow.memberships.isEmpty)
        // About 430 bytes a DIFF: 9 fit the 4,096-byte cap, the 10th (the second of the third
        // pass) does not. What was queued and not sent is dropped (`cutOff`).
        #expect(cutInPass == 2)
        #expect(harness.drain(slow).map(\.errorCode) == [.slowConsumer])
        #expect(harness.hub.stats.slowConsumerDisconnects == 1)
    }

    /// A full member turning windowed mid-pass gets the DIFFs made before its WINDOW, then its
    /// WINDOW_STATE, and no DIFF after.
    @Test func aMemberTurningWindowedMidPassGetsTheDiffsBeforeItsWindow() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect()
        harness.mutate(writer, "room", [.appendSections([hubElement("s")])])
        _ = harness.drain(writer)
        harness.join(member, "room")
        harness.mutate(writer, "room", [.appendItems([hubElement("a")], toSection: "s")])
        harness.send(.window(requestID: 5, room: "room", window: [SectionWindow(section: "s", range: .first(10))]), from: member)
        harness.mutate(writer, "room", [.appendItems([hubElement("b")], toSection: "s")])
        let got = harness.drain(member)
        #expect(got.first?.diffVersion == 2)
        guard got.count >= 2, case .windowState(let requestID, _, _, let version, _, _, _, _) = got[1] else {
            Issue.record("windowed member got \(got)")
            return
        }
        #expect(requestID == 5 && version == 2)
        #expect(!got.contains { $0.diffVersion == 3 })
        harness.checkInvariants("room")
    }
}
