#if canImport(Observation)
    import Foundation
    import NIOConcurrencyHelpers
    import Observation
    @testable import SnapSync
    import SnapSyncClientTestSupport
    import Testing

    /// `ObservableReplica`: follows its replica on the main actor and tells Observation.
    @Suite("Client: ObservableReplica")
    struct ClientObservationTests {
        @Test("an ObservableReplica follows the replica, notifies observers, and serves lookups")
        @MainActor
        func follows() async throws {
            let replica = RoomReplica(room: "r")
            let other = replica.changes  // another consumer: must not take changes away
            let observed = ObservableReplica(replica)
            let notified = NIOLockedValueBox(0)
            withObservationTracking {
                _ = observed.snapshot
            } onChange: {
                notified.withLockedValue { $0 += 1 }
            }
            var snapshot = RoomSnapshot()
            try snapshot.appendSections(["s"])
            try snapshot.appendItems(["a", "b", "c"], toSection: "s")
            let operations: [SnapshotOperation] = [.appendSections(["s"]), .appendItems(["a", "b", "c"], toSection: "s")]
            replica.publish(
                RoomChange(
                    kind: .diff, room: "r", previousPosition: RoomPosition(epoch: 1, version: 0), position: RoomPosition(epoch: 1, version: 1),
                    operations: operations, snapshot: snapshot, updates: BatchUpdates(from: RoomSnapshot(), to: snapshot, operations: operations)))
            // The replica's changes reach the main actor through a task: wait for them (a hang
            // bound, not a speed limit).
            let deadline = ContinuousClock.now + hangBound
            while observed.position.version != 1, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(observed.position.version == 1)
            #expect(observed.snapshot == snapshot)
            #expect(notified.withLockedValue { $0 } == 1, "observers of snapshot were told")
            #expect(observed.lastChange?.kind == .diff)
            #expect(observed.itemIdentifier(for: ItemIndexPath(item: 2, section: 0)) == "c")
            #expect(observed.indexPath(for: "b") == ItemIndexPath(item: 1, section: 0))
            #expect(observed.sectionIdentifier(for: 0) == "s" && observed.index(ofSection: "s") == 0)
            replica.finish()
            while !observed.isFinished, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(observed.isFinished)
            var versions: [UInt64] = []
            for await change in other { versions.append(change.version) }
            #expect(versions == [0, 1])
        }

        @Test("an ObservableReplica of an outline counts the visible rows from the start, as the replica does")
        @MainActor
        func outlineRows() async throws {
            let replica = RoomReplica(room: "r")
            var snapshot = RoomSnapshot()
            try snapshot.appendSections(["s"])
            try snapshot.apply([.appendItems(["a", "b"], toSection: "s"), .appendChildren(["a1", "a2"], toParent: "a")])
            let operations: [SnapshotOperation] = [
                .appendSections(["s"]), .appendItems(["a", "b"], toSection: "s"), .appendChildren(["a1", "a2"], toParent: "a"),
            ]
            replica.publish(
                RoomChange(
                    kind: .diff, room: "r", previousPosition: RoomPosition(epoch: 1, version: 0), position: RoomPosition(epoch: 1, version: 1),
                    operations: operations, snapshot: snapshot, updates: BatchUpdates(from: RoomSnapshot(), to: snapshot, operations: operations)))
            let observed = ObservableReplica(replica)
            let deadline = ContinuousClock.now + hangBound
            while observed.lastChange == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            // Collapsed at first: the rows are a and b.
            #expect(observed.numberOfItems(inSection: 0) == 2 && replica.numberOfItems(inSection: 0) == 2)
            #expect(observed.indexPath(for: "a1") == nil && observed.indexPath(for: "b") == ItemIndexPath(item: 1, section: 0))
            #expect(observed.itemIdentifier(for: IndexPath(indexes: [0, 1])) == "b")
            #expect(observed.visibleSnapshot.itemIdentifiers == ["a", "b"] && observed.snapshot.numberOfItems == 4)
            replica.expand("a")
            while observed.lastChange?.kind != .expansion, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(observed.numberOfItems(inSection: 0) == 4 && observed.indexPath(for: "b") == ItemIndexPath(item: 3, section: 0))
            replica.finish()
        }

        @Test("an ObservableReplica expands and collapses through its replica, and its outline reads follow the change it applied")
        @MainActor
        func outlineCalls() async throws {
            let replica = RoomReplica(room: "r")
            var snapshot = RoomSnapshot()
            try snapshot.appendSections(["s"])
            try snapshot.apply([.appendItems(["a", "b"], toSection: "s"), .appendChildren(["a1"], toParent: "a"), .appendChildren(["x"], toParent: "a1")])
            let operations: [SnapshotOperation] = [.appendSections(["s"])]
            replica.publish(
                RoomChange(
                    kind: .resync(.historyUnavailable), room: "r", previousPosition: RoomPosition(epoch: 1, version: 0),
                    position: RoomPosition(epoch: 1, version: 3), operations: operations, snapshot: snapshot,
                    updates: BatchUpdates(from: RoomSnapshot(), to: snapshot, operations: operations)))
            let observed = ObservableReplica(replica)
            let deadline = ContinuousClock.now + hangBound
            while observed.lastChange == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(!observed.isExpanded("a") && !observed.isVisible("a1") && observed.isVisible("b"))
            #expect(observed.children(of: "a") == ["a1"] && observed.level(of: "x") == 2 && observed.level(of: "nope") == nil)
            #expect(observed.sectionSnapshot(for: "s")?.children(of: "a1") == ["x"])

            observed.expand("a")
            while observed.lastChange?.kind != .expansion, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(replica.isExpanded("a"), "the expansion went through the replica")
            #expect(observed.isExpanded("a") && observed.isVisible("a1") && !observed.isVisible("x"))
            #expect(observed.expansion == replica.expansion)
            #expect(observed.numberOfItems(inSection: 0) == 3)

            observed.collapse(["a"])
            while observed.isExpanded("a"), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(!observed.isExpanded("a") && !observed.isVisible("a1") && observed.numberOfItems(inSection: 0) == 2)
            replica.finish()
        }

        @Test("an ObservableTypedReplica shows the visible rows decoded, with levels, disclosure and expansion, version by version")
        @MainActor
        func typedRows() async throws {
            struct Card: Codable, Equatable, Sendable { var title: String }
            let coding = RoomCoding<String, String, Card>()
            let replica = RoomReplica(room: "r")
            func element(_ id: String) throws -> SnapshotElement { try coding.element(id, Card(title: id.uppercased())) }
            var snapshot = RoomSnapshot()
            try snapshot.appendSections(["todo", "done"])
            try snapshot.apply([
                .appendItems([try element("a"), try element("b")], toSection: "todo"), .appendChildren([try element("a1")], toParent: "a"),
                .appendItems([try element("c")], toSection: "done"),
            ])
            let operations: [SnapshotOperation] = [.appendSections(["todo"])]
            replica.publish(
                RoomChange(
                    kind: .resync(.historyUnavailable), room: "r", previousPosition: RoomPosition(epoch: 1, version: 0),
                    position: RoomPosition(epoch: 1, version: 4), operations: operations, snapshot: snapshot,
                    updates: BatchUpdates(from: RoomSnapshot(), to: snapshot, operations: operations)))
            let board = ObservableTypedReplica(TypedReplica(replica, coding: coding))
            let notified = NIOLockedValueBox(0)
            withObservationTracking {
                _ = board.sections
            } onChange: {
                notified.withLockedValue { $0 += 1 }
            }
            let deadline = ContinuousClock.now + hangBound
            while board.lastChange == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(notified.withLockedValue { $0 } == 1, "observers of sections were told")
            #expect(board.position.version == 4 && board.decodingError == nil)
            #expect(board.sections.map(\.id) == ["todo", "done"])
            #expect(board.sections[0].rows.map(\.id) == ["a", "b"], "a1 is under a collapsed item")
            #expect(board.sections[0].rows.map(\.item) == [Card(title: "A"), Card(title: "B")])
            #expect(board.sections[0].rows.map(\.hasChildren) == [true, false])
            #expect(board.sections[0].rows.map(\.isExpanded) == [false, false])
            #expect(board.sections[1].rows.map(\.id) == ["c"])

            try board.toggle(board.sections[0].rows[0])
            while board.lastChange?.kind != .expansion, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(board.sections[0].rows.map(\.id) == ["a", "a1", "b"])
            #expect(board.sections[0].rows.map(\.level) == [0, 1, 0])
            #expect(board.sections[0].rows[0].isExpanded && !board.sections[0].rows[1].hasChildren)

            // A version whose bytes do not decode keeps the last rows and says why.
            var broken = snapshot
            try broken.apply([.appendItems([SnapshotElement("bad", payload: "not json")], toSection: "done")])
            replica.publish(
                RoomChange(
                    kind: .diff, room: "r", previousPosition: RoomPosition(epoch: 1, version: 4), position: RoomPosition(epoch: 1, version: 5),
                    operations: [], snapshot: broken, updates: BatchUpdates(from: snapshot, to: broken, operations: [])))
            while board.position.version != 5, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(board.decodingError?.identifier == "bad")
            #expect(board.sections[1].rows.map(\.id) == ["c"])
            replica.finish()
            while !board.isFinished, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(board.isFinished)
        }
    }
#endif

#if canImport(Observation)
    /// `ObservableWindowedReplica`: follows its windowed replica on the main actor.
    @Suite("Client: ObservableWindowedReplica")
    struct ClientWindowObservationTests {
        @Test("an ObservableWindowedReplica follows the replica's window, counts and rows, notifies observers, and serves lookups")
        @MainActor
        func follows() async throws {
            let replica = WindowedReplica(room: "r")
            let observed = ObservableWindowedReplica(replica)
            let notified = NIOLockedValueBox(0)
            withObservationTracking {
                _ = observed.counts
            } onChange: {
                notified.withLockedValue { $0 += 1 }
            }
            var snapshot = RoomSnapshot()
            try snapshot.appendSections(["s"])
            try snapshot.appendItems(["a", "b"], toSection: "s")
            let window = [SectionWindow(section: "s", range: .first(2))]
            replica.publish(
                WindowChange(
                    kind: .initial,
                    rows: RoomChange(
                        kind: .initial, room: "r", previousPosition: nil, position: RoomPosition(epoch: 1, version: 4), operations: [],
                        snapshot: snapshot, updates: BatchUpdates(from: RoomSnapshot(), to: snapshot)),
                    previousWindow: nil, window: window, counts: ["s": 1000], changedCounts: [SectionCount(section: "s", items: 1000)]))
            let deadline = ContinuousClock.now + hangBound
            while observed.position.version != 4, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(observed.snapshot == snapshot && observed.window == window)
            #expect(observed.count(ofSection: "s") == 1000)
            #expect(notified.withLockedValue { $0 } == 1, "observers of counts were told")
            #expect(observed.lastChange?.kind == .initial)
            #expect(observed.itemIdentifier(for: ItemIndexPath(item: 1, section: 0)) == "b")
            #expect(observed.numberOfItems(inSection: 0) == 2)
            replica.finish()
            while !observed.isFinished, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(observed.isFinished)
        }
    }
#endif
