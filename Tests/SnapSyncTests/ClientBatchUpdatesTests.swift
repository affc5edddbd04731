@testable import SnapSync
import SnapSyncClientTestSupport
import Testing
import SnapSyncTestThreads

/// Index-path resolution, without a daemon: the updates a change reports, replayed on the old
/// snapshot as UIKit replays a batch update, must give the new snapshot.
@Suite("Client: batch updates (index paths)", .unitTests)
struct ClientBatchUpdatesTests {
    func layout(_ sections: [(String, [String])]) -> RoomSnapshot {
        try! RoomSnapshot(sections.map { (SnapshotElement(SnapshotIdentifier($0.0)), $0.1.map { SnapshotElement(SnapshotIdentifier($0)) }) })
    }

    @Test("random batches on random snapshots replay to the new snapshot (seeded)")
    func randomBatchesReplay() {
        var moves = 0, sectionMoves = 0, crossSection = 0, reloads = 0, reconfigures = 0, movedReconfigures = 0
        for seed in UInt64(1)...600 {
            var random = RandomBatches(seed: seed)
            let old = random.snapshot()
            let (operations, new) = random.batch(on: old, count: Int(seed % 6) + 1)
            let updates = BatchUpdates(from: old, to: new, operations: operations)
            expectReplays(
                updates, from: old, to: new, operations: operations,
                "seed \(seed)\nold:\n\(old.visualDescription())ops: \(operations)\nnew:\n\(new.visualDescription())")
            moves += updates.movedItems.count
            crossSection += updates.movedItems.filter { $0.from.section != $0.to.section }.count
            sectionMoves += updates.movedSections.count
            reloads += updates.reloadedItems.count
            reconfigures += updates.reconfiguredItems.count
            movedReconfigures += Set(updates.movedItems.map(\.from)).intersection(updates.reconfiguredItems).count
        }
        // The generator must exercise every kind of update, or the replay proves little.
        #expect(
            moves > 50 && crossSection > 10 && sectionMoves > 20 && reloads > 20 && reconfigures > 20 && movedReconfigures > 5,
            "moves \(moves), across sections \(crossSection), section moves \(sectionMoves), reloads \(reloads), reconfigures \(reconfigures), moved and reconfigured \(movedReconfigures)"
        )
    }

    @Test("a resync (no operations) between unrelated random snapshots replays to the new one (seeded)")
    func unrelatedSnapshotsReplay() {
        for seed in UInt64(1)...400 {
            var random = RandomBatches(seed: seed &* 7919, sectionPool: 6, itemPool: 20)
            let old = random.snapshot(), new = random.snapshot()
            let updates = BatchUpdates(from: old, to: new)
            expectReplays(
                updates, from: old, to: new, operations: [],
                "seed \(seed)\nold:\n\(old.visualDescription())new:\n\(new.visualDescription())")
        }
    }

    @Test("a long catch-up (many batches, one change) replays to the new snapshot (seeded)")
    func catchUpReplays() {
        for seed in UInt64(1)...100 {
            var random = RandomBatches(seed: seed &+ 1_000_000)
            let old = random.snapshot()
            var new = old
            var operations: [SnapshotOperation] = []
            for _ in 0..<10 {
                let batch = random.batch(on: new, count: 3)
                operations += batch.operations
                new = batch.result
            }
            expectReplays(
                BatchUpdates(from: old, to: new, operations: operations), from: old, to: new,
                operations: operations, "seed \(seed)")
        }
    }

    @Test("the initial load inserts every section and names no item")
    func initialLoad() {
        let new = layout([("a", ["1", "2"]), ("b", []), ("c", ["3"])])
        let updates = BatchUpdates(from: RoomSnapshot(), to: new)
        #expect(updates.insertedSections == [0, 1, 2])
        #expect(updates.insertedItems.isEmpty && updates.deletedItems.isEmpty && updates.movedItems.isEmpty)
    }

    @Test("moving the last item to the front is one move, not n")
    func minimalMoves() throws {
        let old = layout([("a", ["1", "2", "3", "4", "5"])])
        var new = old
        try new.moveItem("5", beforeItem: "1")
        let updates = BatchUpdates(from: old, to: new, operations: [.moveItem("5", .before("1"))])
        #expect(updates.movedItems == [BatchUpdates.Move(from: ItemIndexPath(item: 4, section: 0), to: ItemIndexPath(item: 0, section: 0))])
        #expect(updates.deletedItems.isEmpty && updates.insertedItems.isEmpty)
    }

    @Test("UIKit conventions: deletes at old paths, inserts at new paths, moves old → new, reloads at old paths")
    func conventions() throws {
        let old = layout([("a", ["1", "2", "3"]), ("b", ["4"]), ("c", ["5", "6"])])
        let operations: [SnapshotOperation] = [
            .deleteItems(["1", "5"]),
            .insertItems([SnapshotElement("9")], .after("4")),
            .moveItemToSection("2", section: "b"),
            .updateItems([SnapshotElement("6", payload: "new")], .reload),
        ]
        var new = old
        try new.apply(operations)
        let updates = BatchUpdates(from: old, to: new, operations: operations)
        #expect(updates.deletedItems == [ItemIndexPath(item: 0, section: 0), ItemIndexPath(item: 0, section: 2)])
        #expect(updates.insertedItems == [ItemIndexPath(item: 1, section: 1)])
        #expect(updates.movedItems == [BatchUpdates.Move(from: ItemIndexPath(item: 1, section: 0), to: ItemIndexPath(item: 2, section: 1))])
        #expect(updates.reloadedItems == [ItemIndexPath(item: 1, section: 2)])
        #expect(updates.reloadedItemIdentifiers == ["6"])
        expectReplays(updates, from: old, to: new, operations: operations, "conventions")
    }

    @Test("a reconfigure is reported apart from a reload, at old and at new paths")
    func reconfigure() throws {
        let old = layout([("a", ["1", "2", "3"])])
        let operations: [SnapshotOperation] = [.deleteItems(["1"]), .updateItems([SnapshotElement("3", payload: "x")], .reconfigure)]
        var new = old
        try new.apply(operations)
        let updates = BatchUpdates(from: old, to: new, operations: operations)
        #expect(updates.reloadedItems.isEmpty)
        #expect(updates.reconfiguredItems == [ItemIndexPath(item: 2, section: 0)])
        #expect(updates.reconfiguredItemsAfterUpdate == [ItemIndexPath(item: 1, section: 0)])
        #expect(updates.reconfiguredItemIdentifiers == ["3"])
    }

    @Test("an item that moves and changes is a delete plus an insert (UIKit refuses move + reload)")
    func moveAndReload() throws {
        let old = layout([("a", ["1", "2", "3"])])
        let operations: [SnapshotOperation] = [.moveItem("3", .before("1")), .updateItems([SnapshotElement("3", payload: "x")], .reload)]
        var new = old
        try new.apply(operations)
        let updates = BatchUpdates(from: old, to: new, operations: operations)
        #expect(updates.movedItems.isEmpty)
        #expect(updates.deletedItems == [ItemIndexPath(item: 2, section: 0)])
        #expect(updates.insertedItems == [ItemIndexPath(item: 0, section: 0)])
        #expect(updates.reloadedItemIdentifiers == ["3"])
    }

    @Test("items of deleted, inserted and reloaded sections are not named one by one")
    func sectionsCarryTheirItems() throws {
        let old = layout([("a", ["1", "2"]), ("b", ["3"]), ("c", ["4"])])
        let operations: [SnapshotOperation] = [
            .deleteSections(["a"]),
            .appendSections([SnapshotElement("d")]),
            .appendItems([SnapshotElement("5")], toSection: "d"),
            .appendItems([SnapshotElement("6")], toSection: "c"),
            .updateSections([SnapshotElement("c", payload: "x")]),
            .moveItemToSection("3", section: "d"),
        ]
        var new = old
        try new.apply(operations)
        let updates = BatchUpdates(from: old, to: new, operations: operations)
        #expect(updates.deletedSections == [0])
        #expect(updates.insertedSections == [2])
        #expect(updates.reloadedSections == [2])
        // "3" goes into the inserted section: deleted from "b", brought in by "d".
        #expect(updates.deletedItems == [ItemIndexPath(item: 0, section: 1)])
        #expect(updates.insertedItems.isEmpty && updates.movedItems.isEmpty)
        expectReplays(updates, from: old, to: new, operations: operations, "sections carry their items")
    }

    @Test("moving a section is one section move; its items travel with it")
    func sectionMove() throws {
        let old = layout([("a", ["1"]), ("b", ["2"]), ("c", ["3"])])
        var new = old
        try new.moveSection("c", beforeSection: "a")
        let updates = BatchUpdates(from: old, to: new, operations: [.moveSection("c", .before("a"))])
        #expect(updates.movedSections == [BatchUpdates.Move(from: 2, to: 0)])
        #expect(updates.movedItems.isEmpty && updates.deletedItems.isEmpty && updates.insertedItems.isEmpty)
    }

    @Test("no change, no updates")
    func empty() {
        let old = layout([("a", ["1", "2"])])
        #expect(BatchUpdates(from: old, to: old).isEmpty)
    }

    @Test("longest increasing subsequence marks a longest run")
    func longestRun() {
        #expect(longestIncreasingSubsequence([]) == [])
        #expect(longestIncreasingSubsequence([0, 1, 2]) == [true, true, true])
        #expect(longestIncreasingSubsequence([4, 0, 1, 2, 3]) == [false, true, true, true, true])
        let marks = longestIncreasingSubsequence([3, 1, 4, 0, 5, 2, 6])
        #expect(marks.filter { $0 }.count == 4)
        let kept = zip([3, 1, 4, 0, 5, 2, 6], marks).filter(\.1).map(\.0)
        #expect(kept == kept.sorted())
    }
}
