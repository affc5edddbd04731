import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub

// VERIFY and DIGEST (PROTOCOL.md §11.22–§11.23): a member asks for the room's digest and chain
// at its position, on one node and on the nodes of a cluster.

@Suite(.unitTests) struct HubVerifyTests {
    @Test func aMemberGetsTheRoomsDigestAndChainBehindTheDiffsBeforeIt() throws {
        let harness = HubHarness()
        let member = harness.connect()
        harness.join(member, "room")
        harness.mutate(member, "room", addItem("a", first: true))
        harness.send(.verify(requestID: 9, room: "room"), from: member)
        let answer = harness.drain(member)
        let room = try #require(harness.hub.rooms["room"])
        guard answer.count == 3, case .diff(_, _, 1, _, let diffChain) = answer[0],
            case .digest(9, "room", let epoch, 1, let digest, let chain) = answer[2]
        else {
            Issue.record("expected DIFF, ACK, DIGEST at version 1, got \(answer)")
            return
        }
        #expect(epoch == room.epoch && digest == room.snapshot.digest)
        #expect(chain == room.chain && chain == diffChain && chain != .unknown)
        // Writes after it move the answer on.
        harness.mutate(member, "room", [.appendItems([hubElement("b", "B")], toSection: nil)])
        harness.send(.verify(requestID: 10, room: "room"), from: member)
        guard case .digest(10, "room", _, 2, let later, let laterChain)? = harness.drain(member).last else {
            Issue.record("expected a DIGEST at version 2")
            return
        }
        #expect(later == room.snapshot.digest && later != digest && laterChain == room.chain)
        harness.checkInvariants("room")
    }

    @Test func aConnectionThatIsNotAMemberIsRefusedNotJoined() {
        let harness = HubHarness()
        let writer = harness.connect(), other = harness.connect()
        harness.mutate(writer, "room", addItem("a", first: true))
        harness.send(.verify(requestID: 3, room: "room"), from: other)
        harness.send(.verify(requestID: 4, room: ""), from: other)
        #expect(harness.drain(other).map(\.errorCode) == [.notJoined, .notJoined])
        harness.join(other, "room")
        harness.send(.leave(requestID: 5, room: "room"), from: other)
        harness.send(.verify(requestID: 6, room: "room"), from: other)
        #expect(harness.drain(other).map(\.errorCode) == [nil, .notJoined])
        #expect(harness.hub.stats.protocolErrors == 0)
    }

    @Test func aVersionTwoConnectionHasNoVerify() {
        let harness = HubHarness()
        let old = harness.connect(versions: [2, 1])
        harness.join(old, "room")
        harness.send(.verify(requestID: 1, room: "room"), from: old)
        #expect(harness.drain(old).map(\.errorCode) == [.unknownMessageType])
        #expect(old.state == .closing)
    }

    /// A large room (here: any, the free size being 0) is hashed for VERIFY at most once per
    /// interval, whoever asks; a digest already known at the room's version is always sent.
    @Test func aLargeRoomIsHashedForVerifyAtMostOncePerInterval() throws {
        let harness = HubHarness {
            $0.verifyFreeDigestBytes = 0
            $0.verifyDigestInterval = .seconds(1)
        }
        let writer = harness.connect(), reader = harness.connect()
        harness.mutate(writer, "room", addItem("a", first: true))
        harness.join(reader, "room")
        harness.mutate(writer, "room", [.appendItems([hubElement("b")], toSection: nil)])
        _ = harness.drain(writer)
        func verify(_ session: Session, _ requestID: UInt64) -> Message? {
            harness.send(.verify(requestID: requestID, room: "room"), from: session)
            return harness.drain(session).last
        }
        guard case .digest(_, _, _, 2, _, _)? = verify(reader, 1) else { Issue.record("the first VERIFY is answered"); return }
        // Known at this version: answered again, from any member, however soon.
        harness.join(writer, "room")
        guard case .digest(_, _, _, 2, _, _)? = verify(writer, 2) else { Issue.record("a known digest is answered"); return }
        // A new version within the interval: declined, nothing else happens.
        harness.mutate(writer, "room", [.appendItems([hubElement("c")], toSection: nil)])
        _ = harness.drain(writer)
        harness.clock.advance(by: .milliseconds(500))
        #expect(verify(reader, 3)?.errorCode == .busy)
        #expect(verify(writer, 4)?.errorCode == .busy)
        #expect(reader.state != .closing && harness.hub.rooms["room"]?.members.count == 2)
        // Once the interval has passed, the room is hashed again.
        harness.clock.advance(by: .milliseconds(500))
        guard case .digest(_, _, _, 3, let digest, _)? = verify(reader, 5) else { Issue.record("answered after the interval"); return }
        #expect(digest == harness.hub.rooms["room"]?.snapshot.digest)
    }

    @Test func membersOnEveryNodeOfAClusterGetTheSameDigest() throws {
        let (cluster, a, b, onA, onB) = ClusterHarness.aMemberOnEachOfTwoNodes()
        a.mutate(onA, "room", addItem("a", first: true))
        cluster.settle()
        b.mutate(onB, "room", [.appendItems([hubElement("b")], toSection: nil)])
        cluster.settle()
        a.send(.verify(requestID: 1, room: "room"), from: onA)
        b.send(.verify(requestID: 1, room: "room"), from: onB)
        guard case .digest(_, _, let epochA, 2, let digestA, let chainA)? = a.drain(onA).last,
            case .digest(_, _, let epochB, 2, let digestB, let chainB)? = b.drain(onB).last
        else {
            Issue.record("expected a DIGEST at version 2 on both nodes")
            return
        }
        #expect(epochA == epochB && digestA == digestB && chainA == chainB)
        #expect(digestA == (try #require(a.hub.rooms["room"])).snapshot.digest)
        cluster.expectConverged("room", version: 2)
    }
}
