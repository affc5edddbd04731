import SnapSyncTestThreads
import SnapSyncWire
import Testing

@testable import SnapSyncHub

// The hub's seam for cluster presence (`PresenceRelay`, SnapSyncCluster's `PresenceExchange`):
// what it tells the relay of its local members, the node tag in its session ids, and the entries
// of other nodes it is given. The exchange itself over real NATS: ClusterPresenceTests.

@Suite(.unitTests) struct HubPresenceRelayTests {
    final class RecordingRelay: PresenceRelay {
        var calls: [String] = []

        func localPresenceChanged(room: String, memberID: UInt64, member: PresenceMember?, reason: PresenceDeparture) {
            calls.append(member.map { "\(room) member \($0.memberID) \($0.state)" } ?? "\(room) left \(memberID) \(reason.name)")
        }

        func presenceInterest(room: String, active: Bool) {
            calls.append("\(room) interest \(active)")
        }
    }

    @Test func sessionIDsCarryTheNodeTagInTheirHigh32Bits() {
        let harness = HubHarness()
        harness.hub.useSessionIDTag(0x7fff_0001)
        let first = harness.connect(versions: [4])
        let second = harness.connect(versions: [4])
        #expect(first.id == 0x7fff_0001 << 32 | 1)
        #expect(second.id == 0x7fff_0001 << 32 | 2)
    }

    @Test func theRelayHearsInterestJoinsStatesAndLeaves() {
        let harness = HubHarness()
        let relay = RecordingRelay()
        harness.hub.presenceRelay = relay
        let a = harness.connect(versions: [4])
        let b = harness.connect(versions: [4])
        harness.join(a, "r")
        harness.join(b, "r")
        harness.send(.setPresence(requestID: 2, room: "r", state: [9]), from: a)
        harness.send(.leave(requestID: 3, room: "r"), from: a)
        harness.send(.leave(requestID: 4, room: "r"), from: b)
        #expect(
            relay.calls == [
                "r interest true", "r member \(a.id) []", "r member \(b.id) []", "r member \(a.id) [9]", "r left \(a.id) left",
                "r left \(b.id) left", "r interest false",
            ])
    }

    @Test func otherNodesEntriesShowWhileTheRoomIsResidentAndLeaveWithTheirReason() {
        let harness = HubHarness()
        let remote = PresenceMember(memberID: 0x0abc << 32 | 5, principal: "far", joinedAt: 1)
        // Not resident: ignored.
        harness.hub.remotePresenceChanged(room: "r", remote)
        let a = harness.connect(versions: [4])
        harness.join(a, "r")
        #expect(harness.hub.remotePresenceIDs(room: "r").isEmpty)
        harness.hub.remotePresenceChanged(room: "r", remote)
        #expect(harness.hub.remotePresenceIDs(room: "r") == [remote.memberID])
        #expect(harness.hub.localPresence(room: "r").map(\.memberID) == [a.id])
        harness.send(.presenceWatch(requestID: 2, room: "r", watch: true), from: a)
        guard case .presence(_, _, let count, let members, _) = harness.drain(a).last else {
            Issue.record("no PRESENCE")
            return
        }
        #expect(count == 2 && Set(members.map(\.memberID)) == [a.id, remote.memberID])
        harness.hub.remotePresenceLeft(room: "r", memberID: remote.memberID, reason: .nodeLost)
        _ = harness.hub.flushPresence(now: harness.later(.seconds(2)))
        let diffs = harness.drain(a).compactMap { message -> [PresenceChange]? in
            if case .presenceDiff(_, _, let changes) = message { changes } else { nil }
        }
        #expect(diffs.flatMap { $0 } == [.left(memberID: remote.memberID, reason: PresenceDeparture.nodeLost.rawValue)])
        #expect(harness.hub.remotePresenceIDs(room: "r").isEmpty)
    }
}
