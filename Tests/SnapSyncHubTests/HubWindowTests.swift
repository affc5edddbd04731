import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub

// Windows in-process (PROTOCOL.md §9 "Windows", §11.29–§11.31): a windowed member gets the
// window's rows and every section's count, then WINDOW_DIFFs that keep its replica equal to the
// window the rule defines, whatever the writes; the room's invariants (which compare every
// windowed member's snapshot with the window recomputed from the room) hold after each step.

@Suite(.unitTests) struct HubWindowTests {
    /// A client's windowed replica: it applies what the daemon sends, as the rule says.
    struct Replica {
        var snapshot = RoomSnapshot()
        var counts: [SnapshotIdentifier: UInt64] = [:]
        var window: [SectionWindow] = []
        var version: UInt64 = 0
        var frames = 0

        mutating func apply(_ messages: [Message], sourceLocation: SourceLocation = #_sourceLocation) {
            for message in messages {
                switch message {
                case .windowState(_, _, _, let version, _, let window, let counts, let snapshot):
                    self.snapshot = snapshot
                    self.window = window
                    self.counts = Dictionary(uniqueKeysWithValues: zip(snapshot.sectionIdentifiers, counts))
                    self.version = version
                case .windowDiff(_, _, _, let version, let window, let counts, let ops):
                    frames += 1
                    #expect(version >= self.version, "versions never go back", sourceLocation: sourceLocation)
                    #expect(throws: Never.self, sourceLocation: sourceLocation) { try snapshot.apply(ops, limits: .default) }
                    if let window { self.window = window }
                    for count in counts { self.counts[count.section] = count.items }
                    self.counts = self.counts.filter { snapshot.contains(section: $0.key) }
                    self.version = version
                case .diff, .snapshot, .catchup:
                    Issue.record("a windowed member got \(message.type.name)", sourceLocation: sourceLocation)
                default: break
                }
            }
        }

        /// The replica holds exactly the window of `room` the rule defines, and its counts.
        func check(against room: Room, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(snapshot == room.snapshot.windowSnapshot(window), "window \(window)", sourceLocation: sourceLocation)
            let expected = Dictionary(uniqueKeysWithValues: zip(room.snapshot.sectionIdentifiers, room.snapshot.sectionItemCounts))
            #expect(counts == expected, sourceLocation: sourceLocation)
        }
    }

    /// What `session` was sent, after the counts timer fired (as the daemon's would within
    /// `--window-counts-interval`).
    func drain(_ harness: HubHarness, _ session: Session) -> [Message] {
        harness.hub.flushWindowCounts()
        return harness.drain(session)
    }

    func items(_ range: Range<Int>) -> [SnapshotElement] { range.map { hubElement("i\($0)", "p\($0)") } }

    func rows(_ replica: Replica, _ section: String = "s") -> [String] {
        (replica.snapshot.rootItems(inSection: SnapshotIdentifier(section)) ?? []).map { String(decoding: $0.bytes, as: UTF8.self) }
    }

    @Test func aWindowFollowsInsertsDeletesAndMovesAtItsEdges() {
        let harness = HubHarness()
        let writer = harness.connect(), reader = harness.connect()
        harness.mutate(writer, "feed", [.appendSections([hubElement("s")]), .appendItems(items(0..<1000), toSection: "s")])
        _ = harness.drain(writer)
        harness.send(.window(requestID: 5, room: "feed", window: [SectionWindow(section: "s", range: .first(10))]), from: reader)
        var replica = Replica()
        let state = drain(harness, reader)
        guard case .windowState(5, "feed", _, 1, _, _, [1000], let snapshot) = state.first, state.count == 1 else {
            Issue.record("expected WINDOW_STATE, got \(state)")
            return
        }
        #expect(snapshot.numberOfItems == 10)
        replica.apply(state)
        #expect(rows(replica) == (0..<10).map { "i\($0)" })
        let room = harness.hub.rooms[RoomName("feed")]!

        // Inside the window's top edge: in at the top, i9 out at the bottom.
        harness.mutate(writer, "feed", [.insertItems([hubElement("new")], .before("i0"))])
        replica.apply(drain(harness, reader))
        #expect(rows(replica) == ["new"] + (0..<9).map { "i\($0)" } && replica.counts["s"] == 1001)
        // Below the window: the count alone.
        let frames = replica.frames
        harness.mutate(writer, "feed", [.appendItems([hubElement("tail")], toSection: "s")])
        let countOnly = drain(harness, reader)
        guard case .windowDiff(0, _, _, _, nil, [SectionCount(section: "s", items: 1002)], [])? = countOnly.first else {
            Issue.record("expected a count-only WINDOW_DIFF, got \(countOnly)")
            return
        }
        replica.apply(countOnly)
        #expect(replica.frames == frames + 1)
        // An update inside keeps its kind: UIKit reconfigures the cell instead of replacing it.
        harness.mutate(writer, "feed", [.updateItems([hubElement("i2", "new")], .reconfigure)])
        let updated = drain(harness, reader)
        guard case .windowDiff(0, _, _, _, nil, [], let updateOps)? = updated.first else {
            Issue.record("expected a WINDOW_DIFF, got \(updated)")
            return
        }
        #expect(updateOps == [.updateItems([hubElement("i2", "new")], .reconfigure)])
        replica.apply(updated)
        // An update outside the window changes nothing it holds: no frame at all.
        harness.mutate(writer, "feed", [.updateItems([hubElement("i500", "x")], .reload)])
        #expect(drain(harness, reader).isEmpty)
        // A delete inside: the next row comes up from below.
        harness.mutate(writer, "feed", [.deleteItems(["i3"])])
        replica.apply(drain(harness, reader))
        #expect(rows(replica) == ["new", "i0", "i1", "i2", "i4", "i5", "i6", "i7", "i8", "i9"])
        // A move from far below to just inside the bottom edge.
        harness.mutate(writer, "feed", [.moveItem("i700", .before("i9"))])
        replica.apply(drain(harness, reader))
        #expect(rows(replica).suffix(2) == ["i8", "i700"])
        // A row with its children moved to the very top: the subtree comes in whole.
        harness.mutate(writer, "feed", [.appendChildren([hubElement("c1"), hubElement("c2")], toParent: "i900")])
        harness.mutate(writer, "feed", [.moveItem("i900", .before("new"))])
        replica.apply(drain(harness, reader))
        #expect(rows(replica).prefix(2) == ["i900", "new"] && replica.snapshot.children(of: "i900") == ["c1", "c2"])
        replica.check(against: room)
        #expect(harness.hub.stats.windowedMembers == 1 && harness.hub.stats.windowRebuilds > 0)
        harness.checkInvariants("feed")
    }

    @Test func anAroundWindowReanchorsWhenItsAnchorGoes() {
        let harness = HubHarness()
        let writer = harness.connect(), reader = harness.connect()
        harness.mutate(writer, "feed", [.appendSections([hubElement("s")]), .appendItems(items(0..<100), toSection: "s")])
        _ = harness.drain(writer)
        let window = SectionWindow(section: "s", range: .around(anchor: "i50", before: 2, after: 2))
        harness.send(.window(requestID: 5, room: "feed", window: [window]), from: reader)
        var replica = Replica()
        replica.apply(drain(harness, reader))
        #expect(rows(replica) == ["i48", "i49", "i50", "i51", "i52"])
        // Above the window, out of reach: the window keeps its rows.
        harness.mutate(writer, "feed", [.insertItems([hubElement("x")], .before("i10"))])
        replica.apply(drain(harness, reader))
        #expect(rows(replica) == ["i48", "i49", "i50", "i51", "i52"])
        // The anchor deleted: the next row of the window becomes the anchor.
        harness.mutate(writer, "feed", [.deleteItems(["i50"])])
        let frames = drain(harness, reader)
        guard case .windowDiff(0, _, _, _, let moved?, _, _)? = frames.first else {
            Issue.record("expected a WINDOW_DIFF with the new window, got \(frames)")
            return
        }
        #expect(moved == [SectionWindow(section: "s", range: .around(anchor: "i51", before: 2, after: 2))])
        replica.apply(frames)
        #expect(rows(replica) == ["i48", "i49", "i51", "i52", "i53"])
        // Every row of the window deleted: it becomes the first before + 1 + after rows.
        harness.mutate(writer, "feed", [.deleteItems(["i48", "i49", "i51", "i52", "i53"])])
        replica.apply(drain(harness, reader))
        #expect(replica.window == [SectionWindow(section: "s", range: .first(5))])
        #expect(rows(replica) == ["i0", "i1", "i2", "i3", "i4"])
        replica.check(against: harness.hub.rooms[RoomName("feed")]!)
        harness.checkInvariants("feed")
    }

    @Test func movingTheWindowJoinAndLeave() {
        let harness = HubHarness()
        let writer = harness.connect(), reader = harness.connect()
        harness.mutate(writer, "feed", [.appendSections([hubElement("s"), hubElement("t")]), .appendItems(items(0..<50), toSection: "s")])
        _ = harness.drain(writer)
        harness.send(.window(requestID: 5, room: "feed", window: [SectionWindow(section: "s", range: .first(5))]), from: reader)
        var replica = Replica()
        replica.apply(drain(harness, reader))
        // Infinite scroll: five more rows. The answer carries the request id and the window.
        let grown = [SectionWindow(section: "s", range: .first(10))]
        harness.send(.window(requestID: 6, room: "feed", window: grown), from: reader)
        let answer = drain(harness, reader)
        guard case .windowDiff(6, _, _, _, grown?, [], let ops)? = answer.first, answer.count == 1 else {
            Issue.record("expected WINDOW_DIFF 6, got \(answer)")
            return
        }
        // Which ops is the daemon's choice; they add the five rows and nothing else.
        #expect(ops.count == 1)
        replica.apply(answer)
        #expect(rows(replica).count == 10)
        // The last rows instead.
        harness.send(.window(requestID: 7, room: "feed", window: [SectionWindow(section: "s", range: .last(3))]), from: reader)
        replica.apply(drain(harness, reader))
        #expect(rows(replica) == ["i47", "i48", "i49"])
        // A JOIN makes it a full member: SNAPSHOT, then DIFFs.
        harness.send(.join(requestID: 8, room: "feed", resume: nil), from: reader)
        guard case .snapshot(8, _, _, _, _, _, let full, _)? = drain(harness, reader).first else {
            Issue.record("expected SNAPSHOT")
            return
        }
        #expect(full.numberOfItems == 50)
        harness.mutate(writer, "feed", addItem("z"))
        #expect(drain(harness, reader).first?.diffVersion != nil)
        // And WINDOW makes it windowed again, answered with WINDOW_STATE.
        harness.send(.window(requestID: 9, room: "feed", window: []), from: reader)
        guard case .windowState(9, _, _, _, _, [], [51, 0], let empty)? = drain(harness, reader).first else {
            Issue.record("expected WINDOW_STATE with sections only")
            return
        }
        #expect(empty.numberOfSections == 2 && empty.numberOfItems == 0)
        harness.send(.leave(requestID: 10, room: "feed"), from: reader)
        #expect(drain(harness, reader).map(\.ackVersion).count == 1)
        harness.mutate(writer, "feed", addItem("y"))
        #expect(drain(harness, reader).isEmpty)
        #expect(harness.hub.rooms[RoomName("feed")]!.windows.isEmpty && harness.hub.stats.windowedMembers == 0)
        harness.checkInvariants("feed")
    }

    @Test func sectionOpsAlonePassThrough() {
        let harness = HubHarness()
        let writer = harness.connect(), reader = harness.connect()
        harness.mutate(writer, "feed", [.appendSections([hubElement("s"), hubElement("t")]), .appendItems(items(0..<20), toSection: "s")])
        _ = harness.drain(writer)
        harness.send(.window(requestID: 5, room: "feed", window: [SectionWindow(section: "s", range: .first(5))]), from: reader)
        var replica = Replica()
        replica.apply(drain(harness, reader))
        let batch: [SnapshotOperation] = [
            .insertSections([hubElement("top")], .before("s")), .moveSection("t", .before("s")), .updateSections([hubElement("s", "new")]),
        ]
        harness.mutate(writer, "feed", batch)
        let frames = drain(harness, reader)
        guard case .windowDiff(0, _, _, _, nil, [SectionCount(section: "top", items: 0)], let ops)? = frames.first else {
            Issue.record("expected a WINDOW_DIFF, got \(frames)")
            return
        }
        #expect(ops == batch, "the batch as it is")
        replica.apply(frames)
        // An around window whose section goes is rebuilt instead (it re-anchors to first N).
        harness.send(
            .window(requestID: 6, room: "feed", window: [SectionWindow(section: "s", range: .around(anchor: "i3", before: 1, after: 1))]), from: reader)
        replica.apply(drain(harness, reader))
        harness.mutate(writer, "feed", [.deleteSections(["s"])])
        replica.apply(drain(harness, reader))
        #expect(replica.window == [SectionWindow(section: "s", range: .first(3))])
        replica.check(against: harness.hub.rooms[RoomName("feed")]!)
        harness.checkInvariants("feed")
    }

    /// A window change whose WINDOW_DIFF would pass `max_frame_bytes` goes as WINDOW_STATE
    /// (§11.30): here the writer's DIFF is small (it deletes the window's ten rows, whose
    /// identifiers are long), but the window's is not: it deletes those rows and brings in the
    /// next ten with their payloads, while the state holds only the new rows.
    @Test func aWindowDiffOverTheFrameLimitGoesAsWindowState() {
        let limit = 4096
        let harness = HubHarness { $0.wire.maxFrameBytes = limit }
        let writer = harness.connect(), reader = harness.connect()
        let longIDs = (0..<10).map { hubElement(String(repeating: "x", count: 190) + "\($0)") }
        let bigRows = (10..<20).map { hubElement("i\($0)", String(repeating: "p", count: 300)) }
        harness.mutate(writer, "feed", [.appendSections([hubElement("s")]), .appendItems(longIDs, toSection: "s")])
        harness.mutate(writer, "feed", [.appendItems(bigRows, toSection: "s")])
        #expect(harness.drain(writer).compactMap(\.ackVersion) == [1, 2])
        harness.send(.window(requestID: 5, room: "feed", window: [SectionWindow(section: "s", range: .first(10))]), from: reader)
        var replica = Replica()
        replica.apply(drain(harness, reader))
        #expect(replica.snapshot.numberOfItems == 10)

        harness.mutate(writer, "feed", [.deleteItems(longIDs.map(\.id))])
        #expect(harness.drain(writer).compactMap(\.ackVersion) == [3])
        let frames = drain(harness, reader)
        guard frames.count == 1, case .windowState(0, "feed", _, 3, _, let window, [10], let snapshot) = frames[0] else {
            Issue.record("expected one WINDOW_STATE at version 3, got \(frames.map(\.type.name))")
            return
        }
        #expect(window == [SectionWindow(section: "s", range: .first(10))])
        #expect(rows(replica) != bigRows.map { String(decoding: $0.id.bytes, as: UTF8.self) })
        replica.apply(frames)
        #expect(rows(replica) == bigRows.map { String(decoding: $0.id.bytes, as: UTF8.self) })
        #expect(FrameEncoder().encode(frames[0]).count - 4 <= limit, "the state fits the limit")
        // What was not sent: the WINDOW_DIFF of the same change would not have fitted.
        var held = RoomSnapshot()
        #expect(throws: Never.self) {
            try held.apply([.appendSections([hubElement("s")]), .appendItems(longIDs, toSection: "s")], limits: .unlimited)
        }
        let ops = held.difference(to: snapshot, limits: .unlimited)
        let diff = Message.windowDiff(requestID: 0, room: "feed", epoch: 1, version: 3, window: nil, counts: [], ops: ops)
        #expect(FrameEncoder().encode(diff).count - 4 > limit)
        replica.check(against: harness.hub.rooms[RoomName("feed")]!)
        harness.checkInvariants("feed")
    }

    /// Cluster mode: a windowed member on one node follows writes made on another, the room
    /// changing only by the log's records; its WINDOW waits for the room to load like a JOIN.
    @Test func aWindowInClusterModeFollowsAnotherNodesWrites() {
        let cluster = ClusterHarness()
        let (writerNode, readerNode) = (cluster.nodes[0], cluster.nodes[1])
        let writer = writerNode.connect(), reader = readerNode.connect()
        writerNode.join(writer, "feed")
        cluster.settle()
        _ = writerNode.drain(writer)
        writerNode.mutate(writer, "feed", [.appendSections([hubElement("s")]), .appendItems(items(0..<50), toSection: "s")], requestID: 2)
        cluster.settle()
        _ = writerNode.drain(writer)
        readerNode.send(.window(requestID: 5, room: "feed", window: [SectionWindow(section: "s", range: .last(4))]), from: reader)
        cluster.settle()
        var replica = Replica()
        readerNode.hub.flushWindowCounts()
        replica.apply(readerNode.drain(reader))
        #expect(rows(replica) == ["i46", "i47", "i48", "i49"])
        writerNode.mutate(writer, "feed", [.appendItems([hubElement("z")], toSection: "s"), .deleteItems(["i47"])], requestID: 3)
        cluster.settle()
        readerNode.hub.flushWindowCounts()
        replica.apply(readerNode.drain(reader))
        #expect(rows(replica) == ["i46", "i48", "i49", "z"] && replica.counts["s"] == 50)
        replica.check(against: readerNode.hub.rooms[RoomName("feed")]!)
        cluster.checkInvariants("feed")
    }

    @Test func badWindowsAreRefusedAndChangeNothing() {
        let harness = HubHarness { $0.wire.maxWindowRows = 100 }
        let writer = harness.connect(), reader = harness.connect()
        harness.mutate(writer, "feed", [.appendSections([hubElement("s")]), .appendItems(items(0..<5), toSection: "s")])
        harness.mutate(writer, "feed", [.appendChildren([hubElement("c")], toParent: "i1")])
        _ = harness.drain(writer)
        let cases: [([SectionWindow], ErrorCode)] = [
            ([SectionWindow(section: "s", range: .first(101))], .windowTooLarge),
            ([SectionWindow(section: "s", range: .around(anchor: "i1", before: 50, after: 50))], .windowTooLarge),
            ([SectionWindow(section: "s", range: .around(anchor: "i1", before: .max, after: 1))], .windowTooLarge),
            ([SectionWindow(section: "s", range: .first(1)), SectionWindow(section: "s", range: .last(1))], .duplicateSection),
            ([SectionWindow(section: "s", range: .around(anchor: "nope", before: 1, after: 1))], .anchorItemNotFound),
            ([SectionWindow(section: "s", range: .around(anchor: "c", before: 1, after: 1))], .anchorItemNotFound),
            ([SectionWindow(section: "t", range: .around(anchor: "i1", before: 1, after: 1))], .anchorItemNotFound),
            // §11.29's order: the size first, then each section window in turn.
            ([SectionWindow(section: "s", range: .first(100)), SectionWindow(section: "s", range: .first(1))], .windowTooLarge),
            (
                [SectionWindow(section: "s", range: .around(anchor: "nope", before: 0, after: 0)), SectionWindow(section: "s", range: .first(1))],
                .anchorItemNotFound
            ),
            (
                [SectionWindow(section: "s", range: .first(1)), SectionWindow(section: "s", range: .around(anchor: "nope", before: 0, after: 0))],
                .duplicateSection
            ),
        ]
        for (window, code) in cases {
            harness.send(.window(requestID: 3, room: "feed", window: window), from: reader)
            let answer = drain(harness, reader)
            #expect(answer.first?.errorCode == code, "\(window)")
            #expect(reader.memberships["feed"] == nil)
        }
        // A WINDOW the engine refuses (the server's room limit) leaves nothing waiting: many of
        // them do not use up the connection's rooms.
        let limited = HubHarness { $0.maxRooms = 1 }
        let owner = limited.connect(), asker = limited.connect()
        limited.mutate(owner, "only", [.appendSections([hubElement("s")])])
        _ = limited.drain(owner)
        for index in 0..<(limited.hub.configuration.wire.maxRoomsPerConnection + 2) {
            limited.send(.window(requestID: UInt64(100 + index), room: "other\(index)", window: []), from: asker)
            #expect(limited.drain(asker).first?.errorCode == .tooManyRooms)
        }
        limited.send(.window(requestID: 99, room: "only", window: []), from: asker)
        guard case .windowState(99, "only", _, _, _, _, _, _)? = limited.drain(asker).first else {
            Issue.record("a WINDOW after refused ones was not served")
            return
        }
        // A window on a section that does not exist yet fills when it appears.
        harness.send(.window(requestID: 4, room: "feed", window: [SectionWindow(section: "later", range: .first(2))]), from: reader)
        var replica = Replica()
        replica.apply(drain(harness, reader))
        harness.mutate(writer, "feed", [.appendSections([hubElement("later")]), .appendItems(items(10..<13), toSection: "later")])
        replica.apply(drain(harness, reader))
        #expect(rows(replica, "later") == ["i10", "i11"])
        // Version 3 has no WINDOW: the decoder calls it an unknown type.
        let old = harness.connect(versions: [3])
        harness.send(.window(requestID: 1, room: "feed", window: []), from: old)
        #expect(harness.drain(old).first?.errorCode == .unknownMessageType)
        harness.checkInvariants("feed")
    }

    /// The law: whatever the writes (flat and outline ops, sections included), every windowed
    /// replica applying what it is sent holds exactly the window the rule defines, with the
    /// room's counts; and the daemon's own record of each member (the invariant) agrees.
    @Test(arguments: [(1 as UInt64, Duration.zero), (2, .zero), (3, .milliseconds(100)), (4, .milliseconds(100))])
    func seededWritesKeepEveryWindowExact(seed: UInt64, countsInterval: Duration) {
        var random = SplitMix64(seed: seed)
        let harness = HubHarness { $0.windowCountsInterval = countsInterval }
        let writer = harness.connect()
        harness.mutate(
            writer, "r",
            [.appendSections([hubElement("a"), hubElement("b")]), .appendItems(items(0..<30), toSection: "a"), .appendItems(items(30..<40), toSection: "b")])
        _ = harness.drain(writer)
        let windows: [[SectionWindow]] = [
            [SectionWindow(section: "a", range: .first(6))],
            [SectionWindow(section: "a", range: .last(5)), SectionWindow(section: "b", range: .first(3))],
            [SectionWindow(section: "a", range: .around(anchor: "i12", before: 3, after: 4))],
            [SectionWindow(section: "b", range: .around(anchor: "i35", before: 1, after: 1))],
        ]
        var readers: [(Session, Replica)] = []
        for (index, window) in windows.enumerated() {
            let reader = harness.connect()
            harness.send(.window(requestID: UInt64(index + 1), room: "r", window: window), from: reader)
            var replica = Replica()
            replica.apply(drain(harness, reader))
            readers.append((reader, replica))
        }
        let room = harness.hub.rooms[RoomName("r")]!
        var next = 100
        var applied = 0
        for step in 0..<400 {
            let ops = randomOps(room.snapshot, &random, &next)
            let before = room.version
            harness.mutate(writer, "r", ops, requestID: UInt64(step + 10))
            _ = harness.drain(writer)
            if room.version > before { applied += 1 }
            for index in readers.indices {
                readers[index].1.apply(drain(harness, readers[index].0))
                readers[index].1.check(against: room)
            }
            harness.checkInvariants("r")
        }
        #expect(applied > 150, "most random batches apply")
    }

    /// One to three ops, mostly valid: inserts and moves next to random items (window edges
    /// among them), deletes, outline ops, now and then a section op.
    func randomOps(_ snapshot: RoomSnapshot, _ random: inout SplitMix64, _ next: inout Int) -> [SnapshotOperation] {
        let items = snapshot.itemIdentifiers
        let sections = snapshot.sectionIdentifiers
        func anyItem() -> SnapshotIdentifier { items.randomElement(using: &random) ?? "none" }
        func fresh() -> SnapshotElement {
            next += 1
            return hubElement("n\(next)", "v\(next)")
        }
        func placement() -> SnapshotOperation.Placement { Bool.random(using: &random) ? .before(anyItem()) : .after(anyItem()) }
        return (0..<Int.random(in: 1...3, using: &random)).map { _ in
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<20: return .insertItems([fresh()], placement())
            case 20..<30: return .appendItems([fresh(), fresh()], toSection: sections.randomElement(using: &random))
            case 30..<50: return .deleteItems([anyItem()])
            case 50..<65: return .moveItem(anyItem(), placement())
            case 65..<70: return .moveItemToSection(anyItem(), section: sections.randomElement(using: &random) ?? "a")
            case 70..<78: return .updateItems([SnapshotElement(anyItem(), payload: SnapshotPayload("u\(next)"))], .reconfigure)
            case 78..<86: return .appendChildren([fresh()], toParent: anyItem())
            case 86..<92: return .moveItemToParent(anyItem(), parent: anyItem())
            case 92..<94: return .appendSections([hubElement("s\(next)")])
            case 94..<95:
                // Now and then a whole section goes, windows' sections included.
                return Bool.random(using: &random)
                    ? .deleteSections([sections.randomElement(using: &random) ?? "a"])
                    : .insertSections([hubElement("s\(next)")], .before(sections.randomElement(using: &random) ?? "a"))
            case 95..<97: return .moveSection(sections.randomElement(using: &random) ?? "a", .after(sections.randomElement(using: &random) ?? "b"))
            case 97..<99: return .updateSections([hubElement(String(decoding: (sections.randomElement(using: &random) ?? "a").bytes, as: UTF8.self), "sp")])
            default: return .appendItems([fresh()], toSection: nil)
            }
        }
    }
}
