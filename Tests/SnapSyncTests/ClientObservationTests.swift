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
            var snapshot = Snapshot()
            try snapshot.appendSections(["s"])
            try snapshot.appendItems(["a", "b", "c"], toSection: "s")
            let operations: [SnapshotOperation] = [.appendSections(["s"]), .appendItems(["a", "b", "c"], toSection: "s")]
            replica.publish(
                RoomChange(
                    kind: .diff, room: "r", previousPosition: RoomPosition(epoch: 1, version: 0), position: RoomPosition(epoch: 1, version: 1),
                    operations: operations, snapshot: snapshot, updates: BatchUpdates(from: Snapshot(), to: snapshot, operations: operations)))
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
            var snapshot = Snapshot()
            try snapshot.appendSections(["s"])
            try snapshot.apply([.appendItems(["a", "b"], toSection: "s"), .appendChildren(["a1", "a2"], toParent: "a")])
            let operations: [SnapshotOperation] = [
                .appendSections(["s"]), .appendItems(["a", "b"], toSection: "s"), .appendChildren(["a1", "a2"], toParent: "a"),
            ]
            replica.publish(
                RoomChange(
                    kind: .diff, room: "r", previousPosition: RoomPosition(epoch: 1, version: 0), position: RoomPosition(epoch: 1, version: 1),
                    operations: operations, snapshot: snapshot, updates: BatchUpdates(from: Snapshot(), to: snapshot, operations: operations)))
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
    }
#endif
