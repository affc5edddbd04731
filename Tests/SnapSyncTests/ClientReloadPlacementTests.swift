@testable import SnapSync
import SnapSyncClientTestSupport
import Testing
import SnapSyncTestThreads

/// UIKit performs a reload inside `performBatchUpdates` as a delete plus an insert at the old
/// position shifted by deletes and inserts, ignoring moves. The four minimal batches that
/// crashed a collection view when a reload and a move met in one batch: the validator refuses
/// the form that crashed, and `BatchUpdates` no longer produces it.
@Suite("Client: reloads and moves in one batch (UIKit placement)", .unitTests)
struct ClientReloadPlacementTests {
    func layout(_ sections: [(String, [String])]) -> RoomSnapshot {
        try! RoomSnapshot(sections.map { (SnapshotElement(SnapshotIdentifier($0.0)), $0.1.map { SnapshotElement(SnapshotIdentifier($0)) }) })
    }
    func path(_ section: Int, _ item: Int) -> ItemIndexPath { ItemIndexPath(item: item, section: section) }

    /// `unsafe` must be refused by the validator; the resolved updates must be accepted.
    func check(
        old: RoomSnapshot, operations: [SnapshotOperation], resync: Bool = false, unsafe: BatchUpdates,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        var new = old
        try new.apply(operations)
        #expect(throws: (any Error).self, "the unsafe form is refused", sourceLocation: sourceLocation) {
            try replayAsUIKit(unsafe, on: old, dataSource: new)
        }
        let updates = BatchUpdates(from: old, to: new, operations: resync ? [] : operations)
        expectReplays(updates, from: old, to: new, operations: resync ? [] : operations, "resolved", sourceLocation: sourceLocation)
    }

    @Test("1: a reload and a move to the same index path")
    func reloadMeetsMoveDestination() throws {
        var unsafe = BatchUpdates()
        unsafe.movedItems = [BatchUpdates.Move(from: path(0, 1), to: path(0, 0))]
        unsafe.reloadedItems = [path(0, 0)]
        try check(
            old: layout([("s", ["a", "b"])]),
            operations: [.updateItems([SnapshotElement("a", payload: "a'")], .reload), .moveItem("b", .before("a"))], unsafe: unsafe)
    }

    @Test("2: a section reload and a section move to the same index")
    func sectionReloadMeetsSectionMove() throws {
        var unsafe = BatchUpdates()
        unsafe.movedSections = [BatchUpdates.Move(from: 0, to: 1)]
        unsafe.reloadedSections = [1]
        try check(
            old: layout([("A", ["1"]), ("B", ["2"])]),
            operations: [.updateSections([SnapshotElement("B", payload: "B'")]), .moveSection("A", .after("B"))], unsafe: unsafe)
    }

    @Test("3: a reload lands past the end of a section an item moved out of")
    func reloadPastTheEnd() throws {
        var unsafe = BatchUpdates()
        unsafe.movedItems = [BatchUpdates.Move(from: path(0, 0), to: path(1, 0))]
        unsafe.reloadedItems = [path(0, 1)]
        try check(
            old: layout([("S2", ["a", "b"]), ("S10", ["c"])]),
            operations: [.moveItem("a", .before("c")), .updateItems([SnapshotElement("b", payload: "b'")], .reload)], unsafe: unsafe)
    }

    @Test("4: a replace (no operations) moves one item past a changed one")
    func resyncMoveAndChange() throws {
        var unsafe = BatchUpdates()
        unsafe.movedItems = [BatchUpdates.Move(from: path(1, 1), to: path(1, 0))]
        unsafe.reloadedItems = [path(1, 0)]
        try check(
            old: layout([("s0", ["p"]), ("s1", ["x", "y"])]),
            operations: [.updateItems([SnapshotElement("x", payload: "x'")], .reload), .moveItem("y", .before("x"))],
            resync: true, unsafe: unsafe)
    }

    @Test("the validator places a reload by deletes and inserts: one that stays put is accepted")
    func reloadShiftedByDeletesAndInserts() throws {
        let old = layout([("s", ["a", "b", "c"])])
        var new = old
        try new.apply([.deleteItems(["a"]), .insertItems([SnapshotElement("n")], .after("c")), .updateItems([SnapshotElement("c", payload: "c'")], .reload)])
        var updates = BatchUpdates()
        updates.deletedItems = [path(0, 0)]
        updates.insertedItems = [path(0, 2)]
        updates.reloadedItems = [path(0, 2)]
        #expect(try replayAsUIKit(updates, on: old, dataSource: new).map(\.1) == [["b", "c", "n"]])
    }

    @Test("a reload that a move shifts lands on another item: refused, though no index path collides")
    func reloadLandsOnAnotherItem() throws {
        let old = layout([("s", ["a", "b", "c"])])
        var new = old
        try new.apply([.moveItem("c", .before("a")), .updateItems([SnapshotElement("b", payload: "b'")], .reload)])
        var updates = BatchUpdates()
        updates.movedItems = [BatchUpdates.Move(from: path(0, 2), to: path(0, 0))]
        updates.reloadedItems = [path(0, 1)]
        #expect(throws: (any Error).self) { try replayAsUIKit(updates, on: old, dataSource: new) }
    }

    @Test("a moved item that is only reconfigured keeps its cell: a move plus a reconfigure after the batch")
    func movedAndReconfigured() throws {
        let old = layout([("s", ["a", "b"]), ("t", ["c"])])
        let operations: [SnapshotOperation] = [
            .moveItem("b", .before("a")), .updateItems([SnapshotElement("b", payload: "b'")], .reconfigure),
            .moveItem("c", .after("a")), .updateItems([SnapshotElement("c", payload: "c'")], .reconfigure),
        ]
        var new = old
        try new.apply(operations)
        let updates = BatchUpdates(from: old, to: new, operations: operations)
        #expect(updates.movedItems == [BatchUpdates.Move(from: path(0, 1), to: path(0, 0)), BatchUpdates.Move(from: path(1, 0), to: path(0, 2))])
        #expect(updates.deletedItems.isEmpty && updates.insertedItems.isEmpty && updates.reloadedItems.isEmpty)
        #expect(updates.reconfiguredItems == [path(0, 1), path(1, 0)])
        #expect(updates.reconfiguredItemsAfterUpdate == [path(0, 0), path(0, 2)])
        expectReplays(updates, from: old, to: new, operations: operations, "moved and reconfigured")
    }

    @Test("no section moves onto its own index (openradar 48941906)")
    func noOwnIndexSectionMove() throws {
        // Reversing three sections: a longest run keeps one, and the middle one's move is 1 → 1.
        let old = layout([("A", ["1"]), ("B", ["2", "3"]), ("C", [])])
        let operations: [SnapshotOperation] = [
            .moveSection("C", .before("A")), .moveSection("A", .after("B")), .moveItemToSection("3", section: "A"),
        ]
        var new = old
        try new.apply(operations)
        var unsafe = BatchUpdates()
        unsafe.movedSections = [BatchUpdates.Move(from: 1, to: 1), BatchUpdates.Move(from: 0, to: 2)]
        unsafe.movedItems = [BatchUpdates.Move(from: path(1, 1), to: path(2, 1))]
        #expect(throws: (any Error).self) { try replayAsUIKit(unsafe, on: old, dataSource: new) }
        let updates = BatchUpdates(from: old, to: new, operations: operations)
        #expect(!updates.movedSections.isEmpty && updates.movedSections.allSatisfy { $0.from != $0.to }, "\(updates)")
        expectReplays(updates, from: old, to: new, operations: operations, "own-index section move")
    }
}
