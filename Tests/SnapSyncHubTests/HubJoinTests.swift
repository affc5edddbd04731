import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub

// The handshake and JOIN, in-process: SNAPSHOT on a fresh JOIN, re-join, and resume (CATCHUP
// inside history, SNAPSHOT resync outside it or in another epoch).

@Suite(.unitTests) struct HubJoinTests {
    @Test func aFreshJoinGetsTheRoomsSnapshotAndSubscribes() throws {
        let harness = HubHarness()
        let writer = harness.connect()
        harness.mutate(writer, "room", addItem("a", first: true))
        #expect(harness.drain(writer).map(\.ackVersion) == [1])
        let reader = harness.connect()
        let answer = harness.join(reader, "room", requestID: 5)
        let room = try #require(harness.hub.rooms["room"])
        guard answer.count == 1, case .snapshot(5, "room", let epoch, 1, .initial, let digest, let snapshot, _) = answer[0] else {
            Issue.record("expected one SNAPSHOT(initial) at version 1, got \(answer)")
            return
        }
        #expect(epoch == room.epoch && snapshot == room.snapshot && digest == snapshot.digest)
        #expect(room.members.sessions.map(\.id) == [reader.id])
        #expect(reader.memberships["room"] === room)
    }

    @Test func joiningAgainAnswersAgainButSubscribesOnce() {
        let harness = HubHarness()
        let session = harness.connect()
        harness.join(session, "room")
        let again = harness.join(session, "room", requestID: 2)
        guard again.count == 1, case .snapshot(2, "room", _, 0, .initial, _, _, _) = again[0] else {
            Issue.record("expected SNAPSHOT for the second JOIN, got \(again)")
            return
        }
        #expect(harness.hub.rooms["room"]?.members.count == 1)
        harness.mutate(session, "room", addItem("a", first: true))
        #expect(harness.drain(session).map(\.diffVersion) == [1, nil])
    }

    @Test func aFrameBeforeHelloClosesWithHandshakeRequired() {
        let harness = HubHarness()
        let session = harness.hub.openSession()
        harness.send(.join(requestID: 1, room: "room", resume: nil), from: session)
        let answer = harness.drain(session)
        #expect(answer.map(\.errorCode) == [.handshakeRequired])
        #expect(session.state == .closing)
        #expect(harness.hub.rooms.isEmpty && harness.hub.stats.protocolErrors == 1)
    }

    @Test func helloWithoutTheServersVersionIsRefused() {
        let harness = HubHarness()
        let session = harness.hub.openSession()
        harness.send(.hello(versions: [ProtocolVersion.current + 1], clientName: "x", credentials: []), from: session)
        #expect(harness.drain(session).map(\.errorCode) == [.unsupportedVersion])
        #expect(session.state == .closing)
    }

    @Test func resumingInsideHistoryGetsCatchupAndTheMissingDiffs() throws {
        let harness = HubHarness()
        let writer = harness.connect()
        for (index, id) in ["a", "b", "c"].enumerated() { harness.mutate(writer, "room", addItem(id, first: index == 0)) }
        let epoch = try #require(harness.hub.rooms["room"]).epoch
        let reader = harness.connect()
        let answer = harness.join(reader, "room", resume: RoomPosition(epoch: epoch, version: 1), requestID: 3)
        guard answer.count == 3, case .catchup(3, "room", epoch, 1, 3, _) = answer[0] else {
            Issue.record("expected CATCHUP(1, 3) and two DIFFs, got \(answer)")
            return
        }
        #expect(answer.dropFirst().map(\.diffVersion) == [2, 3])
        let current = harness.join(reader, "room", resume: RoomPosition(epoch: epoch, version: 3), requestID: 4)
        guard current.count == 1, case .catchup(4, "room", epoch, 3, 3, _) = current[0] else {
            Issue.record("expected an empty CATCHUP(3, 3), got \(current)")
            return
        }
    }

    /// Version 3 (PROTOCOL.md §9): a resume whose chain is not the room's at its version is on
    /// another history and gets SNAPSHOT resync; the room's chain, or a zero one, gets CATCHUP;
    /// the chain before the oldest DIFF kept is compared too.
    @Test func resumingWithAnotherChainGetsSnapshotResync() throws {
        let harness = HubHarness { $0.wire.historyCount = 2 }
        let writer = harness.connect()
        for (index, id) in ["a", "b", "c", "d"].enumerated() { harness.mutate(writer, "room", addItem(id, first: index == 0)) }
        let room = try #require(harness.hub.rooms["room"])
        #expect(room.historyBaseVersion == 2)
        let reader = harness.connect()
        let other = try #require(RoomChain(bytes: [UInt8](repeating: 7, count: RoomChain.byteCount)))
        func answer(_ version: UInt64, _ chain: RoomChain, requestID: UInt64) -> [Message] {
            harness.send(.join(requestID: requestID, room: "room", resume: RoomPosition(epoch: room.epoch, version: version), chain: chain), from: reader)
            return harness.drain(reader)
        }
        for version: UInt64 in [2, 3, 4] {
            let right = answer(version, room.chain(atVersion: version), requestID: version)
            #expect(right.first.map { if case .catchup(_, _, _, version, 4, _) = $0 { true } else { false } } == true, "\(right)")
            let unknown = answer(version, .unknown, requestID: 10 + version)
            #expect(unknown.first.map { if case .catchup = $0 { true } else { false } } == true, "\(unknown)")
            let wrong = answer(version, other, requestID: 20 + version)
            guard wrong.count == 1, case .snapshot(_, _, _, 4, .resync, _, _, let chain) = wrong[0] else {
                Issue.record("expected SNAPSHOT(resync) for another chain at version \(version), got \(wrong)")
                return
            }
            #expect(chain == room.chain)
        }
        #expect(room.chain(atVersion: 2) != .unknown)
    }

    @Test func resumingOutsideHistoryOrInAnotherEpochGetsSnapshotResync() throws {
        let harness = HubHarness { $0.wire.historyCount = 2 }
        let writer = harness.connect()
        for (index, id) in ["a", "b", "c", "d"].enumerated() { harness.mutate(writer, "room", addItem(id, first: index == 0)) }
        let epoch = try #require(harness.hub.rooms["room"]).epoch
        let reader = harness.connect()
        for position in [RoomPosition(epoch: epoch, version: 1), RoomPosition(epoch: epoch &+ 1, version: 3), RoomPosition(epoch: epoch, version: 9)] {
            let answer = harness.join(reader, "room", resume: position)
            guard answer.count == 1, case .snapshot(_, "room", epoch, 4, .resync, _, _, _) = answer[0] else {
                Issue.record("expected SNAPSHOT(resync) at version 4 for \(position), got \(answer)")
                continue
            }
        }
        let inside = harness.join(reader, "room", resume: RoomPosition(epoch: epoch, version: 2))
        #expect(inside.dropFirst().map(\.diffVersion) == [3, 4])
    }
}
