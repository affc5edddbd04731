// Outlines: what each operation does to a forest, every crash condition of UIKit's section
// snapshot as a typed error with the room unchanged, and the queries.

import Testing
import SnapSyncTestThreads
@testable import SnapSyncModel

/// Builds an outline from `[(section, [(item, level)])]`, empty payloads.
func outline(_ sections: [(String, [(String, Int)])]) -> RoomSnapshot {
    var s = snapshot(sections.map { ($0.0, $0.1.map(\.0)) })
    try! s.setOutlineLevels(sections.flatMap { $0.1.map(\.1) }, maxOutlineDepth: .max)
    return s
}

/// The snapshot as identifiers, each item prefixed with one "-" per level.
func tree(_ s: RoomSnapshot) -> [[String]] {
    s.sectionIdentifiers.map { section in
        [section.string!] + s.itemIdentifiers(inSection: section)!.map { String(repeating: "-", count: s.level(of: $0)!) + $0.string! }
    }
}

@Suite(.unitTests) struct OutlineOperationTests {
    /// s1: fruit (apple, pear (seed)), bread; s2: milk.
    let base = outline([("s1", [("fruit", 0), ("apple", 1), ("pear", 1), ("seed", 2), ("bread", 0)]), ("s2", [("milk", 0)])])

    @Test func queries() {
        #expect(base.isOutline)
        #expect(base.parent(of: "seed") == "pear")
        #expect(base.parent(of: "fruit") == nil)
        #expect(base.parent(of: "nope") == nil)
        #expect(base.level(of: "seed") == 2)
        #expect(base.level(of: "milk") == 0)
        #expect(base.level(of: "nope") == nil)
        #expect(base.children(of: "fruit") == ["apple", "pear"])
        #expect(base.children(of: "apple") == [])
        #expect(base.children(of: "nope") == nil)
        #expect(base.rootItems(inSection: "s1") == ["fruit", "bread"])
        #expect(base.rootItems(inSection: "nope") == nil)
        // The section's flat order is the depth-first order, as UIKit's.
        #expect(base.itemIdentifiers(inSection: "s1") == ["fruit", "apple", "pear", "seed", "bread"])
        #expect(base.itemLevels == [0, 1, 1, 2, 0, 0])
        #expect(!snapshot([("s", ["a"])]).isOutline)
    }

    @Test func appendChildrenAddsLastChildrenAfterTheWholeSubtree() {
        let s = applied([.appendChildren(["kiwi", "lime"], toParent: "fruit")], to: base)
        #expect(tree(s)[0] == ["s1", "fruit", "-apple", "-pear", "--seed", "-kiwi", "-lime", "bread"])
        let t = applied([.appendChildren(["leaf"], toParent: "milk")], to: base)
        #expect(tree(t)[1] == ["s2", "milk", "-leaf"])
    }

    @Test func insertItemsMakesSiblings() {
        #expect(tree(applied([.insertItems(["kiwi"], .before("pear"))], to: base))[0] == ["s1", "fruit", "-apple", "-kiwi", "-pear", "--seed", "bread"])
        // After the anchor's whole subtree, at its level.
        #expect(tree(applied([.insertItems(["kiwi"], .after("pear"))], to: base))[0] == ["s1", "fruit", "-apple", "-pear", "--seed", "-kiwi", "bread"])
        #expect(tree(applied([.insertItems(["jam"], .after("fruit"))], to: base))[0] == ["s1", "fruit", "-apple", "-pear", "--seed", "jam", "bread"])
        #expect(tree(applied([.appendItems(["tea"], toSection: "s1")], to: base))[0] == ["s1", "fruit", "-apple", "-pear", "--seed", "bread", "tea"])
    }

    @Test func deleteItemsTakesTheSubtree() {
        let s = applied([.deleteItems(["pear"])], to: base)
        #expect(tree(s)[0] == ["s1", "fruit", "-apple", "bread"])
        #expect(s.numberOfItems == 4)
        let t = applied([.deleteItems(["fruit", "milk"])], to: base)
        #expect(tree(t) == [["s1", "bread"], ["s2"]])
        #expect(!t.isOutline)
        // Descendant first, then its ancestor: both go.
        #expect(tree(applied([.deleteItems(["seed", "fruit"])], to: base))[0] == ["s1", "bread"])
    }

    @Test func deleteItemsRefusesAnIDThatWentWithAnEarlierOne() {
        // PROTOCOL.md §6: one id after the other; the descendant no longer exists.
        expectRejected([.deleteItems(["fruit", "seed"])], on: base, index: 0, .itemNotFound("seed"))
        expectRejected([.deleteItems(["pear", "pear"])], on: base, index: 0, .itemNotFound("pear"))
    }

    @Test func moveItemTakesTheSubtreeAndTheAnchorsParent() {
        // Up to the roots, after bread.
        #expect(tree(applied([.moveItem("pear", .after("bread"))], to: base))[0] == ["s1", "fruit", "-apple", "bread", "pear", "-seed"])
        // Before a root of another section.
        #expect(tree(applied([.moveItem("pear", .before("milk"))], to: base)) == [["s1", "fruit", "-apple", "bread"], ["s2", "pear", "-seed", "milk"]])
        // Down: next to a child; after an anchor with a subtree lands after that subtree.
        #expect(tree(applied([.moveItem("bread", .after("pear"))], to: base))[0] == ["s1", "fruit", "-apple", "-pear", "--seed", "-bread"])
        #expect(tree(applied([.moveItem("bread", .before("seed"))], to: base))[0] == ["s1", "fruit", "-apple", "-pear", "--bread", "--seed"])
        // After its own ancestor: out of the ancestor's subtree, as its next sibling.
        #expect(tree(applied([.moveItem("seed", .after("fruit"))], to: base))[0] == ["s1", "fruit", "-apple", "-pear", "seed", "bread"])
        #expect(tree(applied([.moveItem("seed", .before("fruit"))], to: base))[0] == ["s1", "seed", "fruit", "-apple", "-pear", "bread"])
    }

    @Test func moveItemToSectionMakesALastRoot() {
        let s = applied([.moveItemToSection("pear", section: "s2")], to: base)
        #expect(tree(s) == [["s1", "fruit", "-apple", "bread"], ["s2", "milk", "pear", "-seed"]])
        #expect(tree(applied([.moveItemToSection("seed", section: "s1")], to: base))[0] == ["s1", "fruit", "-apple", "-pear", "bread", "seed"])
    }

    @Test func moveItemToParentMakesALastChild() {
        #expect(tree(applied([.moveItemToParent("bread", parent: "pear")], to: base))[0] == ["s1", "fruit", "-apple", "-pear", "--seed", "--bread"])
        #expect(
            tree(applied([.moveItemToParent("pear", parent: "milk")], to: base)) == [["s1", "fruit", "-apple", "bread"], ["s2", "milk", "-pear", "--seed"]])
        // Already the last child: stays.
        #expect(applied([.moveItemToParent("pear", parent: "fruit")], to: base) == base)
        #expect(tree(applied([.moveItemToParent("apple", parent: "fruit")], to: base))[0] == ["s1", "fruit", "-pear", "--seed", "-apple", "bread"])
    }

    @Test func mutatorsWithSectionSnapshotNames() throws {
        var s = base
        try s.appendChildren(["kiwi"], toParent: "apple")
        try s.moveItem("bread", toParent: "milk")
        #expect(tree(s) == [["s1", "fruit", "-apple", "--kiwi", "-pear", "--seed"], ["s2", "milk", "-bread"]])
        #expect(throws: BatchError(operationIndex: 0, violation: .outlineTooDeep("x", limit: 3))) {
            try s.appendChildren(["x"], toParent: "kiwi", limits: SnapshotLimits(maxOutlineDepth: 3))
        }
        #expect(throws: BatchError(operationIndex: 0, violation: .moveIntoOwnSubtree("fruit"))) { try s.moveItem("fruit", toParent: "kiwi") }
    }

    @Test func sectionOperationsCarryTheForest() {
        let moved = applied([.moveSection("s1", .after("s2"))], to: base)
        #expect(tree(moved) == [["s2", "milk"], ["s1", "fruit", "-apple", "-pear", "--seed", "bread"]])
        let deleted = applied([.deleteSections(["s1"])], to: base)
        #expect(!deleted.isOutline)
        #expect(applied([.deleteAllItems], to: base).isEmpty)
    }

    @Test func crashConditionsAreTypedErrorsAndChangeNothing() {
        expectRejected([.appendChildren(["x"], toParent: "nope")], on: base, index: 0, .parentNotFound("nope"))
        expectRejected([.moveItemToParent("pear", parent: "nope")], on: base, index: 0, .parentNotFound("nope"))
        expectRejected([.moveItemToParent("nope", parent: "pear")], on: base, index: 0, .itemNotFound("nope"))
        expectRejected([.appendChildren(["apple"], toParent: "bread")], on: base, index: 0, .duplicateItem("apple"))
        expectRejected([.appendChildren(["x", "x"], toParent: "bread")], on: base, index: 0, .duplicateItem("x"))
        expectRejected([.insertItems(["x"], .after("nope"))], on: base, index: 0, .anchorItemNotFound("nope"))
        // Cycles: under itself, under or next to its own descendant.
        expectRejected([.moveItemToParent("pear", parent: "pear")], on: base, index: 0, .moveIntoOwnSubtree("pear"))
        expectRejected([.moveItemToParent("fruit", parent: "seed")], on: base, index: 0, .moveIntoOwnSubtree("fruit"))
        expectRejected([.moveItem("fruit", .after("seed"))], on: base, index: 0, .moveIntoOwnSubtree("fruit"))
        expectRejected([.moveItem("fruit", .before("apple"))], on: base, index: 0, .moveIntoOwnSubtree("fruit"))
        expectRejected([.moveItem("fruit", .before("fruit"))], on: base, index: 0, .anchorIsSelf("fruit"))
        // Too deep: levels 0...2 allowed under a limit of 3.
        let three = SnapshotLimits(maxOutlineDepth: 3)
        #expect(tree(applied([.appendChildren(["x"], toParent: "apple")], to: base, limits: three))[0].contains("--x"))
        expectRejected([.appendChildren(["x"], toParent: "seed")], on: base, limits: three, index: 0, .outlineTooDeep("x", limit: 3))
        // The deepest item of the moved subtree counts: pear (with seed) under apple puts seed at 3.
        expectRejected([.moveItemToParent("pear", parent: "apple")], on: base, limits: three, index: 0, .outlineTooDeep("pear", limit: 3))
        expectRejected([.moveItem("pear", .after("seed"))], on: base, limits: SnapshotLimits(maxOutlineDepth: 2), index: 0, .moveIntoOwnSubtree("pear"))
        expectRejected([.moveItem("fruit", .before("seed"))], on: base, limits: three, index: 0, .moveIntoOwnSubtree("fruit"))
        expectRejected([.moveItem("pear", .before("seed"))], on: base, limits: three, index: 0, .moveIntoOwnSubtree("pear"))
        expectRejected(
            [.moveItem("bread", .before("apple")), .moveItem("pear", .after("bread"))], on: base, limits: SnapshotLimits(maxOutlineDepth: 2), index: 1,
            .outlineTooDeep("pear", limit: 2))
        // The element's own checks come first (PROTOCOL.md §6).
        expectRejected([.appendChildren(["apple"], toParent: "seed")], on: base, limits: three, index: 0, .duplicateItem("apple"))
    }

    @Test func failedBatchesRollBackSubtreeChanges() {
        let failing: SnapshotOperation = .moveItem("nope", .after("fruit"))
        let prefixes: [[SnapshotOperation]] = [
            [.deleteItems(["pear"])],
            [.deleteSections(["s1"])],
            [.moveItem("pear", .after("milk")), .appendChildren(["x", "y"], toParent: "seed")],
            [.moveItemToParent("fruit", parent: "milk"), .deleteItems(["apple"]), .moveItemToSection("seed", section: "s1")],
            [.appendChildren(["x"], toParent: "bread"), .moveItemToParent("bread", parent: "seed"), .deleteItems(["fruit"])],
            [.deleteAllItems, .appendSections(["s1"]), .appendItems(["fruit"], toSection: "s1"), .appendChildren(["pear"], toParent: "fruit")],
            [.insertItems(["k"], .after("pear")), .moveItem("fruit", .after("bread")), .deleteItems(["k", "bread"])],
        ]
        for prefix in prefixes {
            expectRejected(prefix + [failing], on: base, index: prefix.count, .itemNotFound("nope"))
            var s = base
            _ = try? s.apply(prefix + [failing])
            #expect(s.digest == base.digest)
            #expect(tree(s) == tree(base))
        }
        // A flat room that a failed batch made an outline for a while is flat again.
        let flat = snapshot([("s", ["a", "b"])])
        expectRejected([.moveItemToParent("b", parent: "a"), failing], on: flat, index: 1, .itemNotFound("nope"))
        var s = flat
        _ = try? s.apply([.moveItemToParent("b", parent: "a"), failing])
        #expect(s.outline.isEmpty)
    }

    @Test func aRoomWithoutParentsDropsTheOutlineStorage() throws {
        var s = base
        try s.apply([.moveItemToSection("apple", section: "s1"), .moveItemToSection("pear", section: "s1"), .moveItemToSection("seed", section: "s2")])
        #expect(!s.isOutline)
        #expect(s.outline.isEmpty)
        #expect(s.canonicalEncoding == snapshot([("s1", ["fruit", "bread", "apple", "pear"]), ("s2", ["milk", "seed"])]).canonicalEncoding)
        try s.checkInvariants()
    }

    @Test func visualDescriptionDrawsTheTree() {
        let text = base.visualDescription()
        #expect(
            text == """
                RoomSnapshot: 2 sections, 6 items
                ├─ section s1 (5)
                │  ├─ fruit
                │  │  ├─ apple
                │  │  └─ pear
                │  │     └─ seed
                │  └─ bread
                └─ section s2 (1)
                   └─ milk

                """)
    }

    @Test func firstLimitViolationReportsDepthAfterTheContent() {
        #expect(base.firstLimitViolation(SnapshotLimits(maxOutlineDepth: 3)) == nil)
        #expect(base.firstLimitViolation(SnapshotLimits(maxOutlineDepth: 2)) == .outlineTooDeep("seed", limit: 2))
        // Content rules come first, in encoding order (PROTOCOL.md §4).
        #expect(base.firstLimitViolation(SnapshotLimits(maxItems: 5, maxOutlineDepth: 2)) == .tooManyItems(limit: 5))
    }
}
