import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncStore
import SnapSyncStoreTestSupport
import SnapSyncWire
@testable import SnapSyncHub
@testable import SnapSyncServer

// Cluster mode: which records a replica applies, voids or refuses, by the sequence each
// record's proposer expected against the last one the replica has (Protocol/CLUSTER.md §3,
// "Void records and gaps").

@Suite(.unitTests) struct HubClusterRecordsTests {
    /// The stream's retention dropped records after the checkpoint a node loads (the later
    /// checkpoints were lost), or there is no checkpoint at all: the records the node sees do
    /// not follow its base. Taking them as void would leave it at the base's state, and its
    /// writes, proposed from there, would fork the room: it refuses the room instead.
    @Test(arguments: [true, false])
    func aNodeThatMissedRecordsRefusesTheRoomInsteadOfForking(fromACheckpoint: Bool) throws {
        let cluster = ClusterHarness(nodes: 1) { $0.clusterCheckpointInterval = 2 }
        let node = cluster.nodes[0]
        cluster.log.retain = 3
        cluster.log.losesCheckpoints = !fromACheckpoint
        let writer = node.connect()
        for (index, id) in ["a", "b", "c", "d", "e", "f"].enumerated() {
            if index == 2 { cluster.log.losesCheckpoints = true }
            node.mutate(writer, "room", addItem(id, first: index == 0), requestID: UInt64(index))
            cluster.settle()
        }
        #expect(node.drain(writer).compactMap(\.ackVersion) == Array(1...6))
        #expect(cluster.log.records(of: "room").map(\.sequence) == [4, 5, 6])
        #expect(cluster.log.checkpoint(of: "room")?.sequence == (fromACheckpoint ? 2 : nil))
        let late = cluster.addNode()
        let session = late.connect()
        late.join(session, "room", requestID: 7)
        late.mutate(session, "room", addItem("g"), requestID: 8, writeID: [8])
        cluster.settle()
        let answers = late.drain(session)
        #expect(answers.map(\.errorCode) == [.storageFailure, .storageFailure] && answers.map(\.requestID) == [7, 8])
        guard case .reject(_, _, _, _, let message) = answers.first else {
            Issue.record("not REJECT: \(answers)")
            return
        }
        #expect(message.contains("record at sequence 4 follows sequence 3"), "\(message)")
        #expect(message.contains("only up to sequence \(fromACheckpoint ? 2 : 0)"), "\(message)")
        #expect(late.hub.replicas.isEmpty && late.hub.rooms.isEmpty && session.memberships.isEmpty)
        // Nothing was proposed: the room is as its writer left it.
        #expect(cluster.log.records(of: "room").map(\.sequence) == [4, 5, 6])
        #expect(node.hub.rooms["room"]?.version == 6)
        // A node that held the room goes on, and its next checkpoint lets the other one load it.
        cluster.log.losesCheckpoints = false
        node.mutate(writer, "room", addItem("g"), requestID: 9)
        node.mutate(writer, "room", addItem("h"), requestID: 10)
        cluster.settle()
        #expect(node.drain(writer).compactMap(\.ackVersion) == [7, 8])
        #expect(late.join(session, "room", requestID: 11).isEmpty)
        cluster.settle()
        #expect(late.drain(session).first?.snapshotVersion == 8)
        #expect(late.hub.rooms["room"]?.digest == node.hub.rooms["room"]?.digest)
    }

    /// Two nodes and a log that keeps 2 records per room: `node`'s member joined the room at
    /// version 1, then `node` lost its follow while `other`'s writer wrote versions 2–4, past
    /// what the log keeps, with no checkpoint (every 100 versions) to start from.
    private static func replicaLeftBehindTheRetention() -> (
        cluster: ClusterHarness, node: HubHarness, other: HubHarness, member: Session, writer: Session
    ) {
        let cluster = ClusterHarness(nodes: 2) { $0.clusterCheckpointInterval = 100 }
        let (node, other) = (cluster.nodes[0], cluster.nodes[1])
        cluster.log.retain = 2
        let member = node.connect(), writer = other.connect()
        node.join(member, "room")
        other.mutate(writer, "room", addItem("a", first: true), requestID: 1)
        cluster.settle()
        cluster.log.interruptFollow(of: "room")
        cluster.settle()
        // One record each (writes that wait go together in one record).
        for (index, id) in ["b", "c", "d"].enumerated() {
            other.mutate(writer, "room", addItem(id), requestID: UInt64(2 + index))
            cluster.settle()
        }
        return (cluster, node, other, member, writer)
    }

    /// A replica that was current, its follow lost while the others wrote past the stream's
    /// retention, follows again from its own position: the records left do not follow it, so it
    /// keeps refusing writes (reads go on from the replica) instead of forking.
    @Test func aReplicaFollowedAgainPastTheRetentionKeepsRefusingWrites() throws {
        let (cluster, node, other, member, writer) = Self.replicaLeftBehindTheRetention()
        #expect(node.drain(member).compactMap(\.diffVersion) == [1])
        #expect(other.drain(writer).compactMap(\.ackVersion) == [1, 2, 3, 4])
        node.hub.maintainReplicas(now: node.later(.seconds(1)))
        cluster.settle()
        #expect(node.hub.replicas["room"]?.phase == .broken && node.hub.rooms["room"]?.version == 1)
        node.mutate(member, "room", addItem("e"), requestID: 5)
        cluster.settle()
        #expect(node.drain(member).map(\.errorCode) == [.storageFailure])
        #expect(cluster.log.records(of: "room").count == 2 && other.hub.rooms["room"]?.version == 4)
    }

    /// A room whose follow keeps failing (here: a gap no checkpoint covers) is followed again
    /// after 1, 2, 4 … seconds, at most 64, not every second with an error each time; the count
    /// starts again once the room is current.
    @Test func aRoomThatCannotBeFollowedIsTriedAgainLessAndLessOften() throws {
        let (cluster, node, _, _, _) = Self.replicaLeftBehindTheRetention()
        let replica = try #require(node.hub.replicas["room"])
        #expect(replica.phase == .broken && replica.failedFollows == 1)
        #expect(node.hub.stats.clusterFollowFailures == 1)
        for (failures, delay) in [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16), (6, 32), (7, 64), (8, 64)] {
            #expect(replica.failedFollows == failures)
            node.hub.maintainReplicas(now: replica.followAgainAt - .milliseconds(1))
            #expect(replica.phase == .broken, "followed again before its \(delay) s")
            let due = replica.followAgainAt
            #expect(due == node.clock.now + .seconds(delay))
            node.clock.advance(by: .seconds(delay))
            node.hub.maintainReplicas(now: due)
            #expect(replica.phase == .refollowing)
            cluster.settle()
            #expect(replica.phase == .broken && replica.failedFollows == failures + 1)
            #expect(node.hub.stats.clusterFollowFailures == UInt64(failures + 1))
            let next = Duration.seconds(min(2 * delay, 64))
            #expect(replica.followAgainAt == due + next, "after \(failures + 1) failures")
        }
    }

    /// nats-server 2.9's bug nats-io/nats-server#4320: two proposals expecting one sequence are both stored. The later
    /// is void on every replica; its proposer validates the write again and proposes it anew.
    @Test func aStaleRecordTheLogStoredIsVoidEverywhereAndItsWriteProposedAgain() throws {
        let cluster = ClusterHarness()
        let writers = cluster.nodes.map { $0.connect() }
        for (node, writer) in zip(cluster.nodes, writers) { node.join(writer, "room") }
        cluster.nodes[0].mutate(writers[0], "room", addItem("a", first: true), requestID: 1)
        cluster.settle()
        for (node, writer) in zip(cluster.nodes, writers) { _ = node.drain(writer) }
        cluster.log.storesNextStaleProposal = true
        // Both expect sequence 1: node 0's is stored at 2, node 1's at 3 all the same.
        cluster.nodes[0].mutate(writers[0], "room", addItem("b"), requestID: 2, writeID: [2])
        cluster.nodes[1].mutate(writers[1], "room", addItem("c"), requestID: 3, writeID: [3])
        cluster.settle()
        let records = cluster.log.records(of: "room")
        #expect(records.map(\.sequence) == [1, 2, 3, 4] && records.map(\.expected) == [0, 1, 1, 3])
        let answers = zip(cluster.nodes, writers).map { $0.drain($1) }
        #expect(answers.map { $0.compactMap(\.diffVersion) } == [[2, 3], [2, 3], [2, 3]])
        #expect(answers.map { $0.compactMap(\.ackVersion) } == [[2], [3], []])
        let positions = cluster.positions("room")
        #expect(positions.count == 3 && Set(positions.map(\.version)) == [3] && Set(positions.map(\.digest)).count == 1)
        let room = try #require(cluster.nodes[2].hub.rooms["room"])
        #expect(room.snapshot.itemIdentifiers.map(\.description) == ["a", "b", "c"])
        #expect(cluster.nodes.allSatisfy { $0.hub.replicas["room"]?.logSequence == 4 && $0.hub.stats.writesApplied == 3 })
        // Each node counts the void record once, and /metrics says so.
        #expect(cluster.nodes.map(\.hub.stats.clusterVoidRecords) == [1, 1, 1])
        let metrics = MetricsRegistry(build: [])
        metrics.update(from: cluster.nodes[2].hub, connections: 0)
        let text = String(decoding: metrics.exposition(), as: UTF8.self)
        #expect(text.contains("snapsync_cluster_void_records_total 1\n"))
        #expect(text.contains(#"snapsync_cluster_rooms{state="current"} 1"#))
        #expect(text.contains("snapsync_cluster_follow_failures_total 0\n"))
        cluster.checkInvariants("room")
    }

    /// A record that expected the replica's last sequence but does not follow the room (a write
    /// at another version, a tombstone of another version) is damage, not void: the follow
    /// fails and the room refuses writes until it is followed again.
    @Test(arguments: [false, true])
    func aRecordAtItsPlaceThatDoesNotFollowTheRoomIsDamage(tombstone: Bool) throws {
        let cluster = ClusterHarness(nodes: 1)
        let node = cluster.nodes[0]
        let member = node.connect()
        node.join(member, "room")
        node.mutate(member, "room", addItem("a", first: true), requestID: 1)
        cluster.settle()
        #expect(node.drain(member).compactMap(\.ackVersion) == [1])
        let epoch = try #require(node.hub.rooms["room"]).epoch
        let entry: RoomLogEntry =
            tombstone
            ? .tombstone(epoch: epoch, version: 7)
            : .write(WriteRecord(room: "room", epoch: epoch, version: 3, writeID: [], diffFrame: []))
        MemoryRoomLog(sharing: cluster.log).propose(room: "room", expectedSequence: 1, messageID: [], entry: entry) { _ in }
        cluster.settle()
        #expect(node.hub.replicas["room"]?.phase == .broken && node.hub.replicas["room"]?.logSequence == 1)
        #expect(node.drain(member).isEmpty && member.memberships.count == 1)
        node.mutate(member, "room", addItem("b"), requestID: 2)
        #expect(node.drain(member).map(\.errorCode) == [.storageFailure])
    }
}
