import SnapSyncLoop
import Foundation
import Logging
import SnapSyncModel
import SnapSyncStore
import Testing
import SnapSyncTestSupport

@testable import SnapSyncCluster

extension RealNATSCluster {
    /// `JetStreamRoomLog` against the real 3-server cluster: two nodes (two logs, two connections
    /// to different servers, on one libevent loop) share rooms through it.
    @Suite struct JetStreamRoomLogTests {
        /// Two nodes follow one room and propose with the same expectation: one is stored, the other
        /// superseded; both get the records in one order; a repeated write id is stored at the
        /// original's sequence; `.current` comes for an empty subject and after a non-empty one's
        /// records; unfollow stops the events.
        @Test func twoNodesShareOneOrderOfARoom() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let (cluster, loop) = (setup.cluster, setup.loop)
            let a = try setup.connect(servers: [cluster.urls[0]])
            let b = try setup.connect(servers: [cluster.urls[1]])
            let room = "lobby"

            let onA = FollowRecorder()
            let onB = FollowRecorder()
            onA.follow(a, room: room)
            onB.follow(b, room: room)
            try runLoop(loop, until: { onA.isCurrent && onB.isCurrent }, "current on both nodes")
            #expect(onA.events == [.base(nil), .current])
            #expect(onB.events == [.base(nil), .current])

            // Both nodes write the room's first record at once.
            let fromA = write(room, version: 1, id: "a1")
            let fromB = write(room, version: 1, id: "b1")
            var outcomeA: ProposalOutcome?
            var outcomeB: ProposalOutcome?
            a.propose(room: room, expectedSequence: 0, messageID: fromA.writeID, entry: .write(fromA)) { outcomeA = $0 }
            b.propose(room: room, expectedSequence: 0, messageID: fromB.writeID, entry: .write(fromB)) { outcomeB = $0 }
            try runLoop(loop, until: { outcomeA != nil && outcomeB != nil }, "answers to both proposals")
            let stored = [outcomeA, outcomeB].compactMap { if case .stored(let s)? = $0 { s } else { nil } }
            #expect(stored.count == 1, "\(String(describing: outcomeA)) \(String(describing: outcomeB))")
            #expect([outcomeA, outcomeB].filter { $0 == .superseded }.count == 1)
            let first = try #require(stored.first)
            let (winner, loser, loserRecord) =
                outcomeA == .stored(sequence: first) ? (fromA, b, write(room, version: 2, id: "b1")) : (fromB, a, write(room, version: 2, id: "a1"))

            // The loser sees the winner's record, then proposes again after it.
            try runLoop(loop, until: { onA.records.count == 1 && onB.records.count == 1 }, "the first record on both")
            #expect(onA.records == [.record(first, .write(winner))])
            #expect(onB.records == onA.records)
            let second = try propose(loser, loop, room: room, after: first, loserRecord)
            guard case .stored(let secondSequence) = second else {
                Issue.record("the loser's second proposal: \(second)")
                return
            }
            #expect(secondSequence > first)

            // The winner's write again, with a stale expectation: the log has it, at its sequence.
            #expect(try propose(a, loop, room: room, after: 0, winner) == .stored(sequence: first))

            try runLoop(loop, until: { onA.records.count == 2 && onB.records.count == 2 }, "the second record on both")
            #expect(onA.records == [.record(first, .write(winner)), .record(secondSequence, .write(loserRecord))])
            #expect(onB.records == onA.records)

            // Unfollowed on A: A hears nothing of B's next write, which B gets.
            a.unfollow(room: room)
            let before = onA.events
            let third = write(room, version: 3, id: "b3")
            let thirdOutcome = try propose(b, loop, room: room, after: secondSequence, third)
            guard case .stored(let thirdSequence) = thirdOutcome else {
                Issue.record("the third proposal: \(thirdOutcome)")
                return
            }
            try runLoop(loop, until: { onB.records.count == 3 }, "the third record on B")
            #expect(onA.events == before)

            // Following again on A, a non-empty subject: its records, then current.
            let again = FollowRecorder()
            again.follow(a, room: room)
            try runLoop(loop, until: { again.isCurrent }, "current after a non-empty subject")
            #expect(
                again.events == [
                    .base(nil), .record(first, .write(winner)), .record(secondSequence, .write(loserRecord)),
                    .record(thirdSequence, .write(third)), .current,
                ])

            // Epochs: the same on both nodes, never 0, one per incarnation.
            #expect(a.epoch(room: room, after: 0) == b.epoch(room: room, after: 0))
            #expect(a.epoch(room: room, after: 0) != 0)
            #expect(a.epoch(room: room, after: thirdSequence) != a.epoch(room: room, after: 0))
            #expect(a.epoch(room: "other", after: 0) != a.epoch(room: room, after: 0))
            #expect(a.salt == b.salt)
        }

        /// The last sequence is the room subject's own, as the stream's leader knows it: 0 for a room
        /// nobody wrote, the room's last record's after others' records were stored.
        @Test func lastSequenceIsTheLastRecordOfTheRoomsSubject() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let (cluster, loop) = (setup.cluster, setup.loop)
            let a = try setup.connect(servers: [cluster.urls[1]])
            #expect(try lastSequence(a, loop, room: "lobby").get() == 0)

            guard case .stored(let s1) = try propose(a, loop, room: "lobby", after: 0, write("lobby", version: 1, id: "l1")),
                case .stored(let s2) = try propose(a, loop, room: "lobby", after: s1, write("lobby", version: 2, id: "l2")),
                case .stored(let s3) = try propose(a, loop, room: "café ☕", after: 0, write("café ☕", version: 1, id: "c1"))
            else {
                Issue.record("a write was not stored")
                return
            }
            #expect(s3 > s2)
            #expect(try lastSequence(a, loop, room: "lobby").get() == s2)
            #expect(try lastSequence(a, loop, room: "café ☕").get() == s3)
            #expect(try lastSequence(a, loop, room: "never written").get() == 0)
        }

        /// A consumer that delivers nothing (here: its deliver subject lost its interest before the
        /// consumer started, as when the interest has not reached the consumer's server) while the
        /// follow is not current is recreated after one heartbeat of silence, not three; and the
        /// follow is current only once it has applied the subject's last record as the stream's
        /// leader knows it, whatever the consumer says is pending (a lagging replica says 0).
        @Test func aFollowIsCurrentOnlyAtTheLeadersLastRecordAndASilentConsumerIsRecoveredAtOnce() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let loop = setup.loop
            // A heartbeat so long that the tick never finds a consumer silent: the test says when.
            let heartbeat = Duration.seconds(120)
            let a = try setup.connect(heartbeat: heartbeat)
            let room = "late interest"
            let one = write(room, version: 1, id: "w1")
            let two = write(room, version: 2, id: "w2")
            guard case .stored(let s1) = try propose(a, loop, room: room, after: 0, one),
                case .stored(let s2) = try propose(a, loop, room: room, after: s1, two)
            else {
                Issue.record("a write was not stored")
                return
            }

            let seen = FollowRecorder()
            seen.follow(a, room: room)
            // The deliver subject is subscribed and the creation sent in one loop pass: the UNSUB
            // follows them on the wire, long before JetStream has made the consumer.
            try runLoop(loop, until: { a.followsByRoom[room]?.subscription != nil }, "the consumer's subscription")
            let follow = try #require(a.followsByRoom[room])
            let subscription = try #require(follow.subscription)
            a.connection.unsubscribe(subscription)
            try runLoop(loop, until: { follow.consumer != nil && follow.target != nil }, "the consumer and the target")
            #expect(follow.target == s2)
            #expect(follow.generation == 1)

            // The first record, delivered with "nothing pending" (as a replica that has not stored
            // the second one yet would say): not current.
            let consumer = try #require(follow.consumer)
            a.deliver(
                InboxMessage(
                    subscription: subscription, subject: RoomSubjects.subject(room: room),
                    reply: "$JS.ACK.snapsync-rooms.\(consumer).1.\(s1).1.1700000000000000000.0", data: RoomLogEntry.write(one).encode(room: room),
                    status: nil, statusDescription: nil, lastConsumerSequence: nil, expectedLastSubjectSequence: 0),
                follow: follow.id, generation: 1)
            #expect(seen.events == [.base(nil), .record(s1, .write(one))])

            // One heartbeat of silence before current: a new consumer, from the record after s1.
            a.checkHeartbeats(now: follow.lastHeard + heartbeat + .seconds(1))
            #expect(follow.generation == 2)
            // (Its deliveries may come before its creation's answer, which the check waits for.)
            try runLoop(loop, until: { seen.isCurrent && !follow.awaitingCreation }, "current")
            #expect(seen.events == [.base(nil), .record(s1, .write(one)), .record(s2, .write(two)), .current])

            // Once current, one heartbeat of silence is not enough; three are.
            a.checkHeartbeats(now: follow.lastHeard + heartbeat + .seconds(1))
            #expect(follow.generation == 2)
            a.checkHeartbeats(now: follow.lastHeard + heartbeat * 3 + .seconds(1))
            #expect(follow.generation == 3)
            #expect(seen.failure == nil)
        }

        /// A followed room's subscription gets no delivery thread of its own (libnats's shared pool
        /// delivers them all): following rooms starts no thread.
        ///
        /// libnats does not name its threads, and a Linux thread starts with its creator's name:
        /// the threads libnats starts while this test's thread carries a name of its own carry
        /// it too, and no other test's threads can. So the count is libnats's alone, exact, and
        /// four rooms show a thread per subscription as four. A second connection made under
        /// the name (its flusher is a thread) shows that the count sees libnats's threads.
        @Test func followingRoomsStartsNoThread() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let a = try setup.connect()
            // The connection's own subscriptions (its inbox, JetStream's acks) are made already,
            // and with them the shared delivery thread.
            let mark = "follows\(getpid() % 100_000)"  // Linux keeps 15 bytes of a name
            let name = ThreadName.current
            ThreadName.current = mark
            defer { ThreadName.current = name }
            let mine = threadIDs(named: mark)
            #expect(mine.count == 1, "only this thread is named \(mark) yet")

            _ = try setup.connect()
            let afterConnection = threadIDs(named: mark)
            #expect(afterConnection.count > mine.count, "a connection made under the name starts a thread that carries it")

            let rooms = (1...4).map { "room \($0)" }
            let recorders = rooms.map { room in
                let recorder = FollowRecorder()
                recorder.follow(a, room: room)
                return recorder
            }
            try runLoop(
                setup.loop, until: { recorders.allSatisfy(\.isCurrent) && rooms.allSatisfy { a.followsByRoom[$0]?.subscription != nil } },
                "4 follows current and subscribed")
            let started = threadIDs(named: mark).subtracting(afterConnection)
            #expect(started.isEmpty, "following \(rooms.count) rooms started \(started.count) threads")
        }

        /// This process's threads named `name`, by id.
        private func threadIDs(named name: String) -> Set<String> {
            let ids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
            return Set(
                ids.filter {
                    (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines) == name
                })
        }

        /// The rooms stream is shared: a node started with another retention than the stream's
        /// replaces it for every node, which it keeps doing (an operator changes it so) and says.
        @Test func aNodeThatChangesTheStreamsRetentionSaysSo() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let cluster = setup.cluster
            let log = LogLines()
            for retain in [100, 100] {
                let node = try setup.connect(retain: retain, logger: log.logger)
                node.close()
            }
            #expect(!log.contains("--cluster-retain"), "\(log.all)")
            let node = try setup.connect(retain: 200, logger: log.logger)
            node.close()
            let warnings = log.all.filter { $0.contains("--cluster-retain") }
            #expect(warnings.count == 1, "\(log.all)")
            #expect(warnings.first?.hasPrefix("warning:") == true)
            #expect(warnings.first?.contains("kept 100 records per room") == true)
            #expect(warnings.first?.contains("--cluster-retain 200 replaced") == true)
            #expect(try StreamProvisioning.ensureStream(.rooms(retain: 200), servers: cluster.urls).replacedMaxMessagesPerSubject == nil)
            #expect(try StreamProvisioning.ensureStream(.rooms(retain: 300), servers: cluster.urls).replacedMaxMessagesPerSubject == 200)
        }

        /// A tombstone is a record like a write: delivered in order, decoded back.
        @Test func aTombstoneIsDeliveredAfterTheWritesItEnds() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let loop = setup.loop
            let a = try setup.connect()
            let room = "dropped room ☕"
            let epoch = a.epoch(room: room, after: 0)
            let one = write(room, version: 1, id: "w1", epoch: epoch)
            guard case .stored(let s1) = try propose(a, loop, room: room, after: 0, one) else {
                Issue.record("the write was not stored")
                return
            }
            var dropped: ProposalOutcome?
            a.propose(room: room, expectedSequence: s1, messageID: [], entry: .tombstone(epoch: epoch, version: 1)) { dropped = $0 }
            try runLoop(loop, until: { dropped != nil }, "answer to the tombstone")
            guard case .stored(let s2)? = dropped else {
                Issue.record("the tombstone was not stored: \(String(describing: dropped))")
                return
            }
            let seen = FollowRecorder()
            seen.follow(a, room: room)
            try runLoop(loop, until: { seen.isCurrent }, "current")
            #expect(seen.events == [.base(nil), .record(s1, .write(one)), .record(s2, .tombstone(epoch: epoch, version: 1)), .current])
        }

        /// A checkpoint saved at a record's sequence is where a later follow starts: `.base` has it,
        /// and only the records after it follow.
        @Test func aFollowStartsFromTheLatestCheckpointAndGetsOnlyTheTail() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let (cluster, loop) = (setup.cluster, setup.loop)
            let a = try setup.connect(servers: [cluster.urls[0]])
            let b = try setup.connect(servers: [cluster.urls[2]])
            let room = "checkpointed"
            let epoch = a.epoch(room: room, after: 0)
            var sequences: [UInt64] = []
            var records: [WriteRecord] = []
            for version in UInt64(1)...3 {
                let record = write(room, version: version, id: "w\(version)", epoch: epoch)
                guard case .stored(let s) = try propose(a, loop, room: room, after: sequences.last ?? 0, record) else {
                    Issue.record("write \(version) was not stored")
                    return
                }
                sequences.append(s)
                records.append(record)
            }

            let snapshot = try RoomSnapshot([(section: SnapshotElement("s", payload: "p"), items: [SnapshotElement("i", payload: "q")])])
            let image = RoomImage(room: room, epoch: epoch, version: 2, snapshot: snapshot, diffFrames: records[0..<2].map(\.diffFrame))
            var stored: Bool?
            a.saveCheckpoint(image, history: Array(records[0..<2]), sequence: sequences[1], chain: nil) { stored = $0 }
            try runLoop(loop, until: { stored != nil }, "the checkpoint's answer")
            #expect(stored == true)
            #expect(a.checkpointFailures == 0)

            let seen = FollowRecorder()
            seen.follow(b, room: room)
            try runLoop(loop, until: { seen.isCurrent }, "current")
            #expect(seen.events == [.base(sequences[1]), .record(sequences[2], .write(records[2])), .current])
            let checkpoint = try #require(seen.checkpoint)
            #expect(checkpoint.image.room == room)
            #expect(checkpoint.image.epoch == epoch)
            #expect(checkpoint.image.version == 2)
            #expect(checkpoint.image.snapshot.digest == snapshot.digest)
            #expect(checkpoint.history == Array(records[0..<2]))
            #expect(checkpoint.image.diffFrames == records[0..<2].map(\.diffFrame))
        }

        /// A checkpoint over the servers' max_payload is saved without its oldest history records
        /// (the newest are the room's write-id window); one whose snapshot alone is over it is not
        /// saved (and counted); a follow starts from the one saved, with the newest records.
        @Test func anOversizedCheckpointLosesItsOldestHistoryOrIsNotSaved() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let loop = setup.loop
            let a = try setup.connect()
            let room = "large"
            let epoch = a.epoch(room: room, after: 0)
            let half = a.maxPayload / 2
            #expect(half > 1_000_000, "scripts/cluster sets max_payload to 8 MiB")
            let large = WriteRecord(room: room, epoch: epoch, version: 1, writeID: [1], diffFrame: [UInt8](repeating: 2, count: half + 10))
            let newer = (UInt64(2)...3).map {
                WriteRecord(room: room, epoch: epoch, version: $0, writeID: [UInt8($0)], diffFrame: [UInt8](repeating: 3, count: 100))
            }
            func image(_ payloadSize: Int, version: UInt64) throws -> RoomImage {
                let snapshot = try RoomSnapshot([
                    (section: SnapshotElement("s", payload: SnapshotPayload([UInt8](repeating: 7, count: payloadSize))), items: [])
                ])
                return RoomImage(room: room, epoch: epoch, version: version, snapshot: snapshot)
            }

            var stored: Bool?
            a.saveCheckpoint(try image(2 * half + 10, version: 1), history: [large], sequence: 2, chain: nil) { stored = $0 }
            try runLoop(loop, until: { stored != nil }, "the first checkpoint's answer")
            #expect(stored == false)
            #expect(a.checkpointFailures == 1)
            stored = nil
            a.saveCheckpoint(try image(half, version: 3), history: [large] + newer, sequence: 3, chain: nil) { stored = $0 }
            try runLoop(loop, until: { stored != nil }, "the second checkpoint's answer")
            #expect(stored == true)
            #expect(a.checkpointFailures == 1)

            // Any replica of the bucket answers the checkpoint's read, and one that has not stored
            // the value yet (a quorum acknowledged it) answers that there is none: follow again.
            var seen = FollowRecorder()
            for _ in 0..<20 {
                seen = FollowRecorder()
                seen.follow(a, room: room)
                try runLoop(loop, until: { seen.isCurrent || seen.failure != nil }, "current or failed")
                a.unfollow(room: room)
                if seen.checkpoint != nil || seen.failure != nil { break }
            }
            #expect(seen.failure == nil)
            #expect(seen.events == [.base(3), .current])
            #expect(seen.checkpoint?.history == newer)
            #expect(seen.checkpoint?.image.snapshot.digest == (try image(half, version: 3)).snapshot.digest)
        }

        /// The cut keeps as many of the newest records as fit: the value without the records it drops
        /// fits, with one more it does not (history_count's varint growing past 127 included), and
        /// only a snapshot over the limit is refused. Sizes are the encoding's, byte for byte.
        @Test func theCheckpointHistoryCutKeepsTheNewestRecordsThatFit() throws {
            let room = "cut ☕"
            let snapshot = try RoomSnapshot([(section: SnapshotElement("s", payload: "p"), items: [])])
            let history = (UInt64(1)...140).map {
                WriteRecord(
                    room: room, epoch: 1 << 40, version: $0, writeID: $0 % 3 == 0 ? [] : [UInt8]($0.description.utf8),
                    diffFrame: [UInt8](repeating: 1, count: Int($0 % 7) * 40 + 3))
            }
            for record in history.prefix(8) {
                #expect(CheckpointHistoryCut.framedSize(record) == RoomLogEntry.write(record).encode(room: room).count + 12)
            }
            let image = RoomImage(room: room, epoch: 1 << 40, version: 140, snapshot: snapshot)
            func size(_ kept: ArraySlice<WriteRecord>) -> Int {
                RoomLogCheckpoint(image: image, history: Array(kept), sequence: 99, chain: nil).encode().count
            }
            let full = size(history[...])
            let bare = size([])
            for limit in stride(from: bare - 3, through: full + 1, by: 97) {
                let dropped = CheckpointHistoryCut.oldestToDrop(valueSize: full, history: history, limit: limit)
                guard let dropped else {
                    #expect(bare > limit, "limit \(limit)")
                    continue
                }
                #expect(size(history[dropped...]) <= limit, "limit \(limit)")
                if dropped > 0 { #expect(size(history[(dropped - 1)...]) > limit, "limit \(limit)") }
            }
            // Around history_count 128, where its varint takes a second byte.
            for kept in 126...129 {
                let limit = size(history[(history.count - kept)...])
                #expect(CheckpointHistoryCut.oldestToDrop(valueSize: full, history: history, limit: limit) == history.count - kept)
            }
        }

        /// A follow ended before its checkpoint read or its consumer answered gets no event; a
        /// proposal pending at `close` gets its completion then, once, as a failure.
        @Test func unfollowAndCloseLeaveNothingHalfDone() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let loop = setup.loop
            let a = try setup.connect()
            let room = "brief"
            let early = FollowRecorder()
            early.follow(a, room: room)
            a.unfollow(room: room)
            let late = FollowRecorder()
            late.follow(a, room: "other")
            try runLoop(loop, until: { late.hasBase }, "the other room's base")
            a.unfollow(room: "other")
            // The stream's first sequences are the salt's (one per node that proposed it).
            guard case .stored(let s1) = try propose(a, loop, room: room, after: 0, write(room, version: 1, id: "w1")) else {
                Issue.record("w1 was not stored")
                return
            }
            #expect(early.events.isEmpty)
            #expect(late.events == [.base(nil)])

            var outcomes: [ProposalOutcome] = []
            a.propose(room: room, expectedSequence: s1, messageID: Array("w2".utf8), entry: .write(write(room, version: 2, id: "w2"))) {
                outcomes.append($0)
            }
            a.close()
            #expect(outcomes.count == 1)
            if case .failed(let error)? = outcomes.first { #expect("\(error)".contains(room)) } else { Issue.record("\(outcomes)") }
        }

        /// A delivery lost on the way (here: a consumer sequence that skips one, as after a
        /// slow-consumer drop) makes the follow recreate its consumer from the last record it
        /// delivered: the records go on once each, in order.
        @Test func aLostDeliveryIsRecoveredWithoutAGapOrARepeat() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let loop = setup.loop
            let a = try setup.connect()
            let room = "gappy"
            let one = write(room, version: 1, id: "w1")
            guard case .stored(let s1) = try propose(a, loop, room: room, after: 0, one) else {
                Issue.record("write 1 was not stored")
                return
            }
            let seen = FollowRecorder()
            seen.follow(a, room: room)
            try runLoop(loop, until: { seen.isCurrent }, "current")
            let follow = try #require(a.followsByRoom[room])
            let generation = follow.generation
            let consumer = try #require(follow.consumer)

            // Delivery 3 of this consumer arrives, 2 never did.
            a.deliver(
                InboxMessage(
                    subscription: try #require(follow.subscription), subject: "snapsync.room.\(RoomSubjects.key(room: room))",
                    reply: "$JS.ACK.snapsync-rooms.\(consumer).1.\(s1 + 5).3.1700000000000000000.0", data: [], status: nil,
                    statusDescription: nil, lastConsumerSequence: nil),
                follow: follow.id, generation: generation)
            #expect(follow.generation == generation + 1)

            let two = write(room, version: 2, id: "w2")
            guard case .stored(let s2) = try propose(a, loop, room: room, after: s1, two) else {
                Issue.record("write 2 was not stored")
                return
            }
            try runLoop(loop, until: { seen.records.count >= 2 }, "the second record")
            #expect(seen.events == [.base(nil), .record(s1, .write(one)), .current, .record(s2, .write(two))])

            // A heartbeat saying the consumer sent more than arrived: recovered the same way.
            let now = try #require(a.followsByRoom[room])
            a.deliver(
                InboxMessage(
                    subscription: try #require(now.subscription), subject: "\(a.deliveryPrefix).\(now.id).\(now.generation)", reply: "", data: [],
                    status: "100",
                    statusDescription: "Idle Heartbeat", lastConsumerSequence: now.lastConsumerSequence + 1),
                follow: now.id, generation: now.generation)
            #expect(now.generation == generation + 2)
            let three = write(room, version: 3, id: "w3")
            guard case .stored(let s3) = try propose(a, loop, room: room, after: s2, three) else {
                Issue.record("write 3 was not stored")
                return
            }
            try runLoop(loop, until: { seen.records.count >= 3 }, "the third record")
            #expect(seen.sequences == [s1, s2, s3])
        }

        /// The stream's salt, of every epoch, is the same whichever server leads the stream: every
        /// node derives the same epochs, before and after a leader change, and through a server
        /// restarted from its store.
        @Test func theStreamsSaltOutlivesALeaderChangeAndARestart() throws {
            let cluster = try TestCluster()
            defer { try? cluster.down() }
            let before = try StreamProvisioning.ensureStream(.rooms(), servers: cluster.urls)
            let leader = try #require(before.leader)
            let index = try #require(["n1", "n2", "n3"].firstIndex(of: leader))
            try cluster.kill(server: index)
            let others = cluster.urls.enumerated().filter { $0.offset != index }.map(\.element)
            // A new leader takes a few seconds to be elected; until then the request fails.
            var after: StreamInfo?
            let deadline = ContinuousClock.now + .seconds(60)
            while after?.leader == nil || after?.leader == leader, ContinuousClock.now < deadline {
                after = try? StreamProvisioning.ensureStream(.rooms(), servers: others, timeout: .seconds(2))
            }
            let info = try #require(after, "no answer from the stream without \(leader)")
            #expect(info.leader != leader)
            #expect(info.salt != nil)
            #expect(info.salt == before.salt)
            // Back from its store, the killed server alone is asked.
            try cluster.up()
            var restarted: StreamInfo?
            let again = ContinuousClock.now + .seconds(60)
            while restarted == nil, ContinuousClock.now < again {
                restarted = try? StreamProvisioning.ensureStream(.rooms(), servers: [cluster.urls[index]], timeout: .seconds(2))
            }
            #expect(try #require(restarted, "no answer through the restarted \(leader)").salt == before.salt)
        }

        /// The server that runs a node's consumer dies: the node notices the silence, makes a new
        /// consumer (and reconnects, when it was connected to that server), and its follow goes on
        /// with every record once, in the order another node sees them.
        @Test func aFollowSurvivesTheDeathOfItsServer() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let (cluster, loop) = (setup.cluster, setup.loop)
            // Each node knows every server, as `--cluster` is given them all.
            // One-second heartbeats: a silent consumer is noticed after 3 s instead of 15. The
            // daemon's 5 s request timeout, so that a consumer creation sent to the dead server
            // is given up and sent again; as many attempts as the election takes (the daemon's
            // limit is a policy, not what this test checks): the hang bound below stops it.
            let a = try setup.connect(logger: Logger(label: "node-a"), requestTimeout: .seconds(5), heartbeat: .seconds(1), recoveryAttempts: .max)
            let b = try setup.connect(logger: Logger(label: "node-b"), requestTimeout: .seconds(5), heartbeat: .seconds(1), recoveryAttempts: .max)
            let room = "survivor"
            let onA = FollowRecorder()
            let onB = FollowRecorder()
            onA.follow(a, room: room)
            onB.follow(b, room: room)
            try runLoop(loop, until: { onA.isCurrent && onB.isCurrent }, "current on both")

            /// B writes `id` after the last record it has seen, as a node does: after a failure (no
            /// answer during the election) or a refusal, it looks again at what it has applied.
            func writeThroughB(_ id: String) throws {
                let record = write(room, version: UInt64(onB.records.count + 1), id: id)
                for _ in 0..<60 {
                    if onB.records.contains(where: { if case .record(_, .write(let w)) = $0 { w.writeID == record.writeID } else { false } }) {
                        return
                    }
                    let seen = onB.records.count
                    switch try propose(b, loop, room: room, after: onB.sequences.last ?? 0, record) {
                    case .stored(let s):
                        try runLoop(loop, until: { onB.sequences.contains(s) }, "record \(s) on B")
                        return
                    case .superseded, .failed, .pending:
                        // Whatever was stored reaches B's follow; wait a little for it, then retry.
                        try? runLoop(loop, until: { onB.records.count > seen }, bound: .seconds(2), "a record on B")
                    }
                }
                throw TestClusterError(message: "write \(id) never stored")
            }

            try writeThroughB("before")
            // The server that runs A's consumer: its deliveries and heartbeats stop with it.
            let server = try #require(a.followsByRoom[room]?.consumerServer)
            let index = try #require(["n1", "n2", "n3"].firstIndex(of: server))
            try cluster.kill(server: index)
            for k in 1...3 { try writeThroughB("after\(k)") }
            try runLoop(loop, until: { onA.records.count >= onB.records.count }, bound: .seconds(90), "A catching up")
            #expect(onA.records == onB.records)
            #expect(onB.records.count == 4)
            #expect(onA.failure == nil && onB.failure == nil)
        }

        /// Without a quorum (two of three servers killed) a proposal fails and a new follow fails
        /// (it does not wait): both on the loop thread, neither stored nor delivered.
        @Test func withoutAQuorumProposalsAndNewFollowsFail() throws {
            let setup = try LoopOnCluster()
            defer { setup.down() }
            let (cluster, loop) = (setup.cluster, setup.loop)
            let a = try setup.connect(servers: [cluster.urls[0]], requestTimeout: .seconds(2))
            let room = "quorum"
            guard case .stored(let s1) = try propose(a, loop, room: room, after: 0, write(room, version: 1, id: "q1")) else {
                Issue.record("the first write was not stored")
                return
            }
            try cluster.kill(server: 1)
            try cluster.kill(server: 2)

            let refused = try propose(a, loop, room: room, after: s1, write(room, version: 2, id: "q2"))
            guard case .failed(let error) = refused else {
                Issue.record("a proposal without a quorum: \(refused)")
                return
            }
            #expect(!error.isFatal)
            #expect("\(error)".contains(room))

            let seen = FollowRecorder()
            seen.follow(a, room: "never written")
            try runLoop(loop, until: { seen.failure != nil }, "the follow's failure")
            #expect(seen.events.last == .failed)
            #expect(!seen.isCurrent)
        }

        /// Every node derives the same epoch from the stream's salt, the room and the sequence;
        /// these are Protocol/CLUSTER.md's worked example (computed independently with Python's
        /// hashlib).
        @Test func epochDerivationMatchesTheSpecsExample() {
            let salt = "5f2b9c1e8a7d4036b1e9f0c2d4a6b8e0"
            #expect(RoomEpoch.derive(salt: salt, room: "lobby", after: 0) == 13_841_137_794_743_490_180)
            #expect(RoomEpoch.derive(salt: salt, room: "lobby", after: 42) == 9_682_620_625_761_801_357)
            #expect(RoomEpoch.derive(salt: salt, room: "café ☕", after: 0) == 10_998_947_090_865_169_818)
        }

        /// Protocol/CLUSTER.md's example records, byte for byte, and back; its subject and key.
        @Test func recordBytesMatchTheSpecsExamples() throws {
            let write = RoomLogEntry.write(WriteRecord(room: "lobby", epoch: 1, version: 1, writeID: [0xab, 0xcd], diffFrame: [0xde, 0xad, 0xbe]))
            let writeBytes: [UInt8] = [0x01, 0x05, 0x6c, 0x6f, 0x62, 0x62, 0x79, 0x01, 0x01, 0x02, 0xab, 0xcd, 0x03, 0xde, 0xad, 0xbe]
            #expect(write.encode(room: "lobby") == writeBytes)
            #expect(try RoomLogEntry(payload: writeBytes) == write)
            let tombstone = RoomLogEntry.tombstone(epoch: 13_841_137_794_743_490_180, version: 3)
            let tombstoneBytes: [UInt8] = [
                0x04, 0x05, 0x6c, 0x6f, 0x62, 0x62, 0x79, 0x84, 0xad, 0xad, 0xb7, 0xda, 0xaf, 0xe6, 0x8a, 0xc0, 0x01, 0x03,
            ]
            #expect(tombstone.encode(room: "lobby") == tombstoneBytes)
            #expect(try RoomLogEntry(payload: tombstoneBytes) == tombstone)
            #expect(throws: StoreError.self) { try RoomLogEntry(payload: [0x05] + tombstoneBytes.dropFirst()) }
            #expect(throws: StoreError.self) { try RoomLogEntry(payload: writeBytes + [0]) }
            #expect(RoomSubjects.subject(room: "lobby") == "snapsync.room.6c6f626279")
            #expect(RoomSubjects.subject(room: "café ☕") == "snapsync.room.636166c3a920e29895")
            #expect(RoomSubjects.checkpointSubject(room: "lobby") == "$KV.snapsync-checkpoints.6c6f626279")
            #expect(RoomSubjects.messageID(room: "lobby", writeID: [0xab, 0xcd], expected: 7) == "6c6f626279.abcd.7")
        }

        /// JetStream's delivery metadata in both reply-subject forms.
        @Test func deliveryMetadataIsReadFromBothReplySubjectForms() {
            #expect(
                DeliveryMetadata(replySubject: "$JS.ACK.snapsync-rooms.c1.1.42.7.1700000000000000000.3")
                    == DeliveryMetadata(consumer: "c1", streamSequence: 42, consumerSequence: 7, pending: 3))
            #expect(
                DeliveryMetadata(replySubject: "$JS.ACK.hub.ACCHASH.snapsync-rooms.c1.1.42.7.1700000000000000000.3.tok")
                    == DeliveryMetadata(consumer: "c1", streamSequence: 42, consumerSequence: 7, pending: 3))
            #expect(DeliveryMetadata(replySubject: "$JS.ACK.snapsync-rooms.c1.1.x.7.1.3") == nil)
            #expect(DeliveryMetadata(replySubject: "_INBOX.abc") == nil)
        }
    }
}
