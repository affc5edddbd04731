import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncStore
import SnapSyncStoreTestSupport

// MemoryRoomLog, the in-process RoomLog the cluster tests run on: it must behave as the
// contract says JetStream does, or the hub tests prove nothing.

@Suite(.unitTests) struct MemoryRoomLogTests {
    /// What one follow saw, in order.
    final class Events {
        var seen: [String] = []
        func record(_ event: RoomLogEvent) {
            switch event {
            case .base(let checkpoint): seen.append("base \(checkpoint?.sequence ?? 0)")
            case .record(let sequence, _, let entry):
                if case .write(let record) = entry { seen.append("record \(sequence) v\(record.version)") } else { seen.append("tombstone \(sequence)") }
            case .current: seen.append("current")
            case .failed: seen.append("failed")
            }
        }
    }

    func write(_ version: UInt64, id: [UInt8] = []) -> RoomLogEntry {
        .write(WriteRecord(room: "r", epoch: 1, version: version, writeID: id, diffFrame: [0, 0, 0, 1, UInt8(version)]))
    }

    @Test func proposalsAreCompareAndSetOnTheRoomsLastSequenceAndDeduplicated() {
        let log = MemoryRoomLog()
        var outcomes: [ProposalOutcome] = []
        log.propose(room: "r", expectedSequence: 0, messageID: [1], entry: write(1)) { outcomes.append($0) }
        log.propose(room: "other", expectedSequence: 0, messageID: [], entry: write(1)) { outcomes.append($0) }
        log.propose(room: "r", expectedSequence: 0, messageID: [2], entry: write(2)) { outcomes.append($0) }
        // A repeat of a proposal (same id, same expectation) even after the room moved; the same
        // id expecting another sequence is another message, as in JetStream, whose message id
        // carries the expectation.
        log.propose(room: "r", expectedSequence: 0, messageID: [1], entry: write(1)) { outcomes.append($0) }
        log.propose(room: "r", expectedSequence: 7, messageID: [1], entry: write(1)) { outcomes.append($0) }
        log.propose(room: "r", expectedSequence: 1, messageID: [], entry: write(2)) { outcomes.append($0) }
        #expect(outcomes.isEmpty)
        log.runAll()
        #expect(
            outcomes == [.stored(sequence: 1), .stored(sequence: 2), .superseded, .stored(sequence: 1), .superseded, .stored(sequence: 3)])
        #expect(log.records(of: "r").map(\.sequence) == [1, 3])
    }

    @Test func aFollowGetsTheBaseTheRecordsAfterItCurrentThenLaterRecords() {
        let log = MemoryRoomLog()
        let node2 = MemoryRoomLog(sharing: log)
        log.propose(room: "r", expectedSequence: 0, messageID: [], entry: write(1)) { _ in }
        log.propose(room: "r", expectedSequence: 1, messageID: [], entry: write(2)) { _ in }
        log.runAll()
        log.saveCheckpoint(RoomImage(room: "r", epoch: 1, version: 1, snapshot: RoomSnapshot()), history: [], sequence: 1, chain: nil)
        let events = Events()
        node2.follow(room: "r") { events.record($0) }
        log.propose(room: "r", expectedSequence: 2, messageID: [], entry: write(3)) { _ in }
        log.runAll()
        // Record 3 was stored before the catch-up ran: it is part of it, and not delivered twice.
        #expect(events.seen == ["base 1", "record 2 v2", "record 3 v3", "current"])
        node2.unfollow(room: "r")
        log.propose(room: "r", expectedSequence: 3, messageID: [], entry: write(4)) { _ in }
        log.runAll()
        #expect(events.seen.count == 4 && !node2.isFollowing("r"))
    }

    @Test func theAcknowledgementOrderIsChosenAndFailuresMayStoreAllTheSame() {
        let log = MemoryRoomLog()
        let events = Events()
        log.follow(room: "r") { events.record($0) }
        log.runAll()
        var outcomes: [ProposalOutcome] = []
        log.acknowledgeBeforeDelivering = false
        log.propose(room: "r", expectedSequence: 0, messageID: [], entry: write(1)) { outcomes.append($0) }
        #expect(log.runNext() && events.seen.last == "record 1 v1" && outcomes.isEmpty)
        log.runAll()
        log.failProposals = (1, .logUnavailable("timeout"))
        log.storeFailedProposals = true
        log.propose(room: "r", expectedSequence: 1, messageID: [], entry: write(2)) { outcomes.append($0) }
        log.runAll()
        #expect(outcomes == [.stored(sequence: 1), .failed(.logUnavailable("timeout"))])
        #expect(events.seen.last == "record 2 v2")
        log.interruptFollow(of: "r")
        log.runAll()
        #expect(events.seen.last == "failed" && !log.isFollowing("r"))
    }

    @Test func retentionKeepsTheLastRecordsOfEachRoomAndAFollowStartsAfterThem() {
        let log = MemoryRoomLog()
        let node2 = MemoryRoomLog(sharing: log)
        log.retain = 2
        for version in 1...3 {
            log.propose(room: "r", expectedSequence: UInt64(version - 1), messageID: [], entry: write(UInt64(version))) { _ in }
        }
        log.propose(room: "other", expectedSequence: 0, messageID: [], entry: write(1)) { _ in }
        log.runAll()
        #expect(log.records(of: "r").map(\.sequence) == [2, 3] && log.records(of: "other").map(\.sequence) == [4])
        let events = Events()
        node2.follow(room: "r") { events.record($0) }
        log.runAll()
        #expect(events.seen == ["base 0", "record 2 v2", "record 3 v3", "current"])
        // Still compare-and-set on the last sequence, which is kept.
        var outcome: ProposalOutcome?
        log.propose(room: "r", expectedSequence: 3, messageID: [], entry: write(4)) { outcome = $0 }
        log.runAll()
        #expect(outcome == .stored(sequence: 5) && log.records(of: "r").map(\.sequence) == [3, 5])
    }

    /// nats-server 2.9's bug nats-io/nats-server#4320, once: a proposal expecting a sequence that is no longer the
    /// last is stored all the same, with its expectation.
    @Test func theRaceSwitchStoresOneStaleProposal() {
        let log = MemoryRoomLog()
        var outcomes: [ProposalOutcome] = []
        log.storesNextStaleProposal = true
        log.propose(room: "r", expectedSequence: 0, messageID: [], entry: write(1)) { outcomes.append($0) }
        log.propose(room: "r", expectedSequence: 0, messageID: [], entry: write(1)) { outcomes.append($0) }
        log.propose(room: "r", expectedSequence: 0, messageID: [], entry: write(1)) { outcomes.append($0) }
        log.propose(room: "r", expectedSequence: 9, messageID: [], entry: write(2)) { outcomes.append($0) }
        log.runAll()
        #expect(outcomes == [.stored(sequence: 1), .stored(sequence: 2), .superseded, .superseded])
        #expect(log.records(of: "r").map(\.expected) == [0, 0] && !log.storesNextStaleProposal)
    }

    @Test func aLostCheckpointIsNotKept() {
        let log = MemoryRoomLog()
        let image = RoomImage(room: "r", epoch: 1, version: 1, snapshot: RoomSnapshot())
        log.losesCheckpoints = true
        log.saveCheckpoint(image, history: [], sequence: 1, chain: nil)
        #expect(log.checkpoint(of: "r") == nil && log.savedCheckpoints.isEmpty)
        log.losesCheckpoints = false
        log.saveCheckpoint(image, history: [], sequence: 1, chain: nil)
        #expect(log.checkpoint(of: "r")?.sequence == 1)
    }

    @Test func epochsAreTheSameOnEveryNodeAndNeverZero() {
        let log = MemoryRoomLog(), node2 = MemoryRoomLog(sharing: log), elsewhere = MemoryRoomLog(epochSalt: 1)
        #expect(log.epoch(room: "r", after: 0) == node2.epoch(room: "r", after: 0))
        #expect(log.epoch(room: "r", after: 0) != log.epoch(room: "r", after: 5))
        #expect(log.epoch(room: "r", after: 0) != elsewhere.epoch(room: "r", after: 0))
        #expect(log.epoch(room: "r", after: 0) != 0)
    }
}
