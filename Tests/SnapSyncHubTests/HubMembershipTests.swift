import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub

// Membership, in-process: LEAVE, not_joined, the rooms-per-connection limit, and a closed or
// ended session leaving every room it joined, with both sides of membership kept in step.

@Suite(.unitTests) struct HubMembershipTests {
    @Test func leaveStopsTheDiffsAndASecondLeaveIsNotJoined() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect()
        harness.join(member, "room")
        harness.send(.leave(requestID: 4, room: "room"), from: member)
        #expect(harness.drain(member).map(\.ackVersion) == [0])
        harness.mutate(writer, "room", addItem("a", first: true))
        harness.send(.leave(requestID: 5, room: "room"), from: member)
        let answer = harness.drain(member)
        #expect(answer.map(\.errorCode) == [.notJoined] && answer.first?.requestID == 5)
        #expect(harness.hub.rooms["room"]?.members.count == 0 && member.memberships.isEmpty)
    }

    @Test func theRoomsPerConnectionLimitRefusesOneMoreButNotARejoin() {
        let harness = HubHarness { $0.wire.maxRoomsPerConnection = 2 }
        let session = harness.connect()
        harness.join(session, "a")
        harness.join(session, "b")
        let refused = harness.join(session, "c", requestID: 3)
        #expect(refused.map(\.errorCode) == [.tooManyRoomsForConnection] && refused.first?.requestID == 3)
        #expect(harness.hub.rooms["c"] == nil && session.memberships.count == 2)
        let rejoin = harness.join(session, "b", requestID: 4)
        guard rejoin.count == 1, case .snapshot(4, "b", _, _, _, _, _, _) = rejoin[0] else {
            Issue.record("expected SNAPSHOT for the re-join, got \(rejoin)")
            return
        }
    }

    @Test func aLeaverInTheMiddleKeepsTheOtherMembersSlots() {
        let harness = HubHarness()
        let writer = harness.connect()
        let members = (0..<4).map { _ in harness.connect() }
        for member in members { harness.join(member, "room") }
        for leaver in [members[1], members[0]] {
            harness.send(.leave(requestID: 1, room: "room"), from: leaver)
            _ = harness.drain(leaver)
        }
        harness.mutate(writer, "room", addItem("a", first: true))
        #expect(members.map { harness.drain($0).map(\.diffVersion) } == [[], [], [1], [1]])
        harness.send(.leave(requestID: 2, room: "room"), from: members[3])
        #expect(harness.drain(members[3]).map(\.ackVersion) == [1])
        harness.mutate(writer, "room", addItem("b"))
        #expect(members.map { harness.drain($0).map(\.diffVersion) } == [[], [], [2], []])
        #expect(harness.hub.rooms["room"]?.members.sessions.map(\.id) == [members[2].id])
    }

    @Test func aClosedSessionLeavesItsRoomsAndAnEndedOneIsForgotten() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect()
        harness.join(member, "a")
        harness.join(member, "b")
        harness.hub.close(member, error: .shuttingDown, "bye")
        #expect(member.state == .closing && member.memberships.isEmpty)
        #expect(harness.hub.rooms["a"]?.members.count == 0 && harness.hub.rooms["b"]?.members.count == 0)
        harness.mutate(writer, "a", addItem("x", first: true))
        #expect(harness.drain(member).map(\.errorCode) == [.shuttingDown])
        harness.hub.end(member, reason: "closed")
        #expect(member.isEnded && harness.hub.sessions[member.id] == nil && harness.hub.sessions[writer.id] != nil)
    }

    @Test func anEndedSessionLeavesItsRoomsToo() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect()
        harness.join(member, "room")
        harness.hub.end(member, reason: "peer went away")
        harness.mutate(writer, "room", addItem("x", first: true))
        #expect(harness.hub.rooms["room"]?.members.count == 0 && member.output.isEmpty)
        #expect(harness.drain(writer).map(\.ackVersion) == [1])
    }
}
