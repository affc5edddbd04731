import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncStore
import SnapSyncStoreTestSupport
import SnapSyncWire
@testable import SnapSyncHub

// Cluster mode's read barriers: an answer a replica behind the log must not give from
// what it has (a resume ahead of it, a write that changes nothing there, a DROP of a room at
// version 0 there) waits until the replica has applied every record the log
// had acknowledged when the request arrived (`RoomLog.lastSequence`), or gives up after
// `ReplicatedRoom.stallSeconds` and answers as it would have.

@Suite(.unitTests) struct HubClusterBarrierTests {
    /// Node 1 follows `room`, written to version 10 through node 0 and applied everywhere.
    private func tenVersions(_ cluster: ClusterHarness) throws -> (member: Session, epoch: UInt64) {
        let writer = cluster.nodes[0].connect(), member = cluster.nodes[1].connect()
        cluster.nodes[1].join(member, "room")
        for index in 1...10 { cluster.nodes[0].mutate(writer, "room", addItem("w\(index)", first: index == 1), requestID: UInt64(index)) }
        cluster.settle()
        #expect(cluster.nodes[0].drain(writer).compactMap(\.ackVersion) == Array(1...10))
        #expect(cluster.nodes[1].drain(member).compactMap(\.diffVersion) == Array(1...10))
        return (member, try #require(cluster.nodes[1].hub.rooms["room"]).epoch)
    }

    /// A client that saw version 11 through another node resumes on node 1, whose replica is at
    /// 10 with versions 11 and 12 stored in the log and on their way: CATCHUP 11...12, not a
    /// resync, and its next request's answer after it.
    @Test func aResumeAheadOfALaggingReplicaIsAnsweredWithCatchupOnceItHasCaughtUp() throws {
        let cluster = ClusterHarness(nodes: 2)
        let (_, epoch) = try tenVersions(cluster)
        let node = cluster.nodes[1]
        storeWrites(in: cluster.log, room: "room", epoch: epoch, versions: 11...12)
        #expect(node.hub.rooms["room"]?.version == 10)
        let client = node.connect()
        #expect(node.join(client, "room", resume: RoomPosition(epoch: epoch, version: 11)).isEmpty)
        node.send(.ping(nonce: 5), from: client)
        cluster.settle()
        let answer = node.drain(client)
        guard let first = answer.first, case .catchup(1, "room", epoch, 11, 12, _) = first else {
            Issue.record("not CATCHUP 11...12: \(answer)")
            return
        }
        #expect(answer.dropFirst().map(\.diffVersion) == [12, nil] && answer.last == .pong(nonce: 5))
        #expect(client.memberships.count == 1 && !client.isAwaitingLog)
    }

    /// The resume names the incarnation a DROP (stored, not yet delivered here) began: the
    /// replica, still in the old epoch, waits for the tombstone, then answers CATCHUP in the new
    /// epoch rather than a resync to the dropped room's state.
    @Test func aResumeInAnEpochTheReplicaHasNotReachedWaitsForIt() throws {
        let cluster = ClusterHarness(nodes: 2)
        let (member, epoch) = try tenVersions(cluster)
        let node = cluster.nodes[1]
        let rival = MemoryRoomLog(sharing: cluster.log)
        let last = rival.records(of: "room").last?.sequence ?? 0
        rival.propose(room: "room", expectedSequence: last, messageID: [], entry: .tombstone(epoch: epoch, version: 10)) { _ in }
        let next = rival.epoch(room: "room", after: try #require(rival.records(of: "room").last).sequence)
        let client = node.connect()
        #expect(node.join(client, "room", resume: RoomPosition(epoch: next, version: 0)).isEmpty)
        cluster.settle()
        let answer = node.drain(client)
        guard answer.count == 1, case .catchup(1, "room", next, 0, 0, _) = answer[0] else {
            Issue.record("not CATCHUP 0...0 in the next epoch: \(answer)")
            return
        }
        #expect(node.drain(member) == [.left(room: "room", code: ErrorCode.roomDeleted.rawValue, message: "room room was deleted")])
        #expect(node.hub.rooms["room"]?.epoch == next)
    }

    /// Node 1's follow broke: its replica stays at 10 while the log moves on. The barrier's
    /// sequence comes, the replica is behind it: the JOIN waits until the room is followed again
    /// and has caught up.
    @Test func aResumeWaitsForABrokenFollowToBeFollowedAgain() throws {
        let cluster = ClusterHarness(nodes: 2)
        let (member, epoch) = try tenVersions(cluster)
        let node = cluster.nodes[1]
        try #require(node.hub.log as? MemoryRoomLog).interruptFollow(of: "room")
        cluster.settle()
        storeWrites(in: cluster.log, room: "room", epoch: epoch, versions: 11...12)
        cluster.settle()
        #expect(node.hub.rooms["room"]?.version == 10)
        let client = node.connect()
        node.send(.join(requestID: 1, room: "room", resume: RoomPosition(epoch: epoch, version: 12), chain: .unknown), from: client)
        node.send(.ping(nonce: 5), from: client)
        cluster.settle()
        #expect(node.drain(client).isEmpty && client.isAwaitingLog)
        node.hub.maintainReplicas(now: node.later(.seconds(1)))
        cluster.settle()
        let answer = node.drain(client)
        guard answer.count == 2, case .catchup(1, "room", epoch, 12, 12, _) = answer[0] else {
            Issue.record("not CATCHUP 12...12: \(answer)")
            return
        }
        #expect(answer[1] == .pong(nonce: 5) && node.drain(member).compactMap(\.diffVersion) == [11, 12])
    }

    /// The replica does not catch up within `ReplicatedRoom.stallSeconds`: the JOIN is answered from
    /// it as it is (a resync), and the session goes on.
    @Test func aBarrierGivenUpAnswersFromTheReplicaAsItIs() throws {
        let cluster = ClusterHarness(nodes: 2)
        let (_, epoch) = try tenVersions(cluster)
        let node = cluster.nodes[1]
        try #require(node.hub.log as? MemoryRoomLog).interruptFollow(of: "room")
        cluster.settle()
        storeWrites(in: cluster.log, room: "room", epoch: epoch, versions: 11...12)
        cluster.settle()
        let client = node.connect()
        node.send(.join(requestID: 1, room: "room", resume: RoomPosition(epoch: epoch, version: 12), chain: .unknown), from: client)
        node.send(.ping(nonce: 5), from: client)
        cluster.settle()
        node.hub.maintainReplicas(now: node.later(.seconds(ReplicatedRoom.stallSeconds - 1)))
        #expect(node.drain(client).isEmpty)
        node.clock.advance(by: .seconds(ReplicatedRoom.stallSeconds))
        node.hub.maintainReplicas(now: node.clock.now)
        let answer = node.drain(client)
        #expect(answer.count == 2 && answer.first?.snapshotVersion == 10 && answer.last == .pong(nonce: 5))
        guard case .snapshot(1, "room", epoch, 10, .resync, _, _, _) = answer.first else {
            Issue.record("not SNAPSHOT resync at 10: \(answer)")
            return
        }
        #expect(node.hub.replicas["room"]?.barriers.joinCount == 0)
    }

    /// The log cannot give the last sequence: the JOIN is answered from the replica as it is.
    @Test func aBarrierTheLogCannotGiveAnswersFromTheReplicaAsItIs() throws {
        let cluster = ClusterHarness(nodes: 1)
        let log = BarrierFailingLog(MemoryRoomLog(sharing: cluster.log))
        let node = HubHarness(log: log)
        let writer = cluster.nodes[0].connect(), client = node.connect()
        node.join(client, "room")
        cluster.nodes[0].mutate(writer, "room", addItem("a", first: true))
        cluster.settle()
        let epoch = try #require(node.hub.rooms["room"]).epoch
        #expect(node.drain(client).compactMap(\.diffVersion) == [1])
        log.failLastSequence = true
        #expect(node.join(client, "room", resume: RoomPosition(epoch: epoch, version: 2), requestID: 2).isEmpty)
        cluster.settle()
        let answer = node.drain(client)
        guard answer.count == 1, case .snapshot(2, "room", epoch, 1, .resync, _, _, _) = answer[0] else {
            Issue.record("not SNAPSHOT resync at 1: \(answer)")
            return
        }
        #expect(log.lastSequenceCalls == 1 && !client.isAwaitingLog)
    }

    /// At failover many clients resume ahead on one lagging node: their barriers share the
    /// log's answers (one request in flight per room, the waiters that came meanwhile sharing
    /// the next), and each gets its CATCHUP, then its next answer.
    @Test func manyResumesAheadShareTheLogsAnswers() throws {
        let cluster = ClusterHarness(nodes: 1)
        let log = BarrierFailingLog(MemoryRoomLog(sharing: cluster.log))
        let node = HubHarness(log: log)
        let writer = cluster.nodes[0].connect(), member = node.connect()
        node.join(member, "room")
        for index in 1...10 { cluster.nodes[0].mutate(writer, "room", addItem("w\(index)", first: index == 1), requestID: UInt64(index)) }
        cluster.settle()
        let epoch = try #require(node.hub.rooms["room"]).epoch
        storeWrites(in: cluster.log, room: "room", epoch: epoch, versions: 11...12)
        let clients = (0..<100).map { _ in node.connect() }
        for (index, client) in clients.enumerated() {
            node.send(.join(requestID: UInt64(index), room: "room", resume: RoomPosition(epoch: epoch, version: 11), chain: .unknown), from: client)
            node.send(.ping(nonce: UInt64(index)), from: client)
        }
        cluster.settle()
        #expect(log.lastSequenceCalls <= 2)
        for (index, client) in clients.enumerated() {
            let answer = node.drain(client)
            guard answer.count == 3, case .catchup(UInt64(index), "room", epoch, 11, 12, _) = answer[0] else {
                Issue.record("client \(index): not CATCHUP 11...12: \(answer)")
                return
            }
            #expect(answer[1].diffVersion == 12 && answer[2] == .pong(nonce: UInt64(index)))
        }
        #expect(node.hub.replicas["room"]?.barriers.joinCount == 0 && node.hub.replicas["room"]?.barriers.isAsking == false)
    }

    /// A JOIN that arrives while the log's answer for earlier barriers is in flight does not
    /// share it (it may not cover a write acknowledged before this JOIN arrived): it waits for
    /// the next, and gets the version stored meanwhile.
    @Test func aResumeArrivingWhileTheLastSequenceIsAskedWaitsForTheNextAnswer() throws {
        let cluster = ClusterHarness(nodes: 2)
        let (_, epoch) = try tenVersions(cluster)
        let node = cluster.nodes[1]
        storeWrites(in: cluster.log, room: "room", epoch: epoch, versions: 11...11)
        let first = node.connect(), second = node.connect()
        node.send(.join(requestID: 1, room: "room", resume: RoomPosition(epoch: epoch, version: 11), chain: .unknown), from: first)
        // Version 12 is acknowledged after the first barrier's request was sent, before the
        // second JOIN arrives.
        storeWrites(in: cluster.log, room: "room", epoch: epoch, versions: 12...12)
        node.send(.join(requestID: 2, room: "room", resume: RoomPosition(epoch: epoch, version: 12), chain: .unknown), from: second)
        cluster.settle()
        let answers = (node.drain(first), node.drain(second))
        guard case .catchup(1, "room", epoch, 11, _, _) = answers.0.first, case .catchup(2, "room", epoch, 12, 12, _) = answers.1.first else {
            Issue.record("not CATCHUPs from 11 and from 12: \(answers)")
            return
        }
    }

    /// A write that needs a barrier shares the log's answers with the JOINs; when an ask fails,
    /// every barrier sharing it is answered as a failed one, and those that came meanwhile are
    /// asked again.
    @Test func writesShareTheBarriersAndAFailedAskEndsThoseSharingIt() throws {
        let cluster = ClusterHarness(nodes: 1)
        let log = BarrierFailingLog(MemoryRoomLog(sharing: cluster.log))
        let node = HubHarness(log: log)
        let writer = node.connect()
        node.mutate(writer, "room", addItem("a", first: true), requestID: 1)
        cluster.settle()
        #expect(node.drain(writer).map(\.ackVersion) == [1])
        let epoch = try #require(node.hub.rooms["room"]).epoch
        storeWrites(in: cluster.log, room: "room", epoch: epoch, versions: 2...3)
        let clients = (0..<3).map { _ in node.connect() }
        node.join(clients[0], "room", resume: RoomPosition(epoch: epoch, version: 3), requestID: 1)
        node.mutate(writer, "room", [], requestID: 2)
        node.join(clients[1], "room", resume: RoomPosition(epoch: epoch, version: 3), requestID: 1)
        node.join(clients[2], "room", resume: RoomPosition(epoch: epoch, version: 3), requestID: 1)
        cluster.settle()
        #expect(log.lastSequenceCalls == 2 && node.drain(writer).map(\.ackVersion) == [3])
        for client in clients {
            guard case .catchup(1, "room", epoch, 3, 3, _) = node.drain(client).first else {
                Issue.record("not CATCHUP 3...3")
                return
            }
        }
        log.failLastSequence = true
        let late = (0..<2).map { _ in node.connect() }
        node.join(late[0], "room", resume: RoomPosition(epoch: epoch, version: 4), requestID: 1)
        node.join(late[1], "room", resume: RoomPosition(epoch: epoch, version: 4), requestID: 1)
        cluster.settle()
        #expect(log.lastSequenceCalls == 4 && late.map { node.drain($0).first?.snapshotVersion } == [3, 3])
        #expect(node.hub.replicas["room"]?.barriers.joinCount == 0 && node.hub.replicas["room"]?.barriers.isAsking == false)
    }

    /// A JOIN that waited for the room to load, resuming ahead of it, goes through a barrier too
    /// (it may name records stored after the follow began): here the log has nothing more, so it
    /// gets a resync, then its session goes on.
    @Test func aJoinThatWaitedForTheLoadAndResumesAheadGoesThroughABarrier() throws {
        let cluster = ClusterHarness(nodes: 1)
        let log = BarrierFailingLog(MemoryRoomLog(sharing: cluster.log))
        let node = HubHarness(log: log)
        let writer = cluster.nodes[0].connect()
        cluster.nodes[0].mutate(writer, "room", addItem("a", first: true))
        cluster.settle()
        let epoch = try #require(cluster.nodes[0].hub.rooms["room"]).epoch
        let client = node.connect()
        #expect(node.join(client, "room", resume: RoomPosition(epoch: epoch, version: 5)).isEmpty)
        node.send(.ping(nonce: 5), from: client)
        cluster.settle()
        let answer = node.drain(client)
        guard answer.count == 2, case .snapshot(1, "room", epoch, 1, .resync, _, _, _) = answer[0] else {
            Issue.record("not SNAPSHOT resync at 1: \(answer)")
            return
        }
        #expect(answer[1] == .pong(nonce: 5) && log.lastSequenceCalls == 1)
    }

    /// A resume the replica can answer (not ahead, same epoch) needs no barrier.
    @Test func aResumeTheReplicaHasIsAnsweredAtOnce() throws {
        let cluster = ClusterHarness(nodes: 1)
        let log = BarrierFailingLog(MemoryRoomLog(sharing: cluster.log))
        let node = HubHarness(log: log)
        let client = node.connect()
        node.join(client, "room")
        node.mutate(client, "room", addItem("a", first: true))
        cluster.settle()
        let epoch = try #require(node.hub.rooms["room"]).epoch
        _ = node.drain(client)
        let answer = node.join(client, "room", resume: RoomPosition(epoch: epoch, version: 1), requestID: 2)
        guard answer.count == 1, case .catchup(2, "room", epoch, 1, 1, _) = answer[0] else {
            Issue.record("not CATCHUP 1...1: \(answer)")
            return
        }
        #expect(log.lastSequenceCalls == 0)
    }

    // MARK: Answers to writes without the log

    /// A REPLACE by the room as node 1 has it (version 10) changes nothing there, but takes out
    /// the items of versions 11 and 12, stored in the log and on their way: validated again
    /// after a barrier, it is applied at 13.
    @Test func anUnchangedWriteOnALaggingReplicaIsValidatedAgainstTheLogsState() throws {
        let cluster = ClusterHarness(nodes: 2)
        let (member, epoch) = try tenVersions(cluster)
        let node = cluster.nodes[1]
        let stale = try #require(node.hub.rooms["room"]).snapshot
        storeWrites(in: cluster.log, room: "room", epoch: epoch, versions: 11...12)
        let client = node.connect()
        node.send(.replace(requestID: 3, room: "room", expectedVersion: nil, writeID: [3], snapshot: stale), from: client)
        #expect(node.drain(client).isEmpty)
        cluster.settle()
        #expect(node.drain(client).map(\.ackVersion) == [13])
        #expect(node.drain(member).compactMap(\.diffVersion) == [11, 12, 13])
        #expect(node.hub.rooms["room"]?.snapshot.numberOfItems == 10 && cluster.log.writeCount(of: "room") == 13)
        cluster.checkInvariants("room")
    }

    /// Writes that change nothing on node 1 (at 10, with 11 and 12 on their way): one that
    /// expects version 10 fails against the log's state, one without expectation is acknowledged
    /// at 12, not 10. Neither makes a record.
    @Test func unchangedWritesOnALaggingReplicaAreAnsweredAtTheLogsVersion() throws {
        let cluster = ClusterHarness(nodes: 2)
        let (_, epoch) = try tenVersions(cluster)
        let node = cluster.nodes[1]
        storeWrites(in: cluster.log, room: "room", epoch: epoch, versions: 11...12)
        let first = node.connect(), second = node.connect()
        node.mutate(first, "room", [], requestID: 1, expectedVersion: 10, writeID: [1])
        node.mutate(second, "room", [], requestID: 2, writeID: [2])
        #expect(node.drain(first).isEmpty && node.drain(second).isEmpty)
        cluster.settle()
        #expect(node.drain(first).map(\.errorCode) == [.versionMismatch])
        #expect(node.drain(second).map(\.ackVersion) == [12])
        #expect(cluster.log.writeCount(of: "room") == 12)
        // Its retry is the original's: the write id was remembered when it was answered.
        node.mutate(second, "room", [], requestID: 3, writeID: [2])
        cluster.settle()
        #expect(node.drain(second).map(\.ackVersion) == [12])
    }

    /// A compare-and-set expecting version 12 on node 1, at 10: the client saw 12 through
    /// another node; it is applied once the replica has caught up, not refused.
    @Test func aCompareAndSetAheadOfALaggingReplicaWaitsForIt() throws {
        let cluster = ClusterHarness(nodes: 2)
        let (_, epoch) = try tenVersions(cluster)
        let node = cluster.nodes[1]
        storeWrites(in: cluster.log, room: "room", epoch: epoch, versions: 11...12)
        let client = node.connect()
        node.mutate(client, "room", addItem("x"), requestID: 4, expectedVersion: 12)
        #expect(node.drain(client).isEmpty)
        cluster.settle()
        #expect(node.drain(client).map(\.ackVersion) == [13])
        // Ahead of the log too: refused after the barrier.
        node.mutate(client, "room", addItem("y"), requestID: 5, expectedVersion: 20)
        cluster.settle()
        #expect(node.drain(client).map(\.errorCode) == [.versionMismatch])
    }

    /// The barrier cannot be had: a write that changes nothing is refused `storage_failure`
    /// (nothing applied, a retry is safe), and the writes behind it go on.
    @Test func anUnchangedWriteWhoseBarrierFailsIsRefused() throws {
        let cluster = ClusterHarness(nodes: 1)
        let log = BarrierFailingLog(MemoryRoomLog(sharing: cluster.log))
        let node = HubHarness(log: log)
        let client = node.connect(), other = node.connect()
        node.mutate(client, "room", addItem("a", first: true), requestID: 1)
        cluster.settle()
        #expect(node.drain(client).map(\.ackVersion) == [1])
        log.failLastSequence = true
        node.mutate(client, "room", [], requestID: 2)
        node.mutate(other, "room", addItem("b"), requestID: 3)
        cluster.settle()
        #expect(node.drain(client).map(\.errorCode) == [.storageFailure] && node.drain(other).map(\.ackVersion) == [2])
        log.failLastSequence = false
        node.mutate(client, "room", [], requestID: 4)
        cluster.settle()
        #expect(node.drain(client).map(\.ackVersion) == [2] && log.lastSequenceCalls == 2)
    }

    // MARK: DROP

    /// Node 1 has the room at version 0; version 1, through another node, is on its way. The
    /// DROP waits for a barrier and drops version 1, through the log, rather than answering
    /// that there was no room.
    @Test func aDropOfARoomAtVersionZeroOnALaggingReplicaDropsWhatTheLogHas() throws {
        let cluster = ClusterHarness(nodes: 2)
        let node = cluster.nodes[1]
        let member = node.connect()
        node.join(member, "room")
        cluster.settle()
        _ = node.drain(member)
        let epoch = cluster.log.epoch(room: "room", after: 0)
        storeWrites(in: cluster.log, room: "room", epoch: epoch, versions: 1...1)
        node.send(.drop(requestID: 4, room: "room"), from: member)
        #expect(node.drain(member).isEmpty)
        cluster.settle()
        let answer = node.drain(member)
        #expect(answer.map(\.diffVersion) == [1, nil, nil])
        #expect(
            answer.dropFirst()
                == [.left(room: "room", code: ErrorCode.roomDeleted.rawValue, message: "room room was deleted"), .ack(requestID: 4, epoch: epoch, version: 1)]
        )
        #expect(cluster.log.records(of: "room").last?.entry.endedPosition == "\(epoch)/1")
    }

    /// A room nobody wrote: ACK (0, 0) after the barrier, nothing logged, as on a single node;
    /// without the barrier, REJECT `storage_failure` (a retry is safe).
    @Test func aDropOfARoomAtVersionZeroNeedsTheBarrier() throws {
        let cluster = ClusterHarness(nodes: 1)
        let log = BarrierFailingLog(MemoryRoomLog(sharing: cluster.log))
        let node = HubHarness(log: log)
        let member = node.connect()
        node.join(member, "room")
        cluster.settle()
        _ = node.drain(member)
        log.failLastSequence = true
        node.send(.drop(requestID: 1, room: "room"), from: member)
        cluster.settle()
        #expect(node.drain(member).map(\.errorCode) == [.storageFailure])
        log.failLastSequence = false
        node.send(.drop(requestID: 2, room: "room"), from: member)
        cluster.settle()
        #expect(node.drain(member) == [.ack(requestID: 2, epoch: 0, version: 0)])
        #expect(cluster.log.records(of: "room").isEmpty && member.memberships.count == 1)
    }

    /// At `--max-rooms`, a DROP of a room this node does not follow is not refused
    /// `too_many_rooms` (a single node drops a room it does not hold): the room is loaded,
    /// dropped, and let go.
    @Test func aDropIsNotRefusedForTheRoomCount() throws {
        let cluster = ClusterHarness(nodes: 1)
        let limited = cluster.addNode { $0.maxRooms = 1 }
        let admin = limited.connect(), writer = cluster.nodes[0].connect()
        limited.join(admin, "kept")
        cluster.nodes[0].mutate(writer, "written", addItem("a", first: true))
        cluster.settle()
        _ = limited.drain(admin)
        let epoch = try #require(cluster.nodes[0].hub.rooms["written"]).epoch
        limited.send(.drop(requestID: 1, room: "written"), from: admin)
        limited.send(.drop(requestID: 2, room: "never"), from: admin)
        cluster.settle()
        #expect(limited.drain(admin) == [.ack(requestID: 1, epoch: epoch, version: 1), .ack(requestID: 2, epoch: 0, version: 0)])
        #expect(cluster.log.records(of: "written").last?.entry.endedPosition == "\(epoch)/1")
        #expect(limited.hub.replicas.keys.map(\.string) == ["kept"] && limited.hub.rooms.keys.map(\.string) == ["kept"])
        #expect(limited.join(admin, "other", requestID: 3).map(\.errorCode) == [.tooManyRooms])
        // A single node at its limit answers the same.
        let single = HubHarness { $0.maxRooms = 1 }
        let session = single.connect()
        single.join(session, "kept")
        single.send(.drop(requestID: 2, room: "never"), from: session)
        #expect(single.drain(session) == [.ack(requestID: 2, epoch: 0, version: 0)])
    }
}

/// Stores write records of `room` at `versions` of `epoch` (each adding an item to section
/// `s`, version 1 the section too) through a connection of no node, as another node would: their deliveries are queued,
/// not run.
func storeWrites(in log: MemoryRoomLog, room: String, epoch: UInt64, versions: ClosedRange<UInt64>) {
    let rival = MemoryRoomLog(sharing: log)
    for version in versions {
        let last = rival.records(of: room).last?.sequence ?? 0
        let frame = FrameEncoder().encode(.diff(room: room, epoch: epoch, version: version, ops: addItem("r\(version)", first: version == 1)))
        rival.propose(
            room: room, expectedSequence: last, messageID: [],
            entry: .write(WriteRecord(room: room, epoch: epoch, version: version, writeID: [], diffFrame: frame))
        ) { _ in }
    }
}

/// A node's log that can fail `lastSequence` (as a log without quorum would), and counts it.
final class BarrierFailingLog: RoomLog {
    let inner: MemoryRoomLog
    var failLastSequence = false
    var lastSequenceCalls = 0

    init(_ inner: MemoryRoomLog) {
        self.inner = inner
    }

    func follow(room: String, events: @escaping (RoomLogEvent) -> Void) { inner.follow(room: room, events: events) }
    func unfollow(room: String) { inner.unfollow(room: room) }
    func propose(
        room: String, expectedSequence: UInt64, messageID: [UInt8], entry: RoomLogEntry, completion: @escaping (ProposalOutcome) -> Void
    ) {
        inner.propose(room: room, expectedSequence: expectedSequence, messageID: messageID, entry: entry, completion: completion)
    }
    func lastSequence(room: String, completion: @escaping (Result<UInt64, StoreError>) -> Void) {
        lastSequenceCalls += 1
        let fails = failLastSequence
        inner.lastSequence(room: room) { result in
            completion(fails ? .failure(.logUnavailable("last sequence of room \(room): no quorum (test)")) : result)
        }
    }
    func saveCheckpoint(_ image: RoomImage, history: [WriteRecord], sequence: UInt64, chain: RoomChain?) {
        inner.saveCheckpoint(image, history: history, sequence: sequence, chain: chain)
    }
    func epoch(room: String, after sequence: UInt64) -> UInt64 { inner.epoch(room: room, after: sequence) }
}
