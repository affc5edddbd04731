import Logging
import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncStore
import SnapSyncStoreTestSupport
import SnapSyncWire
@testable import SnapSyncHub
@testable import SnapSyncServer

// Cluster mode, in-process: three hubs sharing one MemoryRoomLog. A room changes only by
// the records the log delivers; the writer's ACK needs the log's acknowledgement and the record
// applied, in either order.

@Suite(.unitTests) struct HubClusterTests {
    @Test func aJoinOfAnUnknownRoomIsAnsweredOnceLoadedEmptyAtTheSameEpochEverywhere() throws {
        let cluster = ClusterHarness()
        let sessions = cluster.nodes.map { $0.connect() }
        for (node, session) in zip(cluster.nodes, sessions) {
            #expect(node.join(session, "room").isEmpty)
        }
        cluster.settle()
        let expected = cluster.log.epoch(room: "room", after: 0)
        for (node, session) in zip(cluster.nodes, sessions) {
            let answer = node.drain(session)
            guard answer.count == 1, case .snapshot(1, "room", let epoch, 0, .initial, _, let snapshot, _) = answer[0] else {
                Issue.record("not SNAPSHOT(initial) at version 0: \(answer)")
                continue
            }
            #expect(epoch == expected && snapshot.numberOfSections == 0)
        }
        #expect(cluster.log.records(of: "room").isEmpty)
        cluster.checkInvariants("room")
    }

    @Test func concurrentWritesFromThreeNodesEndInOneOrderEverywhere() throws {
        let cluster = ClusterHarness()
        let writers = cluster.nodes.map { $0.connect() }
        let watchers = cluster.nodes.map { $0.connect() }
        for (index, node) in cluster.nodes.enumerated() {
            node.join(writers[index], "room")
            node.join(watchers[index], "room")
        }
        cluster.settle()
        for (index, node) in cluster.nodes.enumerated() { _ = node.drain(writers[index]); _ = node.drain(watchers[index]) }
        // Each writer's first write creates the section if it is first; the others append.
        cluster.nodes[0].mutate(writers[0], "room", [.appendSections([hubElement("s")])], requestID: 100)
        cluster.settle()
        for (index, node) in cluster.nodes.enumerated() { _ = node.drain(writers[index]) }
        let perWriter = 5
        for round in 0..<perWriter {
            for (index, node) in cluster.nodes.enumerated() {
                node.mutate(writers[index], "room", addItem("n\(index)-\(round)"), requestID: UInt64(round), writeID: [UInt8(index), UInt8(round)])
            }
        }
        cluster.settle()
        // Every write is answered once, ACK or REJECT storage_failure (a node that lost the race
        // `ReplicatedRoom.maxAttempts` times: this queue delivers to the nodes in one order, so the
        // last one loses most); what was acked is in the room once, what was refused never.
        var acked: [UInt64] = []
        var ackedItems: [String] = []
        for (index, node) in cluster.nodes.enumerated() {
            let answers = node.drain(writers[index])
            #expect(answers.compactMap(\.requestID).sorted() == Array(0..<UInt64(perWriter)), "node \(index): \(answers)")
            #expect(answers.allSatisfy { $0.diffVersion != nil || $0.ackVersion != nil || $0.errorCode == .storageFailure })
            for answer in answers {
                guard let version = answer.ackVersion, let request = answer.requestID else { continue }
                acked.append(version)
                ackedItems.append("n\(index)-\(request)")
            }
        }
        let total = UInt64(1 + acked.count)
        #expect(acked.count >= 2 * perWriter)
        #expect(acked.sorted() == Array(2...total))
        for (index, node) in cluster.nodes.enumerated() {
            #expect(node.drain(watchers[index]).compactMap(\.diffVersion) == Array(1...total))
        }
        let positions = cluster.positions("room")
        #expect(positions.count == 3)
        #expect(Set(positions.map(\.version)) == [total] && Set(positions.map(\.digest)).count == 1 && Set(positions.map(\.epoch)).count == 1)
        let room = try #require(cluster.nodes[0].hub.rooms["room"])
        #expect(room.snapshot.itemIdentifiers.map(\.description).sorted() == ackedItems.sorted())
        #expect(cluster.log.writeCount(of: "room") == Int(total))
        cluster.checkInvariants("room")
        // Every node, the proposing ones included (which install a write's result rather than
        // apply its DIFF), keeps each write's undo: each rebuilds the room at version 1.
        for node in cluster.nodes {
            let room = try #require(node.hub.rooms["room"])
            let first = try #require(room.state(atVersion: 1))
            #expect(first.numberOfSections == 1 && first.numberOfItems == 0)
        }
    }

    /// Another writer wins before each of the node's proposals: the write is validated again
    /// after each record and proposed again, without an answer, while it is within its retry
    /// window; then refused, never applied.
    @Test func aWriteThatLosesEveryRaceIsProposedAgainUntilItsRetryWindowEnds() throws {
        let cluster = ClusterHarness(nodes: 1)
        let node = cluster.nodes[0]
        var now = ContinuousClock.now
        node.hub.monotonicNow = { now }
        let writer = node.connect()
        node.join(writer, "room")
        cluster.settle()
        _ = node.drain(writer)
        let rival = MemoryRoomLog(sharing: cluster.log)
        let epoch = rival.epoch(room: "room", after: 0)
        var won = 0
        var chain = RoomChain.start(epoch: epoch)
        cluster.log.beforeProposing = { room in
            let last = rival.records(of: room).last?.sequence ?? 0
            won += 1
            // Each lost race takes a second: the twelfth proposal comes 11 s after the write.
            if won > 1 { now += .seconds(1) }
            let frame = FrameEncoder().encode(
                .diff(room: room, epoch: epoch, version: UInt64(won), ops: [.appendSections([hubElement("rival-\(won)")])]))
            let writes = ChainedWrites(
                records: [WriteRecord(room: room, epoch: epoch, version: UInt64(won), writeID: [], diffFrame: frame)], after: chain)
            chain = writes.chainAfter
            rival.propose(room: room, expectedSequence: last, messageID: [], entry: .writes(writes)) { _ in }
        }
        node.mutate(writer, "room", addItem("mine", first: true), requestID: 5, writeID: [5])
        cluster.settle()
        let answers = node.drain(writer)
        let proposals = Int(ReplicatedRoom.retryWindow / .seconds(1)) + 1
        #expect(answers.compactMap(\.diffVersion) == Array(1...UInt64(proposals)))
        #expect(answers.compactMap(\.errorCode) == [.storageFailure] && answers.last?.requestID == 5)
        #expect(won == proposals)
        #expect(node.hub.stats.clusterProposalsRetried == UInt64(proposals))
        let room = try #require(node.hub.rooms["room"])
        #expect(room.version == UInt64(proposals) && room.snapshot.numberOfItems == 0)
        node.checkInvariants("room")
    }

    @Test func theCompareAndSetLoserGetsVersionMismatch() {
        let cluster = ClusterHarness()
        let a = cluster.nodes[0].connect(), b = cluster.nodes[1].connect()
        cluster.nodes[0].mutate(a, "room", addItem("a", first: true), requestID: 1, expectedVersion: 0)
        cluster.nodes[1].mutate(b, "room", addItem("b", first: true), requestID: 2, expectedVersion: 0)
        cluster.settle()
        let answers = cluster.nodes[0].drain(a) + cluster.nodes[1].drain(b)
        #expect(answers.compactMap(\.ackVersion) == [1])
        #expect(answers.compactMap(\.errorCode) == [.versionMismatch])
        #expect(cluster.log.records(of: "room").count == 1)
        #expect(Set(cluster.positions("room").map(\.version)) == [1])
        cluster.checkInvariants("room")
    }

    @Test func aWriteIDRetriedThroughAnotherNodeIsAckedAtTheOriginalVersion() {
        let cluster = ClusterHarness()
        let a = cluster.nodes[0].connect(), b = cluster.nodes[1].connect(), c = cluster.nodes[2].connect()
        let id: [UInt8] = [9, 9, 9]
        cluster.nodes[0].mutate(a, "room", addItem("a", first: true), requestID: 1, writeID: id)
        cluster.settle()
        cluster.nodes[0].mutate(a, "room", addItem("b"), requestID: 2)
        cluster.settle()
        // After the original was applied everywhere: the replica's window answers.
        cluster.nodes[1].mutate(b, "room", addItem("a", first: true), requestID: 3, writeID: id)
        cluster.settle()
        #expect(cluster.nodes[0].drain(a).compactMap(\.ackVersion) == [1, 2])
        #expect(cluster.nodes[1].drain(b).map(\.ackVersion) == [1])
        // Before node 2 has applied it (its proposal expects the empty subject): the log's
        // message-id de-duplication answers with the original's sequence.
        let id2: [UInt8] = [7]
        cluster.nodes[0].mutate(a, "other", addItem("x", first: true), requestID: 4, writeID: id2)
        cluster.nodes[2].mutate(c, "other", addItem("x", first: true), requestID: 5, writeID: id2)
        cluster.settle()
        #expect(cluster.nodes[0].drain(a).map(\.ackVersion) == [1])
        #expect(cluster.nodes[2].drain(c).map(\.ackVersion) == [1])
        #expect(cluster.log.records(of: "room").count == 2 && cluster.log.records(of: "other").count == 1)
        cluster.checkInvariants("room")
        cluster.checkInvariants("other")
    }

    /// A write id reused for another write is `write_id_conflict` on every node, as on a single
    /// node: the record carries the original's fingerprint to the other replicas' windows, to a
    /// checkpoint, and past the log's message-id de-duplication (which matches the id, not the
    /// write). The same write through another node is still its retry.
    @Test func aWriteIDReusedForAnotherWriteIsAConflictOnEveryNode() {
        let cluster = ClusterHarness { $0.clusterCheckpointInterval = 1 }
        let a = cluster.nodes[0].connect(), b = cluster.nodes[1].connect(), c = cluster.nodes[2].connect()
        let id: [UInt8] = [9, 9, 9]
        cluster.nodes[0].mutate(a, "room", addItem("a", first: true), requestID: 1, writeID: id)
        cluster.settle()
        cluster.nodes[1].mutate(b, "room", addItem("z", first: true), requestID: 2, writeID: id)
        cluster.nodes[1].mutate(b, "room", addItem("a", first: true), requestID: 3, writeID: id)
        cluster.settle()
        #expect(cluster.nodes[0].drain(a).compactMap(\.ackVersion) == [1])
        let answers = cluster.nodes[1].drain(b)
        #expect(answers.map(\.errorCode) == [.writeIDConflict, nil] && answers.last?.ackVersion == 1, "\(answers)")
        // A node that loads the room from its checkpoint knows the fingerprint too.
        let late = cluster.addNode()
        let d = late.connect()
        late.mutate(d, "room", addItem("y", first: true), requestID: 4, writeID: id)
        cluster.settle()
        #expect(late.drain(d).map(\.errorCode) == [.writeIDConflict])
        // Two writes under one id proposed at once from two nodes: the log stores the first and
        // answers the second with the first's sequence (same message id); the second's node
        // compares fingerprints once that record is applied.
        let other: [UInt8] = [7]
        cluster.nodes[0].mutate(a, "other", addItem("x", first: true), requestID: 5, writeID: other)
        cluster.nodes[2].mutate(c, "other", addItem("w", first: true), requestID: 6, writeID: other)
        cluster.settle()
        #expect(cluster.nodes[0].drain(a).map(\.ackVersion) == [1])
        #expect(cluster.nodes[2].drain(c).map(\.errorCode) == [.writeIDConflict])
        #expect(cluster.log.records(of: "room").count == 1 && cluster.log.records(of: "other").count == 1)
        cluster.checkInvariants("room")
        cluster.checkInvariants("other")
    }

    /// The log's acknowledgement first: no ACK until the record is applied here.
    @Test func anAckBeforeItsRecordWaitsForTheRecord() throws {
        let cluster = ClusterHarness(nodes: 2)
        cluster.log.acknowledgeBeforeDelivering = true
        let node = cluster.nodes[0]
        let writer = node.connect()
        node.join(writer, "room")
        cluster.settle()
        _ = node.drain(writer)
        node.mutate(writer, "room", addItem("a", first: true), requestID: 3)
        #expect(node.drain(writer).isEmpty)
        #expect(cluster.log.runNext())  // .stored
        #expect(node.drain(writer).isEmpty)
        #expect(node.hub.rooms["room"]?.version == 0)
        #expect(cluster.log.runNext())  // the record, to node 0
        let answers = node.drain(writer)
        #expect(answers.map(\.diffVersion) == [1, nil] && answers.last?.ackVersion == 1)
        cluster.settle()
        cluster.checkInvariants("room")
    }

    /// The record first: the writer (a member) gets its DIFF, and its ACK only with the log's
    /// acknowledgement.
    @Test func aRecordBeforeItsAckIsAppliedAndTheAckWaits() throws {
        let cluster = ClusterHarness(nodes: 2)
        cluster.log.acknowledgeBeforeDelivering = false
        let node = cluster.nodes[0]
        let writer = node.connect()
        node.join(writer, "room")
        cluster.settle()
        _ = node.drain(writer)
        node.mutate(writer, "room", addItem("a", first: true), requestID: 3)
        #expect(cluster.log.runNext())  // the record, to node 0
        #expect(node.drain(writer).map(\.diffVersion) == [1])
        #expect(node.hub.rooms["room"]?.version == 1)
        #expect(cluster.log.runNext())  // .stored
        #expect(node.drain(writer).map(\.ackVersion) == [1])
        cluster.settle()
        #expect(Set(cluster.positions("room").map(\.version)) == [1])
        cluster.checkInvariants("room")
    }

    @Test func aProposalTheLogDidNotConfirmIsStorageFailureAndItsRetryIsSafe() throws {
        let cluster = ClusterHarness()
        let node = cluster.nodes[0]
        let writer = node.connect()
        node.join(writer, "room")
        cluster.settle()
        _ = node.drain(writer)
        // Not stored: refused, nothing applied.
        cluster.log.failProposals = (1, .logUnavailable("no quorum"))
        node.mutate(writer, "room", addItem("a", first: true), requestID: 1, writeID: [1])
        cluster.settle()
        let refused = node.drain(writer)
        #expect(refused.map(\.errorCode) == [.storageFailure] && refused.first?.requestID == 1)
        #expect(node.hub.rooms["room"]?.version == 0 && cluster.log.records(of: "room").isEmpty)
        // Timed out but stored: refused, then applied from the log; the retry (same write id,
        // through another node) gets the original's version and nothing is applied twice.
        cluster.log.failProposals = (1, .logUnavailable("timeout"))
        cluster.log.storeFailedProposals = true
        node.mutate(writer, "room", addItem("a", first: true), requestID: 2, writeID: [2])
        cluster.settle()
        let answers = node.drain(writer)
        #expect(answers.compactMap(\.errorCode) == [.storageFailure] && answers.compactMap(\.diffVersion) == [1])
        let other = cluster.nodes[1].connect()
        cluster.nodes[1].mutate(other, "room", addItem("a", first: true), requestID: 3, writeID: [2])
        cluster.settle()
        #expect(cluster.nodes[1].drain(other).map(\.ackVersion) == [1])
        #expect(cluster.log.records(of: "room").count == 1)
        cluster.checkInvariants("room")
    }

    @Test func dropGoesThroughTheLogAndEveryNodeStartsTheNextEpoch() throws {
        let cluster = ClusterHarness()
        let members = cluster.nodes.map { $0.connect() }
        for (node, member) in zip(cluster.nodes, members) { node.join(member, "todo") }
        cluster.settle()
        cluster.nodes[0].mutate(members[0], "todo", addItem("a", first: true))
        cluster.settle()
        for (node, member) in zip(cluster.nodes, members) { _ = node.drain(member) }
        let old = try #require(cluster.nodes[0].hub.rooms["todo"]).epoch
        cluster.nodes[1].send(.drop(requestID: 9, room: "todo"), from: members[1])
        cluster.settle()
        let left = Message.left(room: "todo", code: ErrorCode.roomDeleted.rawValue, message: "room todo was deleted")
        #expect(cluster.nodes[1].drain(members[1]) == [left, .ack(requestID: 9, epoch: old, version: 1)])
        #expect(cluster.nodes[0].drain(members[0]) == [left] && cluster.nodes[2].drain(members[2]) == [left])
        let records = cluster.log.records(of: "todo")
        #expect(records.count == 2 && records.last?.entry.endedPosition == "\(old)/1")
        let next = cluster.log.epoch(room: "todo", after: records.last!.sequence)
        #expect(next != old)
        let positions = cluster.positions("todo")
        #expect(positions.count == 3 && positions.allSatisfy { $0.epoch == next && $0.version == 0 })
        for (node, member) in zip(cluster.nodes, members) {
            guard case .snapshot(_, _, let epoch, 0, .initial, _, _, _) = node.join(member, "todo").first else {
                Issue.record("no SNAPSHOT")
                continue
            }
            #expect(epoch == next)
        }
        #expect(cluster.nodes.allSatisfy { $0.hub.stats.roomsDeleted == 1 && $0.hub.totalItems == 0 })
        // The DROP retried: the room is at version 0, no room; nothing is logged or ended.
        cluster.nodes[2].send(.drop(requestID: 10, room: "todo"), from: members[2])
        cluster.settle()
        #expect(cluster.nodes[2].drain(members[2]) == [.ack(requestID: 10, epoch: 0, version: 0)])
        #expect(cluster.log.records(of: "todo").count == 2 && cluster.nodes[0].drain(members[0]).isEmpty)
        cluster.checkInvariants("todo")
    }

    /// The DROP's proposer checkpoints the next incarnation at the tombstone's sequence: a node
    /// that loads the room later starts there, whatever the stream's retention dropped before.
    @Test func aDropIsCheckpointedSoALaterFollowNeedsNothingBeforeIt() throws {
        let cluster = ClusterHarness(nodes: 2) { $0.clusterCheckpointInterval = 100 }
        let (node, other) = (cluster.nodes[0], cluster.nodes[1])
        cluster.log.retain = 2
        let writer = node.connect()
        // One record each (writes that wait go together in one record).
        for (index, id) in ["a", "b", "c"].enumerated() {
            node.mutate(writer, "room", addItem(id, first: index == 0), requestID: UInt64(index))
            cluster.settle()
        }
        node.send(.drop(requestID: 9, room: "room"), from: writer)
        cluster.settle()
        #expect(node.drain(writer).compactMap(\.ackVersion) == [1, 2, 3, 3])
        #expect(cluster.log.records(of: "room").map(\.sequence) == [3, 4])
        let checkpoint = try #require(cluster.log.checkpoint(of: "room"))
        #expect(checkpoint.sequence == 4 && checkpoint.image.epoch == cluster.log.epoch(room: "room", after: 4))
        #expect(checkpoint.image.version == 0 && checkpoint.image.snapshot.numberOfSections == 0 && checkpoint.history.isEmpty)
        let session = other.connect()
        other.join(session, "room")
        other.mutate(session, "room", addItem("x", first: true), requestID: 2)
        cluster.settle()
        let answers = other.drain(session)
        #expect(answers.first?.snapshotVersion == 0 && answers.compactMap(\.ackVersion) == [1])
        #expect(node.hub.rooms["room"]?.version == 1 && node.hub.rooms["room"]?.digest == other.hub.rooms["room"]?.digest)
        cluster.checkInvariants("room")
    }

    @Test func aClientResumesOnAnotherNodeWithCatchup() throws {
        let cluster = ClusterHarness()
        let writer = cluster.nodes[0].connect()
        cluster.nodes[0].join(writer, "room")
        cluster.settle()
        for (index, id) in ["a", "b", "c"].enumerated() {
            cluster.nodes[0].mutate(writer, "room", addItem(id, first: index == 0), requestID: UInt64(index))
        }
        cluster.settle()
        let epoch = try #require(cluster.nodes[0].hub.rooms["room"]).epoch
        let resumed = cluster.nodes[2].connect()
        #expect(cluster.nodes[2].join(resumed, "room", resume: RoomPosition(epoch: epoch, version: 1)).isEmpty)
        cluster.settle()
        let answer = cluster.nodes[2].drain(resumed)
        guard let first = answer.first, case .catchup(_, "room", epoch, 1, 3, _) = first else {
            Issue.record("not CATCHUP 1...3: \(answer)")
            return
        }
        #expect(answer.dropFirst().map(\.diffVersion) == [2, 3])
        cluster.checkInvariants("room")
    }

    /// A checkpoint whose chain before its history does not lead to its own chain (damage, or
    /// a node's bug): the node that loads it takes the checkpoint's chain, and the history's
    /// chains are unknown (zero in a CATCHUP), not made up from the wrong start.
    @Test func aCheckpointWhoseHistoryDoesNotLeadToItsChainLeavesTheHistorysChainsUnknown() throws {
        let cluster = ClusterHarness { $0.clusterCheckpointInterval = 2 }
        let writer = cluster.nodes[0].connect()
        for (index, id) in ["a", "b", "c", "d"].enumerated() {
            cluster.nodes[0].mutate(writer, "room", addItem(id, first: index == 0), requestID: UInt64(index))
            cluster.settle()
        }
        let saved = try #require(cluster.log.checkpoint(of: "room"))
        #expect(saved.image.version == 4 && saved.history.count == 4 && saved.image.chain != nil)
        cluster.log.damageCheckpoint(of: "room") { $0.image.chain = .start(epoch: 12345) }
        let late = cluster.addNode()
        late.join(late.connect(), "room")
        cluster.log.runAll()
        let room = try #require(late.hub.rooms["room"])
        let writersRoom = try #require(cluster.nodes[0].hub.rooms["room"])
        #expect(room.chain == writersRoom.chain && room.chain != nil)
        #expect(room.chain(atVersion: 3) == .unknown && writersRoom.chain(atVersion: 3) != .unknown)
    }

    @Test func theProposingNodeCheckpointsAndANewNodeLoadsFromIt() throws {
        let cluster = ClusterHarness { $0.clusterCheckpointInterval = 2 }
        let writer = cluster.nodes[0].connect()
        // One record each (writes that wait go together in one record).
        for (index, id) in ["a", "b", "c", "d", "e"].enumerated() {
            cluster.nodes[0].mutate(writer, "room", addItem(id, first: index == 0), requestID: UInt64(index), writeID: [UInt8(index + 1)])
            cluster.settle()
        }
        #expect(cluster.nodes[0].drain(writer).compactMap(\.ackVersion) == [1, 2, 3, 4, 5])
        let records = cluster.log.records(of: "room")
        #expect(cluster.log.savedCheckpoints.map(\.sequence) == [records[1].sequence, records[3].sequence])
        let checkpoint = try #require(cluster.log.checkpoint(of: "room"))
        #expect(checkpoint.image.version == 4 && checkpoint.history.map(\.version) == [1, 2, 3, 4])
        #expect(checkpoint.history.map(\.writeID) == [[1], [2], [3], [4]])
        // A node that loads the room now starts from the checkpoint and applies the tail: the
        // same room, its history for resume and its write ids for retries.
        let late = cluster.addNode()
        let session = late.connect()
        let epoch = try #require(cluster.nodes[0].hub.rooms["room"]).epoch
        late.join(session, "room", resume: RoomPosition(epoch: epoch, version: 2))
        cluster.log.runAll()
        let answer = late.drain(session)
        guard let first = answer.first, case .catchup(_, "room", epoch, 2, 5, _) = first else {
            Issue.record("not CATCHUP 2...5: \(answer)")
            return
        }
        #expect(late.hub.rooms["room"]?.digest == cluster.nodes[0].hub.rooms["room"]?.digest)
        // The checkpoint carries the chain at its version, so the tail's chain checks hold; and
        // the chain before its history, so the CATCHUP's DIFFs through that history carry the
        // chain after each (none is unknown), the writer's.
        #expect(checkpoint.chain != nil && late.hub.rooms["room"]?.chain == cluster.nodes[0].hub.rooms["room"]?.chain)
        #expect(checkpoint.image.chain == cluster.nodes[0].hub.rooms["room"]?.chain(atVersion: 0))
        let sent = answer.dropFirst().compactMap { if case .diff(_, _, let version, _, let chain?) = $0 { (version, chain) } else { nil } }
        #expect(sent.map(\.0) == [3, 4, 5])
        for (version, chain) in sent {
            #expect(chain != .unknown && chain == cluster.nodes[0].hub.rooms["room"]?.chain(atVersion: version), "v\(version)")
        }
        late.mutate(session, "room", addItem("c"), requestID: 9, writeID: [3])
        cluster.settle()
        #expect(late.drain(session).compactMap(\.ackVersion) == [3])
        late.checkInvariants("room")
    }

    @Test func aServerGivenALogRunsItsHubInClusterMode() throws {
        let logger = Logger(label: "cluster-tests", factory: { _ in SwiftLogNoOpLogHandler() })
        let log = MemoryRoomLog()
        let server = try Server(configuration: ServerConfiguration(), logger: logger, log: log)
        #expect(server.hub.replicatedEngine?.log === log)
        #expect(try Server(configuration: ServerConfiguration(), logger: logger).hub.replicatedEngine == nil)
    }

    /// A request waiting for the log holds the session's later requests back: answers come in
    /// the order of the requests (PROTOCOL.md §10), whichever room they name.
    @Test func answersKeepTheOrderOfTheRequestsWhileOneWaitsForTheLog() throws {
        let cluster = ClusterHarness(nodes: 1)
        let node = cluster.nodes[0]
        let session = node.connect()
        node.join(session, "loaded")
        cluster.settle()
        _ = node.drain(session)
        node.send(.join(requestID: 1, room: "loading", resume: nil), from: session)
        node.send(.ping(nonce: 2), from: session)
        node.mutate(session, "loaded", addItem("a", first: true), requestID: 3)
        node.send(.stats(requestID: 4), from: session)
        node.mutate(session, "loaded", [], requestID: 5)
        #expect(node.drain(session).isEmpty)
        cluster.settle()
        let answers = node.drain(session)
        guard answers.count == 6 else {
            Issue.record("\(answers)")
            return
        }
        #expect(answers[0].snapshotVersion == 0 && answers[0].requestID == 1)
        #expect(answers[1] == .pong(nonce: 2))
        #expect(answers[2].diffVersion == 1 && answers[3].ackVersion == 1 && answers[3].requestID == 3)
        #expect(answers[4].requestID == 4 && answers[5].ackVersion == 1 && answers[5].requestID == 5)
        #expect(!session.isAwaitingLog && session.deferredInput.isEmpty && session.deferredBytes == 0)
    }

    @Test func requestsPiledUpBehindAWaitingOneAreBounded() {
        let cluster = ClusterHarness(nodes: 1) { $0.wire.maxFrameBytes = 1024 * 1024 }
        let node = cluster.nodes[0]
        let session = node.connect()
        node.join(session, "loading")
        // 8 KB a frame: the 129th passes 1 MiB.
        let big: [SnapshotOperation] = [.appendSections([hubElement("s", String(repeating: "x", count: 8192))])]
        for index in 0..<129 { node.mutate(session, "other", big, requestID: UInt64(index)) }
        let answer = node.drain(session)
        #expect(answer.map(\.errorCode) == [.inputBudgetExceeded] && session.state == .closing)
    }

    @Test func aCheckpointOverThisNodesLimitsIsNotServed() throws {
        let cluster = ClusterHarness(nodes: 1) { $0.clusterCheckpointInterval = 1 }
        let writer = cluster.nodes[0].connect()
        cluster.nodes[0].mutate(writer, "room", addItem("a", first: true) + addItem("b"))
        cluster.settle()
        #expect(cluster.log.checkpoint(of: "room")?.image.snapshot.numberOfItems == 2)
        let strict = cluster.addNode { $0.wire.model.maxItems = 1 }
        let session = strict.connect()
        strict.join(session, "room")
        cluster.settle()
        let answer = strict.drain(session)
        guard answer.count == 1, case .reject(_, ErrorCode.storageFailure.rawValue, _, _, let message) = answer[0] else {
            Issue.record("not REJECT storage_failure: \(answer)")
            return
        }
        #expect(message.contains("--max-items-per-room"))
        #expect(strict.hub.replicas.isEmpty && strict.hub.rooms.isEmpty)
    }

    /// Two nodes that checkpoint every 3 versions: `other`, and `strict`, whose rooms hold 2 items
    /// at most (`--max-items-per-room 2`), with its log.
    private static func aNodeWithRoomForTwoItems() throws -> (
        cluster: ClusterHarness, other: HubHarness, strict: HubHarness, strictLog: MemoryRoomLog
    ) {
        let cluster = ClusterHarness(nodes: 1) { $0.clusterCheckpointInterval = 3 }
        let strict = cluster.addNode {
            $0.clusterCheckpointInterval = 3
            $0.wire.model.maxItems = 2
        }
        return (cluster, cluster.nodes[0], strict, try #require(strict.hub.log as? MemoryRoomLog))
    }

    /// Followed again after others checkpointed a room over this node's limits: the node cannot
    /// serve it any more. Its members are told (LEFT storage_failure), what waited is refused,
    /// and the room and its replica are gone, as for a room it could not load at all.
    @Test func aRefollowThatLoadsACheckpointOverThisNodesLimitsTellsTheMembersAndForgetsTheRoom() throws {
        let (cluster, other, strict, strictLog) = try Self.aNodeWithRoomForTwoItems()
        let member = strict.connect(), watcher = strict.connect(), writer = other.connect()
        strict.join(member, "room")
        strict.join(watcher, "room")
        other.mutate(writer, "room", addItem("a", first: true), requestID: 1)
        cluster.settle()
        #expect(strict.drain(member).compactMap(\.diffVersion) == [1] && strict.drain(watcher).compactMap(\.diffVersion) == [1])
        strictLog.interruptFollow(of: "room")
        cluster.settle()
        other.mutate(writer, "room", addItem("b"), requestID: 2)
        other.mutate(writer, "room", addItem("c"), requestID: 3)
        cluster.settle()
        #expect(cluster.log.checkpoint(of: "room")?.image.snapshot.numberOfItems == 3)
        strict.hub.maintainReplicas(now: strict.later(.seconds(1)))
        strict.mutate(member, "room", [], requestID: 4)
        cluster.settle()
        let answers = strict.drain(member)
        guard answers.count == 2, case .left("room", ErrorCode.storageFailure.rawValue, let message) = answers[0] else {
            Issue.record("not LEFT storage_failure then the write's answer: \(answers)")
            return
        }
        #expect(message.contains("--max-items-per-room"))
        #expect(answers[1].errorCode == .storageFailure && answers[1].requestID == 4)
        #expect(strict.drain(watcher) == [answers[0]] && member.memberships.isEmpty && watcher.memberships.isEmpty)
        #expect(strict.hub.replicas.isEmpty && strict.hub.rooms.isEmpty && strict.hub.totalItems == 0 && !strictLog.isFollowing("room"))
        // Nothing is left to follow again; a JOIN loads the room anew and is refused.
        strict.hub.maintainReplicas(now: strict.later(.seconds(1)))
        cluster.settle()
        #expect(strict.hub.replicas.isEmpty)
        strict.join(member, "room", requestID: 5)
        cluster.settle()
        #expect(strict.drain(member).map(\.errorCode) == [.storageFailure] && strict.hub.replicas.isEmpty)
        #expect(other.hub.rooms["room"]?.version == 3)
    }

    /// A JOIN resuming ahead of a broken replica waits for a read barrier; the refollow loads a
    /// checkpoint over this node's limits and the replica is forgotten: the JOIN is refused
    /// `storage_failure` with the rest, and the session's later requests are answered.
    @Test func aJoinWaitingForABarrierIsRefusedWhenItsReplicaIsForgotten() throws {
        let (cluster, other, strict, strictLog) = try Self.aNodeWithRoomForTwoItems()
        let member = strict.connect(), writer = other.connect(), client = strict.connect()
        strict.join(member, "room")
        other.mutate(writer, "room", addItem("a", first: true), requestID: 1)
        cluster.settle()
        let epoch = try #require(strict.hub.rooms["room"]).epoch
        strictLog.interruptFollow(of: "room")
        cluster.settle()
        other.mutate(writer, "room", addItem("b"), requestID: 2)
        other.mutate(writer, "room", addItem("c"), requestID: 3)
        cluster.settle()
        strict.send(.join(requestID: 7, room: "room", resume: RoomPosition(epoch: epoch, version: 3), chain: .unknown), from: client)
        cluster.settle()
        #expect(strict.drain(client).isEmpty && strict.hub.replicas["room"]?.barriers.joinCount == 1)
        strict.hub.maintainReplicas(now: strict.later(.seconds(1)))
        cluster.settle()
        #expect(strict.hub.replicas.isEmpty)
        strict.send(.ping(nonce: 8), from: client)
        let answers = strict.drain(client)
        #expect(answers.map(\.errorCode) == [.storageFailure, nil] && answers.first?.requestID == 7 && answers.last == .pong(nonce: 8))
        #expect(!client.isAwaitingLog)
    }

    @Test func setTTLIsRefusedInClusterMode() {
        let cluster = ClusterHarness()
        let session = cluster.nodes[0].connect()
        cluster.nodes[0].send(.setTTL(requestID: 4, room: "room", seconds: 60), from: session)
        let answer = cluster.nodes[0].drain(session)
        #expect(answer.map(\.errorCode) == [.storageFailure] && answer.first?.requestID == 4)
        #expect(cluster.nodes[0].hub.replicas.isEmpty)
    }

    @Test func aRoomThatCannotBeLoadedRefusesWhatWaitedAndIsForgotten() {
        let cluster = ClusterHarness()
        let node = cluster.nodes[0]
        let session = node.connect(), writer = node.connect()
        cluster.log.failFollows = ["room"]
        node.join(session, "room", requestID: 1)
        node.mutate(writer, "room", addItem("a", first: true), requestID: 2)
        cluster.settle()
        let answers = node.drain(session) + node.drain(writer)
        #expect(answers.map(\.errorCode) == [.storageFailure, .storageFailure] && answers.map(\.requestID) == [1, 2])
        #expect(node.hub.replicas.isEmpty && node.hub.rooms.isEmpty && session.memberships.isEmpty)
        // The next request follows it again.
        node.join(session, "room", requestID: 3)
        cluster.settle()
        #expect(node.drain(session).first?.requestID == 3 && session.memberships.count == 1)
    }

    /// A follow lost after loading: reads go on from the replica, writes are refused until the
    /// timer follows the room again; then it catches up on what others wrote, once.
    @Test func aLostFollowKeepsServingReadsAndCatchesUpWhenFollowedAgain() throws {
        let cluster = ClusterHarness(nodes: 2)
        let (node, other) = (cluster.nodes[0], cluster.nodes[1])
        let member = node.connect(), writer = other.connect()
        node.join(member, "room")
        other.mutate(writer, "room", addItem("a", first: true), requestID: 1)
        cluster.settle()
        #expect(node.drain(member).compactMap(\.diffVersion) == [1])
        cluster.log.interruptFollow(of: "room")  // node 0's
        cluster.settle()
        other.mutate(writer, "room", addItem("b"), requestID: 2)
        cluster.settle()
        node.mutate(member, "room", addItem("c"), requestID: 3)
        let refused = node.drain(member)
        #expect(refused.map(\.errorCode) == [.storageFailure] && refused.first?.requestID == 3)
        let reader = node.connect()
        #expect(node.join(reader, "room").first?.snapshotVersion == 1)
        node.hub.maintainReplicas(now: node.later(.seconds(1)))
        cluster.settle()
        #expect(node.drain(member).compactMap(\.diffVersion) == [2] && node.drain(reader).compactMap(\.diffVersion) == [2])
        node.mutate(member, "room", addItem("c"), requestID: 4)
        cluster.settle()
        #expect(node.drain(member).map(\.diffVersion) == [3, nil])
        #expect(Set(cluster.positions("room").map(\.version)) == [3] && Set(cluster.positions("room").map(\.digest)).count == 1)
        cluster.checkInvariants("room")
    }

    /// Followed again after others checkpointed past this replica: the log delivers only what
    /// follows the checkpoint, so the replica is replaced by it; a member gets the DIFFs it
    /// missed from the checkpoint's history, or LEFT storage_failure when it is not there.
    @Test(arguments: [false, true])
    func aReplicaBehindACheckpointIsReplacedAndItsMembersCaughtUp(shortHistory: Bool) throws {
        let cluster = ClusterHarness(nodes: 2) { configuration in
            configuration.clusterCheckpointInterval = 3
            if shortHistory { configuration.wire.historyCount = 1 }
        }
        let (node, other) = (cluster.nodes[0], cluster.nodes[1])
        let member = node.connect(), writer = other.connect()
        node.join(member, "room")
        other.mutate(writer, "room", addItem("a", first: true), requestID: 1)
        cluster.settle()
        #expect(node.drain(member).compactMap(\.diffVersion) == [1])
        cluster.log.interruptFollow(of: "room")
        cluster.settle()
        other.mutate(writer, "room", addItem("b"), requestID: 2)
        other.mutate(writer, "room", addItem("c"), requestID: 3)
        cluster.settle()
        #expect(cluster.log.checkpoint(of: "room")?.image.version == 3)
        node.hub.maintainReplicas(now: node.later(.seconds(1)))
        cluster.settle()
        let answer = node.drain(member)
        if shortHistory {
            #expect(answer.count == 1 && member.memberships.isEmpty)
            guard case .left("room", ErrorCode.storageFailure.rawValue, _) = answer.first else {
                Issue.record("not LEFT storage_failure: \(answer)")
                return
            }
        } else {
            #expect(answer.compactMap(\.diffVersion) == [2, 3] && member.memberships.count == 1)
        }
        #expect(node.hub.rooms["room"]?.digest == other.hub.rooms["room"]?.digest && node.hub.rooms["room"]?.version == 3)
        #expect(node.hub.totalItems == 3)
        cluster.checkInvariants("room")
    }

    /// The log says nothing: after `ReplicatedRoom.stallSeconds` the JOIN that waits is refused and
    /// the room forgotten, and what the log delivers late is ignored.
    @Test func aRoomThatDoesNotLoadInTimeIsRefusedAndForgotten() {
        let cluster = ClusterHarness(nodes: 1)
        let node = cluster.nodes[0]
        let session = node.connect()
        node.join(session, "room", requestID: 1)
        node.send(.ping(nonce: 2), from: session)
        node.hub.maintainReplicas(now: node.later(.seconds(ReplicatedRoom.stallSeconds - 1)))
        #expect(node.drain(session).isEmpty && node.hub.replicas.count == 1)
        node.hub.maintainReplicas(now: node.later(.seconds(ReplicatedRoom.stallSeconds)))
        let answers = node.drain(session)
        #expect(answers.map(\.errorCode) == [.storageFailure, nil] && answers.last == .pong(nonce: 2))
        #expect(node.hub.replicas.isEmpty && session.memberships.isEmpty)
        cluster.settle()
        #expect(node.drain(session).isEmpty && node.hub.rooms.isEmpty)
    }

    /// A follow catching up on a long backlog is slow, not stalled: the stall bound counts from
    /// the last record applied, not from when the follow began.
    @Test func aFollowThatKeepsApplyingRecordsIsNotTakenAsStalled() throws {
        let cluster = ClusterHarness(nodes: 1)
        let writer = cluster.nodes[0].connect()
        // Three records (writes that wait go together in one record).
        for index in 1...3 {
            cluster.nodes[0].mutate(writer, "room", addItem("w\(index)", first: index == 1), requestID: UInt64(index))
            cluster.settle()
        }
        let log = HeldFollowLog(MemoryRoomLog(sharing: cluster.log))
        let node = HubHarness(log: log)
        let client = node.connect()
        node.send(.join(requestID: 1, room: "room", resume: nil), from: client)
        cluster.settle()
        let replica = try #require(node.hub.replicas["room"])
        #expect(log.pending == 5)  // base, 3 records, current
        // The follow began a stall ago; the base and a record come now.
        replica.waitingSince = node.clock.now - .seconds(ReplicatedRoom.stallSeconds)
        log.release(2)
        node.hub.maintainReplicas(now: node.later(.seconds(ReplicatedRoom.stallSeconds - 1)))
        #expect(node.hub.replicas["room"] === replica && replica.phase == .loading && node.drain(client).isEmpty)
        log.release(3)
        let answer = node.drain(client)
        #expect(answer.count == 1 && answer.first?.snapshotVersion == 3)
    }

    /// The log acknowledged a proposal but its record never comes (a delivery lost without a
    /// sign): the room's writes wait behind it, so after `ReplicatedRoom.stallSeconds` the follow
    /// is taken as lost and the write refused (storage_failure: it may be applied); following
    /// again brings the record, once, and the write's retry gets its ACK.
    @Test func aStoredProposalWhoseRecordNeverComesIsBoundedByTheStallTime() throws {
        let cluster = ClusterHarness(nodes: 1)
        cluster.log.acknowledgeBeforeDelivering = true
        let node = cluster.nodes[0]
        let writer = node.connect(), next = node.connect()
        node.join(writer, "room")
        cluster.settle()
        _ = node.drain(writer)
        node.mutate(writer, "room", addItem("a", first: true), requestID: 3, writeID: [3])
        node.mutate(next, "room", addItem("b", first: true), requestID: 4)
        #expect(cluster.log.runNext())  // .stored; the record's delivery stays queued
        node.hub.maintainReplicas(now: node.later(.seconds(ReplicatedRoom.stallSeconds - 1)))
        #expect(node.drain(writer).isEmpty && node.drain(next).isEmpty)
        node.clock.advance(by: .seconds(ReplicatedRoom.stallSeconds))
        node.hub.maintainReplicas(now: node.clock.now)
        let refused = node.drain(writer) + node.drain(next)
        #expect(refused.map(\.errorCode) == [.storageFailure, .storageFailure] && refused.map(\.requestID) == [3, 4])
        cluster.settle()  // the lost follow's delivery: ignored
        #expect(node.hub.rooms["room"]?.version == 0 && node.hub.replicas["room"]?.phase == .broken)
        node.hub.maintainReplicas(now: node.later(.seconds(1)))
        cluster.settle()
        #expect(node.drain(writer).compactMap(\.diffVersion) == [1])
        node.mutate(writer, "room", addItem("a", first: true), requestID: 5, writeID: [3])
        cluster.settle()
        #expect(node.drain(writer).map(\.ackVersion) == [1])
        #expect(cluster.log.records(of: "room").count == 1)
        node.checkInvariants("room")
    }

    @Test func anUnusedRoomIsUnfollowedAfterItsIdleTimeAndAJoinedOneIsKept() throws {
        let cluster = ClusterHarness { $0.clusterIdleSeconds = 30 }
        let node = cluster.nodes[0]
        let member = node.connect(), writer = node.connect()
        node.join(member, "kept")
        node.mutate(writer, "idle", addItem("a", first: true))
        cluster.settle()
        node.hub.maintainReplicas(now: node.later(.seconds(1)))
        #expect(node.hub.replicas.count == 2)
        node.hub.maintainReplicas(now: node.later(.seconds(31)))
        #expect(node.hub.replicas.keys.map(\.string) == ["kept"] && node.hub.rooms.keys.map(\.string) == ["kept"])
        #expect(!((node.hub.log as? MemoryRoomLog)?.isFollowing("idle") ?? true))
        #expect(node.hub.totalItems == 0)
        // Loaded again, as it is in the log.
        node.join(member, "idle")
        cluster.settle()
        #expect(node.hub.rooms["idle"]?.version == 1)
    }

    @Test func writesBeyondTheQueueBoundAreRefused() {
        let cluster = ClusterHarness(nodes: 1)
        let node = cluster.nodes[0]
        let writers = (0...ReplicatedRoom.maxWaiting).map { _ in node.connect() }
        for (index, writer) in writers.enumerated() {
            node.mutate(writer, "room", [], requestID: UInt64(index))
        }
        let refused = node.drain(writers.last!)
        #expect(refused.map(\.errorCode) == [.storageFailure] && refused.first?.requestID == UInt64(ReplicatedRoom.maxWaiting))
        cluster.settle()
        #expect(writers.dropLast().allSatisfy { node.drain($0).map(\.ackVersion) == [0] })
    }
}

/// A node's log whose follow events wait until the test releases them, one by one.
final class HeldFollowLog: RoomLog {
    let inner: MemoryRoomLog
    private var events: ((RoomLogEvent) -> Void)?
    private var queued: [RoomLogEvent] = []

    init(_ inner: MemoryRoomLog) {
        self.inner = inner
    }

    /// Events received and not released yet.
    var pending: Int { queued.count }

    /// Delivers the next `count` events held.
    func release(_ count: Int) {
        for _ in 0..<count where !queued.isEmpty { events?(queued.removeFirst()) }
    }

    func follow(room: String, events: @escaping (RoomLogEvent) -> Void) {
        self.events = events
        inner.follow(room: room) { [weak self] event in self?.queued.append(event) }
    }
    func unfollow(room: String) { inner.unfollow(room: room) }
    func propose(
        room: String, expectedSequence: UInt64, messageID: [UInt8], entry: RoomLogEntry, completion: @escaping (ProposalOutcome) -> Void
    ) {
        inner.propose(room: room, expectedSequence: expectedSequence, messageID: messageID, entry: entry, completion: completion)
    }
    func lastSequence(room: String, completion: @escaping (Result<UInt64, StoreError>) -> Void) {
        inner.lastSequence(room: room, completion: completion)
    }
    func saveCheckpoint(_ image: RoomImage, history: [WriteRecord], sequence: UInt64, chain: RoomChain?) {
        inner.saveCheckpoint(image, history: history, sequence: sequence, chain: chain)
    }
    func epoch(room: String, after sequence: UInt64) -> UInt64 { inner.epoch(room: room, after: sequence) }
}
