// Item operations: each one's effect, under every placement, with invariants checked after
// every mutation.

import Testing
import SnapSyncTestThreads
import SnapSyncModel

@Suite(.unitTests) struct ItemOperationTests {
    let base = snapshot([("s1", ["a", "b", "c"]), ("s2", ["d"]), ("s3", [])])

    @Test func appendItemsToANamedSection() throws {
        let s = applied([.appendItems([SnapshotElement("x", "X"), "y"], toSection: "s1")], to: base)
        #expect(s.itemIdentifiers(inSection: "s1") == ["a", "b", "c", "x", "y"])
        #expect(s.payload(ofItem: "x") == "X")
        let empty = applied([.appendItems(["x"], toSection: "s3")], to: base)
        #expect(empty.itemIdentifiers(inSection: "s3") == ["x"])
    }

    @Test func appendItemsWithoutASectionUsesTheLastOne() throws {
        var s = base
        try s.appendItems(["x"])
        try s.checkInvariants()
        #expect(s.itemIdentifiers(inSection: "s3") == ["x"])
        try s.moveSection("s1", afterSection: "s3")
        try s.appendItems(["y"], toSection: nil)
        try s.checkInvariants()
        #expect(s.itemIdentifiers(inSection: "s1") == ["a", "b", "c", "y"])
    }

    @Test(arguments: [
        (SnapshotOperation.Placement.before("a"), ["x", "y", "a", "b", "c"]),
        (.after("a"), ["a", "x", "y", "b", "c"]),
        (.before("c"), ["a", "b", "x", "y", "c"]),
        (.after("c"), ["a", "b", "c", "x", "y"]),
    ])
    func insertItems(placement: SnapshotOperation.Placement, expected: [SnapshotIdentifier]) throws {
        let s = applied([.insertItems(["x", "y"], placement)], to: base)
        #expect(s.itemIdentifiers(inSection: "s1") == expected)
        #expect(s.itemIdentifiers(inSection: "s2") == ["d"])
    }

    @Test func insertItemsLandsInTheAnchorsSection() throws {
        var s = base
        try s.insertItems(["x"], beforeItem: "d")
        try s.insertItems(["y"], afterItem: "d")
        try s.checkInvariants()
        #expect(s.itemIdentifiers(inSection: "s2") == ["x", "d", "y"])
        #expect(s.sectionIdentifier(containingItem: "y") == "s2")
    }

    @Test func deleteItems() throws {
        var s = base
        try s.deleteItems(["b", "d"])
        try s.checkInvariants()
        #expect(layout(s) == [["s1", "a", "c"], ["s2"], ["s3"]])
        try s.deleteItems(["a", "c"])
        try s.checkInvariants()
        #expect(layout(s) == [["s1"], ["s2"], ["s3"]])  // sections stay
    }

    @Test func deleteAllItemsRemovesSectionsToo() throws {
        var s = base
        s.deleteAllItems()
        try s.checkInvariants()
        #expect(s.isEmpty)
        #expect(s.numberOfItems == 0)
        #expect(s == RoomSnapshot())
        #expect(s.canonicalByteCount == 1)
        // The snapshot is usable afterwards, and the old identifiers are free.
        try s.appendSections(["s1"])
        try s.appendItems(["a"])
        try s.checkInvariants()
        #expect(layout(s) == [["s1", "a"]])
    }

    @Test(
        arguments: [
            ("a", SnapshotOperation.Placement.after("c"), [["s1", "b", "c", "a"], ["s2", "d"], ["s3"]]),
            ("c", .before("a"), [["s1", "c", "a", "b"], ["s2", "d"], ["s3"]]),
            ("a", .after("b"), [["s1", "b", "a", "c"], ["s2", "d"], ["s3"]]),
            ("b", .after("a"), [["s1", "a", "b", "c"], ["s2", "d"], ["s3"]]),  // no-op
            ("a", .before("d"), [["s1", "b", "c"], ["s2", "a", "d"], ["s3"]]),  // across sections
            ("d", .after("a"), [["s1", "a", "d", "b", "c"], ["s2"], ["s3"]]),
        ] as [(SnapshotIdentifier, SnapshotOperation.Placement, [[String]])])
    func moveItem(item: SnapshotIdentifier, placement: SnapshotOperation.Placement, expected: [[String]]) throws {
        let s = applied([.moveItem(item, placement)], to: base)
        #expect(layout(s) == expected)
    }

    @Test func moveItemUIKitNames() throws {
        var s = base
        try s.moveItem("a", afterItem: "d")
        try s.moveItem("c", beforeItem: "b")
        try s.checkInvariants()
        #expect(layout(s) == [["s1", "c", "b"], ["s2", "d", "a"], ["s3"]])
    }

    @Test func moveItemToSection() throws {
        // To an empty section, which no item-anchored move can reach.
        var s = applied([.moveItemToSection("b", section: "s3")], to: base)
        #expect(layout(s) == [["s1", "a", "c"], ["s2", "d"], ["s3", "b"]])
        // Within its own section: to the end.
        s = applied([.moveItemToSection("a", section: "s1")], to: s)
        #expect(layout(s) == [["s1", "c", "a"], ["s2", "d"], ["s3", "b"]])
        // The last item of a section leaves it empty.
        s = applied([.moveItemToSection("d", section: "s1")], to: s)
        #expect(layout(s) == [["s1", "c", "a", "d"], ["s2"], ["s3", "b"]])
        var t = s
        try t.moveItem("b", toSection: "s2")
        try t.checkInvariants()
        #expect(layout(t) == [["s1", "c", "a", "d"], ["s2", "b"], ["s3"]])
    }

    @Test(arguments: [SnapshotOperation.UpdateKind.reload, .reconfigure])
    func updateItemsReplacesPayloadsOnly(kind: SnapshotOperation.UpdateKind) throws {
        let s = applied([.updateItems([SnapshotElement("a", "new"), SnapshotElement("d", "D")], kind)], to: base)
        #expect(s.payload(ofItem: "a") == "new")
        #expect(s.payload(ofItem: "d") == "D")
        #expect(s.payload(ofItem: "b") == .empty)
        #expect(layout(s) == layout(base))
        #expect(s.canonicalByteCount == base.canonicalByteCount + 4)
    }

    @Test func reloadAndReconfigureUIKitNames() throws {
        var s = base
        try s.reloadItems([SnapshotElement("a", "1")])
        try s.reconfigureItems([SnapshotElement("b", "2")])
        try s.checkInvariants()
        #expect(s.payload(ofItem: "a") == "1")
        #expect(s.payload(ofItem: "b") == "2")
    }

    @Test func aBatchAppliesInOrder() throws {
        // Later operations see the effect of earlier ones.
        let s = applied(
            [
                .appendSections(["new"]),
                .appendItems(["x"], toSection: "new"),
                .insertItems(["y"], .after("x")),
                .moveItem("a", .before("x")),
                .deleteSections(["s3"]),
                .updateItems([SnapshotElement("y", "Y")], .reconfigure),
                .moveSection("new", .before("s1")),
            ], to: base)
        #expect(layout(s) == [["new", "a", "x", "y"], ["s1", "b", "c"], ["s2", "d"]])
        #expect(s.payload(ofItem: "y") == "Y")
    }
}
