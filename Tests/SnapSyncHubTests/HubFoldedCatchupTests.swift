import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
import SnapSyncStore
import SnapSyncTestSupport
@testable import SnapSyncHub

// The folded CATCHUP (PROTOCOL.md §11.12): a version 3 resume gets the net change since its
// version as one DIFF when that is smaller than the DIFFs it missed, rebuilt from the room's
// resume base (ResumeBase.swift, Room+Folding.swift).

@Suite(.unitTests) struct HubFoldedCatchupTests {
    /// Writes `count` payload updates of the items `a`…`d` (each DIFF carries one), so that
    /// the replay grows with `count` and the net change stays four items.
    private func updates(_ harness: HubHarness, _ writer: Session, count: Int, tag: String = "") {
        for index in 0..<count {
            let id = ["a", "b", "c", "d"][index % 4]
            harness.mutate(writer, "room", [.updateItems([hubElement(id, "\(tag)\(index) of \(id), long enough to weigh")], .reload)])
        }
        _ = harness.drain(writer)
    }

    private func seed(_ harness: HubHarness, _ writer: Session) {
        harness.mutate(writer, "room", addItem("a", first: true))
        harness.mutate(writer, "room", [.appendItems(["b", "c", "d", "e"].map { hubElement($0) }, toSection: "s")])
        _ = harness.drain(writer)
    }

    /// The replica's state and position, as a client holds them after a SNAPSHOT.
    private func replica(_ harness: HubHarness, _ session: Session) throws -> (snapshot: RoomSnapshot, epoch: UInt64, version: UInt64, chain: RoomChain) {
        guard case .snapshot(_, _, let epoch, let version, _, _, let snapshot, let chain?)? = harness.join(session, "room").first else {
            throw TestFailure("no SNAPSHOT")
        }
        return (snapshot, epoch, version, chain)
    }

    @Test func aResumeAfterManyWritesGetsOneDiffToTheRoomNow() throws {
        let harness = HubHarness()
        let writer = harness.connect(), reader = harness.connect()
        seed(harness, writer)
        let held = try replica(harness, reader)
        harness.send(.leave(requestID: 2, room: "room"), from: reader)
        _ = harness.drain(reader)
        updates(harness, writer, count: 300)
        updates(harness, writer, count: 0)
        harness.mutate(writer, "room", [.moveItem("a", .after("e")), .deleteItems(["c"]), .insertItems([hubElement("x", "X")], .before("b"))])
        _ = harness.drain(writer)
        harness.checkInvariants("room")
        let room = try #require(harness.hub.rooms["room"])
        let answer = harness.join(reader, "room", resume: RoomPosition(epoch: held.epoch, version: held.version), chain: held.chain, requestID: 5)
        guard answer.count == 2, case .catchup(5, "room", held.epoch, held.version, room.version, .folded(let digest)?) = answer[0],
            case .diff("room", held.epoch, room.version, let ops, let chain?) = answer[1]
        else {
            Issue.record("expected a folded CATCHUP and one DIFF, got \(answer.count) messages: \(answer.first.map { "\($0)" } ?? "")")
            return
        }
        #expect(digest == room.snapshot.digest && chain == room.chain && chain != .unknown)
        var state = held.snapshot
        try state.apply(ops, limits: room.limits.model)
        #expect(state == room.snapshot && state.digest == digest)
        // Minimal: the net change, not the 300 updates (four payloads, a move, a delete, an insert).
        #expect(ops.count <= 7, "\(ops)")
        #expect(harness.hub.stats.foldedCatchups == 1)
        // The member then follows live DIFFs chained from the chain it took.
        harness.mutate(writer, "room", [.deleteItems(["x"])])
        guard case .diff(_, _, let next, let liveOps, let liveChain?)? = harness.drain(reader).first else {
            Issue.record("no live DIFF after the folded catch-up")
            return
        }
        let frame = FrameEncoder().encode(.diff(room: "room", epoch: held.epoch, version: next, ops: liveOps))
        #expect(next == room.version && liveChain == chain.next(frame: frame))
        harness.checkInvariants("room")
    }

    @Test func aFewSmallDiffsAreReplayedAsBefore() throws {
        let harness = HubHarness()
        let writer = harness.connect(), reader = harness.connect()
        seed(harness, writer)
        let held = try replica(harness, reader)
        updates(harness, writer, count: 5)
        _ = harness.drain(reader)
        let answer = harness.join(reader, "room", resume: RoomPosition(epoch: held.epoch, version: held.version), chain: held.chain, requestID: 5)
        guard case .catchup(5, _, _, held.version, held.version + 5, .replay?) = answer.first else {
            Issue.record("expected a replayed CATCHUP, got \(answer.first.map { "\($0)" } ?? "nothing")")
            return
        }
        #expect(answer.count == 6 && harness.hub.stats.foldedCatchups == 0)
    }

    @Test func versionTwoAndAFoldlessDaemonReplay() throws {
        for (versions, folds) in [([UInt64(2)], true), ([ProtocolVersion.current], false)] {
            let harness = HubHarness { $0.foldResumes = folds }
            let writer = harness.connect(), reader = harness.connect(versions: versions)
            seed(harness, writer)
            guard case .snapshot(_, _, let epoch, let version, _, _, _, _)? = harness.join(reader, "room").first else {
                Issue.record("no SNAPSHOT")
                return
            }
            updates(harness, writer, count: 300)
            _ = harness.drain(reader)
            let answer = harness.join(reader, "room", resume: RoomPosition(epoch: epoch, version: version), requestID: 5)
            let expectedForm: CatchupForm? = versions == [2] ? nil : .replay
            guard case .catchup(5, _, _, version, let to, expectedForm) = answer.first, answer.count == Int(to - version) + 1 else {
                Issue.record("expected a replay for versions \(versions), folding \(folds): \(answer.first.map { "\($0)" } ?? "nothing")")
                return
            }
            #expect(harness.hub.rooms["room"]?.resumeBase == nil || folds)
            #expect(harness.hub.stats.foldedCatchups == 0)
        }
    }

    /// The base follows the history's oldest end: with a short history it has taken most of
    /// the DIFFs, and every version the history still reaches is rebuilt exactly.
    @Test func theBaseFollowsTheHistorysEvictions() throws {
        let harness = HubHarness { $0.wire.historyCount = 40 }
        let writer = harness.connect()
        seed(harness, writer)
        var states: [UInt64: RoomSnapshot] = [:]
        var rng = SplitMix64(seed: 11)
        for index in 0..<200 {
            let room = try #require(harness.hub.rooms["room"])
            states[room.version] = room.snapshot
            let ids = room.snapshot.itemIdentifiers
            let pick = ids[Int.random(in: 0..<ids.count, using: &rng)]
            let ops: [SnapshotOperation] =
                switch index % 4 {
                case 0: [.insertItems([hubElement("n\(index)", "new")], .after(pick))]
                case 1: [.updateItems([SnapshotElement(pick, payload: SnapshotPayload("u\(index)"))], .reload)]
                case 2: [.moveItem(pick, .before(ids[0]))]
                default: ids.count > 3 ? [.deleteItems([pick])] : [.appendItems([hubElement("m\(index)")], toSection: "s")]
                }
            harness.mutate(writer, "room", ops)
            harness.checkInvariants("room")
        }
        let room = try #require(harness.hub.rooms["room"])
        let base = try #require(room.resumeBase)
        #expect(base.version == room.historyBaseVersion && room.historyCount == 40)
        for version in room.historyBaseVersion...room.version - 1 {
            #expect(room.state(atVersion: version) == states[version], "version \(version)")
            let fold = try #require(room.foldedCatchup(from: version))
            guard case .diff(_, _, room.version, let ops, room.chain)? = try? FrameDecoder.decode(frame: fold.frame.array, version: 3) else {
                Issue.record("the fold from \(version) is not a chained DIFF to \(room.version)")
                continue
            }
            var state = try #require(states[version])
            try state.apply(ops, limits: room.limits.model)
            #expect(state == room.snapshot, "the fold from \(version)")
        }
        #expect(room.state(atVersion: room.historyBaseVersion - 1) == nil)
        // The base is the undos of the history's writes, far smaller than a second state, and
        // the memory budget counts them.
        #expect(room.resumeBaseBytes == base.byteCount && room.resumeBaseBytes > 0)
        #expect(room.resumeBaseBytes < room.historyBytes)
        #expect(RoomMemoryBudget.bytes(of: room) >= room.snapshot.canonicalByteCount + room.resumeBaseBytes)
    }

    /// A REPLACE that changes little keeps its undo (a few bytes); one that changes much of the
    /// room keeps the state before it whole, as installing the target is O(1). Either way every
    /// version in reach is rebuilt exactly.
    @Test func aReplaceKeepsItsUndoOrTheStateBeforeItWhole() throws {
        let room = Room(name: "room", epoch: 9, version: 0, snapshot: RoomSnapshot(), chain: .start(epoch: 9))
        var scratch: [UInt8] = []
        func state(_ prefix: String, changed: Int) throws -> RoomSnapshot {
            let items = (0..<200).map { hubElement($0 < changed ? "\(prefix)\($0)" : "i\($0)", "payload \($0)") }
            return try RoomSnapshot([(section: hubElement("s"), items: items)])
        }
        var states: [UInt64: RoomSnapshot] = [0: room.snapshot]
        var undoBytes: [Int] = []
        for target in [try state("i", changed: 0), try state("x", changed: 1), try state("y", changed: 150)] {
            let before = room.resumeBaseBytes
            guard case .applied(let version, _) = room.replace(with: target, expectedVersion: nil, writeID: [], scratch: &scratch) else {
                throw TestFailure("REPLACE not applied")
            }
            states[version] = room.snapshot
            undoBytes.append(room.resumeBaseBytes - before)
            try room.checkInvariants()
        }
        // The first REPLACE fills an empty room: the whole (empty) state before it is 3 bytes.
        // The second renames one item: its undo names it twice, well under 100 bytes. The third
        // changes 150 of 200 items: the state before it, whole.
        #expect(undoBytes[0] < 10 && undoBytes[1] < 100)
        let second = try #require(states[2])
        #expect(undoBytes[2] == second.canonicalByteCount + 2)
        for version in 0...room.version { #expect(room.state(atVersion: version) == states[version], "version \(version)") }
    }

    /// The undos weigh at most the room (or 32 KiB). Past that, the oldest go while the window's
    /// DIFFs weigh less than the room (undos of shrinking updates: each holds the old, larger
    /// payload); once the window outweighs the room, they become an anchor, the whole state at
    /// the reach's start, and the reach stays. Every version in reach is rebuilt exactly.
    @Test func theUndosNeverOutweighTheRoom() throws {
        let big = String(repeating: "p", count: 1000), small = String(repeating: "q", count: 100)
        let items = (0..<100).map { hubElement("i\($0)", big) }
        let full = try RoomSnapshot([(section: hubElement("s"), items: items)])
        let room = Room(name: "room", epoch: 9, version: 0, snapshot: full, chain: .start(epoch: 9))
        var scratch: [UInt8] = []
        var states: [UInt64: RoomSnapshot] = [0: full]
        func write(_ ops: [SnapshotOperation]) throws {
            guard case .applied(let version, _) = room.mutate(ops, expectedVersion: nil, writeID: [], scratch: &scratch) else {
                throw TestFailure("\(ops) not applied")
            }
            states[version] = room.snapshot
            try room.checkInvariants()
            #expect(room.resumeBaseBytes <= Swift.max(room.snapshot.canonicalByteCount, 32 * 1024) || room.resumeBase?.anchor != nil)
        }
        // 60 payloads shrink from 1,000 to 100 bytes: 60 kB of undos for a room of 46 kB, and a
        // window of 60 small DIFFs: the oldest undos go.
        for index in 0..<60 { try write([.updateItems([hubElement("i\(index)", small)], .reload)]) }
        let base = try #require(room.resumeBase)
        #expect(base.anchor == nil && base.version > 0 && room.resumeBaseBytes <= room.snapshot.canonicalByteCount)
        #expect(!room.canFold(from: 0))
        for version in base.version...room.version { #expect(room.state(atVersion: version) == states[version], "version \(version)") }
        // Most items deleted: the room is now smaller than its window, so the undos become the
        // state at the reach's start, whole, and the reach stays where it was.
        try write([.deleteItems(items.dropFirst(3).map(\.id))])
        let anchored = try #require(room.resumeBase)
        #expect(anchored.anchor != nil && anchored.version == base.version)
        #expect(room.resumeBaseBytes == states[base.version]?.canonicalByteCount)
        for version in anchored.version...room.version { #expect(room.state(atVersion: version) == states[version], "version \(version)") }
        let fold = try #require(room.foldedCatchup(from: anchored.version))
        #expect(fold.digest == room.snapshot.digest)
    }

    /// A room loaded with its base (a checkpoint's) keeps it as the anchor of the versions before
    /// the load, and the undos of the writes after it; once the window has moved past the load,
    /// the anchor goes and the undos reach back alone. Every version in reach is rebuilt exactly
    /// all along.
    @Test func aLoadedBaseIsAnAnchorUntilTheWindowPassesTheLoad() throws {
        var limits = WireLimits()
        limits.historyCount = 40
        let source = Room(name: "room", epoch: 9, version: 0, snapshot: RoomSnapshot(), limits: limits, chain: .start(epoch: 9))
        var scratch: [UInt8] = []
        var states: [UInt64: RoomSnapshot] = [:]
        func update(_ room: Room, _ index: Int) throws -> UInt64 {
            guard
                case .applied(let version, _) = room.mutate(
                    [.updateItems([hubElement("i\(index % 20)", "update \(index)")], .reload)], expectedVersion: nil, writeID: [], scratch: &scratch)
            else { throw TestFailure("write \(index) not applied") }
            states[version] = room.snapshot
            try room.checkInvariants()
            return version
        }
        _ = source.mutate(
            [.appendSections([hubElement("s")]), .appendItems((0..<20).map { hubElement("i\($0)", "first") }, toSection: "s")],
            expectedVersion: nil, writeID: [], scratch: &scratch)
        let base = source.snapshot
        states[1] = base
        var records: [WriteRecord] = []
        for index in 0..<30 {
            let version = try update(source, index)
            records.append(
                WriteRecord(
                    room: "room", epoch: 9, version: version, writeID: [], fingerprint: nil, diffFrame: source.history.frames(after: version - 1)!.first!.array)
            )
        }
        let loaded = Room(
            name: "room", epoch: 9, version: source.version, snapshot: source.snapshot, limits: limits, history: records,
            chain: source.chain(atVersion: 1), base: base)
        let atLoad = try #require(loaded.resumeBase)
        #expect(atLoad.version == 1 && atLoad.anchor?.version == 1 && atLoad.undoStart == 31)
        try loaded.checkInvariants()
        // Ten writes: the anchor follows the window's oldest end; the undos cover the writes.
        for index in 30..<40 { _ = try update(loaded, index) }
        let mid = try #require(loaded.resumeBase)
        #expect(mid.anchor != nil && mid.version == loaded.historyBaseVersion && mid.undoStart == 31)
        for version in mid.version...loaded.version { #expect(loaded.state(atVersion: version) == states[version], "version \(version)") }
        // Forty more: the window has moved past the load, and the undos reach back alone.
        for index in 40..<80 { _ = try update(loaded, index) }
        let after = try #require(loaded.resumeBase)
        #expect(after.anchor == nil && after.version == loaded.historyBaseVersion)
        for version in after.version...loaded.version { #expect(loaded.state(atVersion: version) == states[version], "version \(version)") }
    }

    /// A room loaded with history knows no state before its load: resumes from before it are
    /// replayed, resumes from after it folded.
    @Test func aLoadedRoomFoldsOnlyFromItsLoad() throws {
        let source = Room(name: "room", epoch: 9, version: 0, snapshot: RoomSnapshot(), chain: .start(epoch: 9))
        var scratch: [UInt8] = []
        var records: [WriteRecord] = []
        _ = source.mutate(
            addItem("a", first: true) + [.appendItems([hubElement("b"), hubElement("c")], toSection: "s")], expectedVersion: nil, writeID: [], scratch: &scratch
        )
        for index in 0..<50 {
            guard
                case .applied(let version, let diff) = source.mutate(
                    [.updateItems([hubElement(["a", "b"][index % 2], "payload \(index), long enough to weigh something")], .reload)],
                    expectedVersion: nil, writeID: [], scratch: &scratch)
            else { throw TestFailure("write \(index) not applied") }
            records.append(WriteRecord(room: "room", epoch: 9, version: version, writeID: [], fingerprint: nil, diffFrame: diff.array))
        }
        let loaded = Room(
            name: "room", epoch: 9, version: source.version, snapshot: source.snapshot, history: records, chain: source.chain(atVersion: 1))
        #expect(loaded.chain == source.chain && loaded.resumeBase?.version == 51)
        #expect(!loaded.canFold(from: 10) && loaded.foldedCatchup(from: 10) == nil)
        for index in 0..<60 {
            _ = loaded.mutate(
                [.updateItems([hubElement("c", "later \(index), long enough to weigh something")], .reload)], expectedVersion: nil, writeID: [],
                scratch: &scratch)
        }
        #expect(throws: Never.self) { try loaded.checkInvariants() }
        let fold = try #require(loaded.foldedCatchup(from: 51))
        #expect(fold.from == 51 && fold.to == 111 && fold.digest == loaded.snapshot.digest)
        #expect(!loaded.canFold(from: 50))
    }

    /// Folds of rooms over `foldFreeBytes` are computed at most once per `foldInterval` in the
    /// whole daemon; in between, a resume from elsewhere, or in another room, is replayed, and
    /// one from the same place shares the room's last fold.
    @Test func largeRoomsFoldAtMostOncePerInterval() throws {
        let harness = HubHarness {
            $0.foldFreeBytes = 0
            $0.foldInterval = .seconds(1)
        }
        func resume(_ session: Session, _ room: String, _ held: (snapshot: RoomSnapshot, epoch: UInt64, version: UInt64, chain: RoomChain)) -> CatchupForm? {
            _ = harness.drain(session)
            let answer = harness.join(session, room, resume: RoomPosition(epoch: held.epoch, version: held.version), chain: held.chain, requestID: 8)
            guard case .catchup(_, _, _, _, _, let form)? = answer.first else { return nil }
            return form
        }
        let writer = harness.connect()
        var early: [String: (snapshot: RoomSnapshot, epoch: UInt64, version: UInt64, chain: RoomChain)] = [:]
        let readers = (0..<4).map { _ in harness.connect() }
        var middle: (snapshot: RoomSnapshot, epoch: UInt64, version: UInt64, chain: RoomChain)?
        for name in ["room", "other"] {
            harness.mutate(writer, name, addItem("a", first: true))
            harness.mutate(writer, name, [.appendItems(["b", "c", "d"].map { hubElement($0) }, toSection: "s")])
            _ = harness.drain(writer)
            guard case .snapshot(_, _, let epoch, let version, _, _, let snapshot, let chain?)? = harness.join(readers[name == "room" ? 0 : 3], name).first
            else { throw TestFailure("no SNAPSHOT of \(name)") }
            early[name] = (snapshot, epoch, version, chain)
        }
        _ = try replica(harness, readers[1])
        updates(harness, writer, count: 100)
        middle = try replica(harness, readers[2])
        updates(harness, writer, count: 100, tag: "again ")
        for _ in 0..<200 {
            harness.mutate(writer, "other", [.updateItems([hubElement("a", "a payload long enough to weigh, again and again")], .reload)])
        }
        _ = harness.drain(writer)
        guard case .folded? = resume(readers[0], "room", early["room"]!) else { Issue.record("the first resume is folded"); return }
        #expect(resume(readers[2], "room", middle!) == .replay && harness.hub.stats.foldsDeferred == 1)
        #expect(resume(readers[3], "other", early["other"]!) == .replay && harness.hub.stats.foldsDeferred == 2, "another room waits too")
        // The same position again: the fold is the room's last, and costs nothing.
        guard case .folded? = resume(readers[1], "room", early["room"]!) else { Issue.record("the same fold is shared"); return }
        harness.clock.advance(by: .seconds(2))
        guard case .folded? = resume(readers[3], "other", early["other"]!) else { Issue.record("after the interval a new fold is computed"); return }
        #expect(harness.hub.stats.foldedCatchups == 3 && harness.hub.stats.foldsDeferred == 2)
        harness.checkInvariants("room")
        harness.checkInvariants("other")
    }

    /// A room over `foldMaxBytes` is never folded: its resumes are replayed.
    @Test func aRoomOverTheFoldLimitIsReplayed() throws {
        let harness = HubHarness { $0.foldMaxBytes = 64 }
        let writer = harness.connect(), reader = harness.connect()
        seed(harness, writer)
        let held = try replica(harness, reader)
        updates(harness, writer, count: 300)
        _ = harness.drain(reader)
        let room = try #require(harness.hub.rooms["room"])
        #expect(room.snapshot.canonicalByteCount > 64)
        let answer = harness.join(reader, "room", resume: RoomPosition(epoch: held.epoch, version: held.version), chain: held.chain, requestID: 5)
        guard case .catchup(5, _, _, held.version, room.version, .replay?) = answer.first else {
            Issue.record("expected a replay: \(answer.first.map { "\($0)" } ?? "nothing")")
            return
        }
        #expect(harness.hub.stats.foldedCatchups == 0)
    }

    /// A resume whose chain is not the room's at its version is still a resync, folding or not.
    @Test func aForkedResumeIsStillResynced() throws {
        let harness = HubHarness()
        let writer = harness.connect(), reader = harness.connect()
        seed(harness, writer)
        let held = try replica(harness, reader)
        updates(harness, writer, count: 300)
        _ = harness.drain(reader)
        let forged = RoomChain.start(epoch: 12345)
        let answer = harness.join(reader, "room", resume: RoomPosition(epoch: held.epoch, version: held.version), chain: forged, requestID: 5)
        guard case .snapshot(5, _, _, _, .resync, _, _, _)? = answer.first else {
            Issue.record("expected SNAPSHOT resync, got \(answer.first.map { "\($0)" } ?? "nothing")")
            return
        }
    }
}
