// A failing batch leaves the snapshot exactly as it was, whatever ran before the failure.

import Testing
import SnapSyncTestThreads
import SnapSyncModel

@Suite(.unitTests) struct AtomicityTests {
    let base = try! RoomSnapshot([
        (SnapshotElement("s1", "one"), [SnapshotElement("a", "A"), SnapshotElement("b"), SnapshotElement("c", "C")]),
        (SnapshotElement("s2"), [SnapshotElement("d", "D")]),
        (SnapshotElement("s3", "three"), []),
    ])
    /// Fails last in every batch below.
    let failing: SnapshotOperation = .moveItem("nope", .after("a"))

    func expectRollBack(_ prefix: [SnapshotOperation], sourceLocation: SourceLocation = #_sourceLocation) {
        var s = base
        let digest = base.digest
        #expect(throws: BatchError(operationIndex: prefix.count, violation: .itemNotFound("nope")), sourceLocation: sourceLocation) {
            try s.apply(prefix + [failing])
        }
        #expect(s == base, sourceLocation: sourceLocation)
        #expect(throws: Never.self, sourceLocation: sourceLocation) { try s.checkInvariants() }
        #expect(s.digest == digest, sourceLocation: sourceLocation)
        #expect(layout(s) == layout(base), sourceLocation: sourceLocation)
        // The rolled-back snapshot still works: slots and indexes are consistent.
        #expect(throws: Never.self, sourceLocation: sourceLocation) {
            try s.apply([.appendItems(["z"], toSection: "s3"), .moveItem("a", .after("z")), .deleteSections(["s1"])])
            try s.checkInvariants()
        }
    }

    @Test func afterDeleteAllItems() {
        expectRollBack([.deleteAllItems, .appendSections(["a"]), .appendItems(["a"], toSection: nil), .updateItems([SnapshotElement("a")], .reload)])
        // The failure may even name an item that existed before the wipe.
        var s = base
        #expect(throws: BatchError(operationIndex: 1, violation: .itemNotFound("a"))) {
            try s.apply([.deleteAllItems, .deleteItems(["a"])])
        }
        #expect(s == base)
    }

    @Test func afterDeleteSections() {
        expectRollBack([.deleteSections(["s1"])])
        expectRollBack([.deleteSections(["s3", "s1", "s2"])])
        expectRollBack([.deleteSections(["s1"]), .appendSections(["s1"]), .appendItems(["a", "b"], toSection: "s1")])
    }

    @Test func afterMoves() {
        expectRollBack([.moveItem("a", .after("d")), .moveItem("c", .before("b")), .moveItemToSection("b", section: "s3")])
        expectRollBack([.moveSection("s1", .after("s3")), .moveSection("s2", .before("s3"))])
        expectRollBack([.moveItem("d", .after("c")), .deleteSections(["s2"])])
    }

    @Test func afterInserts() {
        expectRollBack([
            .appendSections(["n"]), .insertSections(["m"], .before("s1")),
            .appendItems(["x"], toSection: "n"), .insertItems(["y", "w"], .before("a")),
        ])
    }

    @Test func afterUpdatesAndDeletes() {
        expectRollBack([
            .updateItems([SnapshotElement("a", "new"), SnapshotElement("d")], .reconfigure), .updateSections([SnapshotElement("s1")]),
            .deleteItems(["b", "c"]),
        ])
    }

    @Test func afterEverythingAtOnce() {
        expectRollBack([
            .updateItems([SnapshotElement("a", "1")], .reload),
            .moveItem("a", .after("d")),
            .deleteItems(["b"]),
            .insertItems(["b"], .before("a")),
            .moveSection("s2", .before("s1")),
            .deleteSections(["s1"]),
            .deleteAllItems,
            .appendSections([SnapshotElement("s1", "other")]),
            .appendItems(["a", "b", "c", "d"], toSection: nil),
        ])
    }

    @Test func whenTheFailingOperationIsHalfDone() {
        // The third element of the append is a duplicate: the first two must be removed too.
        var s = base
        #expect(throws: BatchError(operationIndex: 0, violation: .duplicateItem("a"))) {
            try s.apply([.appendItems(["x", "y", "a"], toSection: "s3")])
        }
        #expect(s == base)
        // The second deleted section is unknown: the first comes back with its items, in order.
        #expect(throws: BatchError(operationIndex: 0, violation: .sectionNotFound("nope"))) {
            try s.apply([.deleteSections(["s1", "nope"])])
        }
        #expect(s == base)
        #expect(throws: BatchError(operationIndex: 0, violation: .itemNotFound("nope"))) {
            try s.apply([.updateItems([SnapshotElement("a", "x"), SnapshotElement("nope")], .reload)])
        }
        #expect(s == base)
        #expect(throws: Never.self) { try s.checkInvariants() }
    }

    @Test func copiesAreIndependent() throws {
        let original = base
        var copy = base
        try copy.apply([.deleteAllItems, .appendSections(["x"])])
        #expect(original == base)
        #expect(layout(copy) == [["x"]])
        try original.checkInvariants()
    }
}
