import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
import SnapSyncTestSupport
@testable import SnapSyncHub

// Folds of large rooms run off the loop (Hub+FoldedCatchup.swift): the JOIN waits, its session's
// later requests wait behind it, and once the fold is done the JOIN is handled again with it.
// Every room here counts as large (`foldFreeBytes` 0), and the worker is the test's.

@Suite(.unitTests) struct HubOffLoopFoldTests {
    private func harness() -> (HubHarness, ManualWorker) {
        let harness = HubHarness {
            $0.foldFreeBytes = 0
            $0.foldMinimumReplayBytes = 0
        }
        let worker = ManualWorker()
        harness.hub.offLoopWorker = worker
        return (harness, worker)
    }

    /// A reader joined at the room's setup, then away while `count` updates land.
    private func awayReader(
        _ harness: HubHarness, _ writer: Session, count: Int = 40
    ) throws -> (reader: Session, held: RoomSnapshot, position: RoomPosition, chain: RoomChain) {
        harness.mutate(writer, "room", addItem("a", first: true))
        harness.mutate(writer, "room", [.appendItems(["b", "c", "d"].map { hubElement($0) }, toSection: "s")])
        _ = harness.drain(writer)
        let reader = harness.connect()
        guard case .snapshot(_, _, let epoch, let version, _, _, let held, let chain?)? = harness.join(reader, "room").first else {
            throw TestFailure("no SNAPSHOT")
        }
        harness.send(.leave(requestID: 2, room: "room"), from: reader)
        _ = harness.drain(reader)
        update(harness, writer, count: count)
        return (reader, held, RoomPosition(epoch: epoch, version: version), chain)
    }

    private func update(_ harness: HubHarness, _ writer: Session, count: Int, tag: String = "") {
        for index in 0..<count {
            harness.mutate(writer, "room", [.updateItems([hubElement(["a", "b", "c"][index % 3], "\(tag)\(index): a payload to weigh")], .reload)])
        }
        _ = harness.drain(writer)
    }

    @Test func theJoinWaitsForTheFoldThenGetsItTheDiffsWrittenMeanwhileAndItsLaterAnswers() throws {
        let (harness, worker) = harness()
        let writer = harness.connect()
        let (reader, held, position, chain) = try awayReader(harness, writer)
        let folded = try #require(harness.hub.rooms["room"]).version

        #expect(harness.join(reader, "room", resume: position, chain: chain, requestID: 5).isEmpty, "nothing before the fold")
        #expect(worker.count == 1)
        // Its next request waits behind the JOIN; the room moves on meanwhile.
        harness.send(.join(requestID: 6, room: "other", resume: nil), from: reader)
        #expect(harness.drain(reader).isEmpty)
        update(harness, writer, count: 2, tag: "meanwhile ")
        harness.checkInvariants("room")

        worker.finish()
        let room = try #require(harness.hub.rooms["room"])
        let answer = harness.drain(reader)
        guard answer.count == 5, case .catchup(5, "room", position.epoch, position.version, folded, .folded(let digest)?) = answer[0],
            case .diff("room", _, folded, let ops, let foldChain?) = answer[1],
            case .diff("room", _, folded + 1, let next, let chain1?) = answer[2],
            case .diff("room", _, folded + 2, let last, let chain2?) = answer[3],
            case .snapshot(6, "other", _, _, _, _, _, _) = answer[4]
        else {
            Issue.record("expected the folded CATCHUP, its DIFF, the two DIFFs after it and the SNAPSHOT of the next JOIN: \(answer)")
            return
        }
        var state = held
        try state.apply(ops, limits: room.limits.model)
        #expect(state.digest == digest && foldChain == room.chain(atVersion: folded))
        try state.apply(next, limits: room.limits.model)
        try state.apply(last, limits: room.limits.model)
        #expect(state == room.snapshot)
        let frame1 = FrameEncoder().encode(.diff(room: "room", epoch: position.epoch, version: folded + 1, ops: next))
        let frame2 = FrameEncoder().encode(.diff(room: "room", epoch: position.epoch, version: folded + 2, ops: last))
        #expect(chain1 == foldChain.next(frame: frame1) && chain2 == chain1.next(frame: frame2) && chain2 == room.chain)
        #expect(harness.hub.stats.foldedCatchups == 1 && room.members.count == 1)
        #expect(reader.foldDone == nil, "the fold is not kept once sent")
        // A member from then on: live DIFFs reach it.
        update(harness, writer, count: 1, tag: "live ")
        #expect(harness.drain(reader).compactMap(\.diffVersion) == [folded + 3])
    }

    @Test func aCrowdResumingFromOneVersionWaitsForOneFold() throws {
        let (harness, worker) = harness()
        let writer = harness.connect()
        let (first, _, position, chain) = try awayReader(harness, writer)
        let others = [harness.connect(), harness.connect()]
        for reader in [first] + others {
            #expect(harness.join(reader, "room", resume: position, chain: chain, requestID: 5).isEmpty)
        }
        #expect(worker.count == 1)
        worker.finish()
        let room = try #require(harness.hub.rooms["room"])
        for reader in [first] + others {
            let answer = harness.drain(reader)
            guard case .catchup(5, _, _, _, _, .folded(let digest)?)? = answer.first else {
                Issue.record("not folded: \(answer)")
                continue
            }
            #expect(answer.count == 2 && digest == room.snapshot.digest)
        }
        #expect(harness.hub.stats.foldedCatchups == 3 && room.members.count == 3)
    }

    /// At most `maxFoldsInFlight` distinct folds run at once: a resume beyond them is replayed.
    @Test func foldsBeyondTheLimitAreReplayed() throws {
        let (harness, worker) = harness()
        let writer = harness.connect()
        var (reader, _, position, chain) = try awayReader(harness, writer, count: 10)
        var resumes: [(Session, RoomPosition, RoomChain)] = [(reader, position, chain)]
        for _ in 0..<Hub.maxFoldsInFlight {
            reader = harness.connect()
            let room = try #require(harness.hub.rooms["room"])
            (position, chain) = (RoomPosition(epoch: room.epoch, version: room.version), try #require(room.chain))
            resumes.append((reader, position, chain))
            update(harness, writer, count: 10)
        }
        for (index, (reader, position, chain)) in resumes.enumerated() {
            let answer = harness.join(reader, "room", resume: position, chain: chain, requestID: 5)
            if index < Hub.maxFoldsInFlight {
                #expect(answer.isEmpty)
            } else {
                guard case .catchup(5, _, _, position.version, _, .replay?)? = answer.first else {
                    Issue.record("the resume beyond the limit: \(answer)")
                    continue
                }
            }
        }
        #expect(worker.count == Hub.maxFoldsInFlight && harness.hub.stats.foldsDeferred == 1)
        worker.finish()
        for (reader, _, _) in resumes.prefix(Hub.maxFoldsInFlight) {
            guard case .catchup(5, _, _, _, _, .folded?)? = harness.drain(reader).first else {
                Issue.record("a fold in flight was not sent")
                continue
            }
        }
    }

    /// The room ended while its fold ran: the JOIN is handled as if it came now (a new room,
    /// so a resync SNAPSHOT), never answered with the fold of the room that is gone.
    @Test func aRoomDroppedDuringTheFoldAnswersTheJoinAfresh() throws {
        let (harness, worker) = harness()
        let writer = harness.connect()
        let (reader, _, position, chain) = try awayReader(harness, writer)
        #expect(harness.join(reader, "room", resume: position, chain: chain, requestID: 5).isEmpty)
        harness.send(.drop(requestID: 9, room: "room"), from: writer)
        _ = harness.drain(writer)
        worker.finish()
        let answer = harness.drain(reader)
        guard case .snapshot(5, "room", let epoch, 0, .resync, _, let snapshot, _)? = answer.first else {
            Issue.record("expected a resync SNAPSHOT of the new room: \(answer)")
            return
        }
        #expect(epoch != position.epoch && snapshot.numberOfItems == 0 && harness.hub.stats.foldedCatchups == 0)
        #expect(reader.foldDone == nil, "the fold of the room that is gone is not kept")
    }

    /// A session that goes away while its JOIN waits gets nothing, and the fold is not kept
    /// waiting for it.
    @Test func aSessionEndedDuringTheFoldIsForgotten() throws {
        let (harness, worker) = harness()
        let writer = harness.connect()
        let (reader, _, position, chain) = try awayReader(harness, writer)
        #expect(harness.join(reader, "room", resume: position, chain: chain, requestID: 5).isEmpty)
        harness.hub.end(reader, reason: "peer went away")
        worker.finish()
        #expect(harness.hub.foldsInFlight.isEmpty && harness.hub.rooms["room"]?.members.count == 0)
        #expect(harness.hub.stats.foldedCatchups == 0)
    }
}
