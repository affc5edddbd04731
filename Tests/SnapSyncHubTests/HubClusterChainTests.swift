import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncStore
import SnapSyncStoreTestSupport
import SnapSyncWire
@testable import SnapSyncHub
@testable import SnapSyncServer

// Cluster mode when the log itself misbehaves (Protocol/CLUSTER.md §3, "The room's chain"): a
// record acknowledged and then lost, two nodes that saw different records at one sequence, a
// record whose proposer was on another history. And the writes that wait, proposed together.

@Suite(.unitTests) struct HubClusterChainTests {
    /// Six sessions of `node` that each append an item with a payload of `bytes` bytes to
    /// section "s" of "room" (the first makes the section), the room loaded first: the first
    /// write is proposed alone, the others wait for it; then everything settles.
    private static func sixWritersOfOneItem(of bytes: Int, on node: HubHarness, in cluster: ClusterHarness) -> [Session] {
        let writers = (0..<6).map { _ in node.connect() }
        node.join(writers[0], "room")
        cluster.settle()
        _ = node.drain(writers[0])
        let payload = String(repeating: "p", count: bytes)
        for (index, writer) in writers.enumerated() {
            let item = [SnapshotOperation.appendItems([hubElement("w\(index)", payload)], toSection: "s")]
            node.mutate(writer, "room", (index == 0 ? [.appendSections([hubElement("s")])] : []) + item, requestID: UInt64(index))
        }
        cluster.settle()
        return writers
    }

    /// Node A's write is acknowledged and delivered to A, then lost by the log (JetStream's
    /// stores diverging): B's write takes its sequence. A cannot tell until B's next record,
    /// which follows B's chain: A's members are sent LEFT, its replica is forgotten, and a join
    /// again loads the room as the log has it, where every node agrees. Without the chain, A
    /// would apply B's second write on top of its own and both would sit at version 2 with
    /// different rooms.
    @Test func aNodeOnAnotherHistorySendsItsMembersLeftAndLoadsTheRoomAgain() throws {
        let (cluster, a, b, onA, onB) = ClusterHarness.aMemberOnEachOfTwoNodes()

        cluster.log.losesNextProposal(deliveredToProposer: true)
        a.mutate(onA, "room", addItem("lost", first: true), requestID: 1, writeID: [1])
        cluster.settle()
        // What the engine lost was acknowledged here: no node can see that it will be lost.
        #expect(a.drain(onA).compactMap(\.ackVersion) == [1])
        #expect(cluster.log.records(of: "room").isEmpty)

        b.mutate(onB, "room", addItem("kept", first: true), requestID: 2, writeID: [2])
        cluster.settle()
        b.mutate(onB, "room", addItem("next"), requestID: 3, writeID: [3])
        cluster.settle()
        #expect(b.drain(onB).compactMap(\.ackVersion) == [1, 2])
        let answers = a.drain(onA)
        guard case .left(let room, let code, let message)? = answers.last else {
            Issue.record("no LEFT: \(answers)")
            return
        }
        #expect(room == "room" && code == ErrorCode.storageFailure.rawValue && message.contains("join again"))
        #expect(a.hub.stats.clusterDivergences == 1 && a.hub.rooms["room"] == nil && onA.memberships.isEmpty)
        let metrics = MetricsRegistry(build: [])
        metrics.update(from: a.hub, connections: 0)
        #expect(String(decoding: metrics.exposition(), as: UTF8.self).contains("snapsync_cluster_divergences_total 1\n"))

        #expect(a.join(onA, "room", requestID: 4).isEmpty)
        cluster.settle()
        #expect(a.drain(onA).first?.snapshotVersion == 2)
        cluster.expectConverged("room", version: 2)
        #expect(a.hub.rooms["room"]?.snapshot.itemIdentifiers.map(\.description) == ["kept", "next"])
    }

    /// A record whose chain before is not the chain of the records before it in the log: its
    /// proposer was on another history. A node that holds the room cannot tell whether it or
    /// the proposer left the log, so it loads the room again; loading, every node takes the
    /// log's own state as the truth and the record as void, so all agree.
    @Test func aRecordFollowingAnotherChainIsVoidToEveryNodeThatLoadsTheRoom() throws {
        let cluster = ClusterHarness(nodes: 2)
        let (a, b) = (cluster.nodes[0], cluster.nodes[1])
        let writer = a.connect()
        a.join(writer, "room")
        a.mutate(writer, "room", addItem("first", first: true), requestID: 1)
        cluster.settle()
        #expect(a.drain(writer).compactMap(\.ackVersion) == [1])

        let rival = MemoryRoomLog(sharing: cluster.log)
        let epoch = rival.epoch(room: "room", after: 0)
        let last = try #require(cluster.log.records(of: "room").last?.sequence)
        let frame = FrameEncoder().encode(.diff(room: "room", epoch: epoch, version: 2, ops: [.appendSections([hubElement("forked")])]))
        let elsewhere = RoomChain.start(epoch: epoch).next(frame: [1, 2, 3])
        let forked = ChainedWrites(records: [WriteRecord(room: "room", epoch: epoch, version: 2, writeID: [], diffFrame: frame)], after: elsewhere)
        rival.propose(room: "room", expectedSequence: last, messageID: [], entry: .writes(forked)) { _ in }
        cluster.settle()
        // A, current, leaves its members and forgets the room.
        #expect(a.hub.stats.clusterDivergences == 1 && a.hub.rooms["room"] == nil)
        #expect(a.drain(writer).last.map { if case .left = $0 { true } else { false } } == true)

        // B loads it fresh: the record is void; so does A, joining again.
        let reader = b.connect()
        b.join(reader, "room")
        a.join(writer, "room", requestID: 2)
        cluster.settle()
        #expect(b.drain(reader).first?.snapshotVersion == 1 && a.drain(writer).first?.snapshotVersion == 1)
        #expect(b.hub.stats.clusterVoidRecords == 1 && a.hub.stats.clusterVoidRecords == 1)
        // And the room goes on from the log's state.
        a.mutate(writer, "room", addItem("second"), requestID: 3, expectedVersion: 1)
        cluster.settle()
        #expect(a.drain(writer).compactMap(\.ackVersion) == [2])
        #expect(b.drain(reader).compactMap(\.diffVersion) == [2])
        cluster.expectConverged("room", version: 2)
        #expect(a.hub.rooms["room"]?.snapshot.itemIdentifiers.map(\.description) == ["first", "second"])
    }

    /// The log answers `.stored` at a sequence where another node's record lands (it lost this
    /// node's): the write is not acknowledged there. A plain write is validated and proposed
    /// again, and acknowledged at the version it then makes; a compare-and-set is refused with
    /// `version_mismatch`. No version is acknowledged to two writes.
    @Test(arguments: [false, true])
    func anAckNamesTheRecordStoredAtItsSequence(compareAndSet: Bool) throws {
        let cluster = ClusterHarness(nodes: 2)
        let (a, b) = (cluster.nodes[0], cluster.nodes[1])
        let onA = a.connect(), onB = b.connect()
        a.join(onA, "room")
        cluster.settle()
        _ = a.drain(onA)

        cluster.log.losesNextProposal(deliveredToProposer: false)
        a.mutate(onA, "room", [.appendSections([hubElement("mine")])], requestID: 1, expectedVersion: compareAndSet ? 0 : nil, writeID: [1])
        b.mutate(onB, "room", addItem("theirs", first: true), requestID: 2, writeID: [2])
        cluster.settle()
        #expect(b.drain(onB).compactMap(\.ackVersion) == [1])
        let answers = a.drain(onA)
        #expect(answers.compactMap(\.diffVersion) == (compareAndSet ? [1] : [1, 2]))
        if compareAndSet {
            #expect(answers.compactMap(\.errorCode) == [.versionMismatch] && answers.compactMap(\.ackVersion).isEmpty)
        } else {
            #expect(answers.compactMap(\.ackVersion) == [2])
        }
        #expect(a.hub.stats.clusterProposalsRetried == 1)
        cluster.expectConverged("room", version: compareAndSet ? 1 : 2)
    }

    /// Writes of several clients that arrive while a record is in flight go in the next record
    /// together, each validated against what the ones before it lead to, and each acknowledged
    /// at its own version. A write that would be refused against that state (a compare-and-set
    /// at the room's version) ends the record, and is validated against the room once the
    /// record is applied.
    @Test func writesThatWaitGoTogetherInOneRecord() throws {
        let cluster = ClusterHarness(nodes: 2)
        let (a, b) = (cluster.nodes[0], cluster.nodes[1])
        let reader = b.connect()
        b.join(reader, "room")
        let writers = (0..<6).map { _ in a.connect() }
        a.join(writers[0], "room")
        cluster.settle()
        _ = a.drain(writers[0])
        a.mutate(writers[0], "room", addItem("w0", first: true), requestID: 10, writeID: [10])
        a.mutate(writers[1], "room", addItem("w1"), requestID: 11, writeID: [11])
        a.mutate(writers[2], "room", addItem("w2"), requestID: 12, writeID: [12])
        // Valid only against the room at version 1, which the record before it moves on.
        a.mutate(writers[3], "room", addItem("w3"), requestID: 13, expectedVersion: 1, writeID: [13])
        a.mutate(writers[4], "room", addItem("w4"), requestID: 14, writeID: [14])
        a.mutate(writers[5], "room", addItem("w5"), requestID: 15, writeID: [15])
        cluster.settle()
        let acks = writers.map { a.drain($0).compactMap(\.ackVersion) }
        #expect(acks == [[1], [2], [3], [], [4], [5]])
        let sizes = cluster.log.writesPerRecord(of: "room")
        // w0 alone (nothing waited yet); w1 and w2; w3 refused against version 3; w4 and w5.
        #expect(sizes == [1, 2, 2])
        #expect(a.hub.stats.clusterRecordsProposed == 3 && a.hub.stats.clusterWritesProposed == 5)
        let metrics = MetricsRegistry(build: [])
        metrics.update(from: a.hub, connections: 0)
        let text = String(decoding: metrics.exposition(), as: UTF8.self)
        #expect(text.contains("snapsync_cluster_records_proposed_total 3\n") && text.contains("snapsync_cluster_writes_proposed_total 5\n"))
        #expect(b.drain(reader).compactMap(\.diffVersion) == [1, 2, 3, 4, 5])
        cluster.expectConverged("room", version: 5)
    }

    /// One client's writes of one room join the room's queue at once, without waiting for each
    /// other's answers, so they too go together in a record; its answers keep its requests'
    /// order, and a request of another kind (or another room) after them waits for them all.
    @Test func oneClientsWritesOfARoomArePipelinedAndAnsweredInOrder() throws {
        let cluster = ClusterHarness(nodes: 1)
        let node = cluster.nodes[0]
        let writer = node.connect()
        node.join(writer, "room")
        cluster.settle()
        _ = node.drain(writer)
        node.mutate(writer, "room", addItem("w0", first: true), requestID: 10, writeID: [10])
        for index in 1...4 {
            node.mutate(writer, "room", addItem("w\(index)"), requestID: 10 + UInt64(index), writeID: [10 + UInt8(index)])
        }
        node.mutate(writer, "other", addItem("x", first: true), requestID: 20, writeID: [20])
        node.mutate(writer, "room", addItem("w5"), requestID: 21, writeID: [21])
        #expect(writer.logWaits == 5 && writer.deferredInput.count == 2)
        cluster.settle()
        let answers = node.drain(writer).filter { $0.diffVersion == nil }
        #expect(answers.map(\.requestID) == [10, 11, 12, 13, 14, 20, 21])
        #expect(answers.compactMap(\.ackVersion) == [1, 2, 3, 4, 5, 1, 6])
        let sizes = cluster.log.writesPerRecord(of: "room")
        // w0 alone; w1...w4, queued while it was in flight, together; w5 after "other".
        #expect(sizes == [1, 4, 1])
        #expect(writer.logWaits == 0 && writer.pipelinedRoom == nil)
        cluster.checkInvariants("room")
    }

    /// The same write through two nodes at once (a client that retried it elsewhere): JetStream
    /// answers the second publish "duplicate message id is in process" (`.pending`) while the
    /// first is stored. The node asks again at its next tick and gets the first one's outcome:
    /// one ACK at the version the write made, not `storage_failure`.
    @Test func aWriteWhoseTwinIsBeingStoredIsAskedAgainNotRefused() throws {
        let (cluster, a, b, onA, onB) = ClusterHarness.aMemberOnEachOfTwoNodes()
        cluster.log.answersNextProposalPending = true
        a.mutate(onA, "room", addItem("twin", first: true), requestID: 1, writeID: [7])
        b.mutate(onB, "room", addItem("twin", first: true), requestID: 2, writeID: [7])
        cluster.settle()
        #expect(b.drain(onB).compactMap(\.ackVersion) == [1])
        #expect(a.drain(onA).compactMap(\.ackVersion).isEmpty && a.hub.replicas["room"]?.inFlight?.pending == true)
        a.hub.maintainReplicas(now: a.later(.seconds(1)))
        cluster.settle()
        let answers = a.drain(onA)
        #expect(answers.compactMap(\.ackVersion) == [1] && answers.compactMap(\.errorCode).isEmpty)
        #expect(cluster.log.writeCount(of: "room") == 1)
        cluster.expectConverged("room", version: 1)
    }

    /// A record of several writes fits the servers' `max_payload` as one write does: writes go
    /// together only while their frames, and each one's other fields, fit `max_frame_bytes`.
    @Test func aRecordOfSeveralWritesStaysWithinTheFrameLimit() throws {
        let cluster = ClusterHarness(nodes: 1) { $0.wire.maxFrameBytes = 1024 }
        let node = cluster.nodes[0]
        let writers = Self.sixWritersOfOneItem(of: 290, on: node, in: cluster)
        #expect(writers.map { node.drain($0).compactMap(\.ackVersion) } == [[1], [2], [3], [4], [5], [6]])
        let sizes = cluster.log.writesPerRecord(of: "room")
        #expect(sizes == [1, 2, 2, 1])
        for record in cluster.log.records(of: "room") {
            let frames = record.entry.encode(room: "room").count
            #expect(frames <= 1024 + 200, "a record of \(frames) bytes")
        }
        cluster.expectConverged("room", version: 6)
    }

    /// A replica on another history whose follow broke, followed again from a checkpoint past
    /// it: its members are not caught up from the checkpoint's history (that would apply the
    /// log's DIFFs on a state the log never had) but sent LEFT, since its chain does not lead to
    /// the checkpoint's. A replica merely behind is caught up (`aClientResumesOnAnotherNode…`).
    @Test func aReplicaOnAnotherHistoryFollowedAgainFromACheckpointSendsLeft() throws {
        let (cluster, a, b, member, writer) = ClusterHarness.aMemberOnEachOfTwoNodes { $0.clusterCheckpointInterval = 2 }
        cluster.log.losesNextProposal(deliveredToProposer: true)
        a.mutate(member, "room", addItem("lost", first: true), requestID: 1, writeID: [1])
        cluster.settle()
        #expect(a.drain(member).compactMap(\.ackVersion) == [1])
        cluster.log.interruptFollow(of: "room")
        cluster.settle()
        for (index, id) in ["kept", "two", "three"].enumerated() {
            b.mutate(writer, "room", addItem(id, first: index == 0), requestID: UInt64(2 + index))
            cluster.settle()
        }
        #expect(cluster.log.checkpoint(of: "room")?.image.version == 2)
        a.hub.maintainReplicas(now: a.later(.seconds(1)))
        cluster.settle()
        let answers = a.drain(member)
        #expect(answers.compactMap(\.diffVersion).isEmpty, "caught up on another history: \(answers)")
        guard case .left(_, let code, _)? = answers.last else {
            Issue.record("no LEFT: \(answers)")
            return
        }
        #expect(code == ErrorCode.storageFailure.rawValue && a.hub.stats.clusterDivergences == 1)
        cluster.expectConverged("room", version: 3)
    }

    /// The writes of one record are admitted by the rooms' memory bound one on top of the other,
    /// as a single node admits the writes of a batch: the record never takes the rooms past
    /// `--max-room-total-bytes`; the writes that would are refused `server_full`.
    @Test func aRecordOfSeveralWritesStaysWithinTheMemoryBound() throws {
        let limit = 3000
        let cluster = ClusterHarness(nodes: 1) { $0.maxRoomTotalBytes = limit }
        let node = cluster.nodes[0]
        let writers = Self.sixWritersOfOneItem(of: 250, on: node, in: cluster)
        let answers = writers.map { node.drain($0).filter { $0.diffVersion == nil } }
        let acked = answers.filter { $0.first?.ackVersion != nil }.count
        #expect(acked >= 2 && acked < 6, "\(answers)")
        #expect(answers.allSatisfy { $0.first?.ackVersion != nil || $0.first?.errorCode == .serverFull })
        #expect(node.hub.roomBudget.total <= limit, "the rooms hold \(node.hub.roomBudget.total) bytes")
        cluster.expectConverged("room", version: UInt64(acked))
    }

    /// A node that loaded the room from a checkpoint saved before checkpoints carried the chain
    /// does not know it: its record names the zero chain before it, and every replica, those
    /// that know the room's chain included, takes the record's chain after as the room's.
    @Test func aRecordOfAProposerThatDoesNotKnowTheChainSetsItEverywhere() throws {
        let cluster = ClusterHarness(nodes: 1)
        let old = cluster.nodes[0]
        let writer = old.connect()
        old.join(writer, "room")
        for (index, id) in ["a", "b"].enumerated() {
            old.mutate(writer, "room", addItem(id, first: index == 0), requestID: UInt64(index))
            cluster.settle()
        }
        let room = try #require(old.hub.rooms["room"])
        let last = try #require(cluster.log.records(of: "room").last?.sequence)
        cluster.log.saveCheckpoint(
            RoomImage(room: "room", epoch: room.epoch, version: room.version, snapshot: room.snapshot), history: [], sequence: last,
            chain: nil)
        let upgraded = cluster.addNode()
        let client = upgraded.connect()
        upgraded.join(client, "room")
        cluster.settle()
        #expect(upgraded.hub.rooms["room"]?.chain == nil)
        upgraded.mutate(client, "room", addItem("c"), requestID: 9)
        cluster.settle()
        #expect(upgraded.drain(client).compactMap(\.ackVersion) == [3])
        #expect(old.drain(writer).compactMap(\.diffVersion) == [1, 2, 3])
        #expect(old.hub.stats.clusterFollowFailures == 0 && old.hub.replicas["room"]?.phase == .current)
        let chains = [old, upgraded].map { $0.hub.rooms["room"]?.chain }
        #expect(chains[0] != nil && chains[0] == chains[1])
        #expect(old.hub.rooms["room"]?.digest == upgraded.hub.rooms["room"]?.digest)
    }
}
