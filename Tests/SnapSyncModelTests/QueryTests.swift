// Queries, under their UIKit names, on a small fixed snapshot.

import Testing
import SnapSyncTestThreads
import SnapSyncModel

@Suite(.unitTests) struct QueryTests {
    /// main: a b c · empty: (none) · side: d
    let s = try! RoomSnapshot([
        (SnapshotElement("main", "M"), [SnapshotElement("a", "A"), SnapshotElement("b"), SnapshotElement("c", "C")]),
        (SnapshotElement("empty"), []),
        (SnapshotElement("side"), [SnapshotElement("d", "D")]),
    ])

    @Test func counts() {
        #expect(s.numberOfSections == 3)
        #expect(s.numberOfItems == 4)
        #expect(!s.isEmpty)
        #expect(RoomSnapshot().isEmpty)
        #expect(RoomSnapshot().numberOfItems == 0)
        #expect(RoomSnapshot().numberOfSections == 0)
    }

    @Test func numberOfItemsInSection() {
        #expect(s.numberOfItems(inSection: "main") == 3)
        #expect(s.numberOfItems(inSection: "empty") == 0)
        #expect(s.numberOfItems(inSection: "side") == 1)
        #expect(s.numberOfItems(inSection: "nope") == nil)
    }

    @Test func identifiers() {
        #expect(s.sectionIdentifiers == ["main", "empty", "side"])
        #expect(s.itemIdentifiers == ["a", "b", "c", "d"])
        #expect(s.itemIdentifiers(inSection: "main") == ["a", "b", "c"])
        #expect(s.itemIdentifiers(inSection: "empty") == [])
        #expect(s.itemIdentifiers(inSection: "nope") == nil)
        #expect(RoomSnapshot().sectionIdentifiers == [])
        #expect(RoomSnapshot().itemIdentifiers == [])
    }

    @Test func sectionIdentifierContainingItem() {
        #expect(s.sectionIdentifier(containingItem: "a") == "main")
        #expect(s.sectionIdentifier(containingItem: "d") == "side")
        #expect(s.sectionIdentifier(containingItem: "main") == nil)  // sections and items are separate namespaces
        #expect(s.sectionIdentifier(containingItem: "zz") == nil)
    }

    @Test func indexOfItemCountsAcrossSections() {
        #expect(s.indexOfItem("a") == 0)
        #expect(s.indexOfItem("c") == 2)
        #expect(s.indexOfItem("d") == 3)  // the empty section contributes nothing
        #expect(s.indexOfItem("zz") == nil)
    }

    @Test func indexPathOfItem() {
        #expect(s.indexPath(ofItem: "b").map { [$0.section, $0.item] } == [0, 1])
        #expect(s.indexPath(ofItem: "d").map { [$0.section, $0.item] } == [2, 0])
        #expect(s.indexPath(ofItem: "zz") == nil)
    }

    @Test func indexOfSection() {
        #expect(s.indexOfSection("main") == 0)
        #expect(s.indexOfSection("empty") == 1)
        #expect(s.indexOfSection("side") == 2)
        #expect(s.indexOfSection("a") == nil)
    }

    @Test func containsAndPayloads() {
        #expect(s.contains(item: "a"))
        #expect(!s.contains(item: "main"))
        #expect(s.contains(section: "empty"))
        #expect(!s.contains(section: "a"))
        #expect(s.payload(ofItem: "a") == "A")
        #expect(s.payload(ofItem: "b") == .empty)
        #expect(s.payload(ofItem: "zz") == nil)
        #expect(s.payload(ofSection: "main") == "M")
        #expect(s.payload(ofSection: "side") == .empty)
        #expect(s.payload(ofSection: "zz") == nil)
    }

    @Test func sequences() {
        #expect(Array(s.sections) == [SnapshotElement("main", "M"), SnapshotElement("empty"), SnapshotElement("side")])
        #expect(s.sections.underestimatedCount == 3)
        #expect(Array(s.items(inSection: "main")) == [SnapshotElement("a", "A"), SnapshotElement("b"), SnapshotElement("c", "C")])
        #expect(Array(s.items(inSection: "empty")) == [])
        #expect(Array(s.items(inSection: "nope")) == [])
    }

    @Test func equalityComparesContentNotStorage() throws {
        var other = snapshot([("main", ["a", "b", "c"]), ("empty", []), ("side", ["d"])])
        #expect(other != s)  // payloads differ
        try other.reloadSections([SnapshotElement("main", "M")])
        try other.reloadItems([SnapshotElement("a", "A"), SnapshotElement("c", "C")])
        try other.reconfigureItems([SnapshotElement("d", "D")])
        #expect(other == s)
        // Reach the same content through deletes and re-inserts: different slots, still equal.
        try other.deleteItems(["a", "b"])
        try other.insertItems([SnapshotElement("a", "A"), "b"], beforeItem: "c")
        try other.checkInvariants()
        #expect(other == s)
        #expect(snapshot([("x", ["1"])]) != snapshot([("x", [])]))
        #expect(snapshot([("x", [])]) != snapshot([("y", [])]))
        #expect(snapshot([("x", ["1", "2"])]) != snapshot([("x", ["2", "1"])]))
        #expect(snapshot([("x", ["1"]), ("y", [])]) != snapshot([("x", []), ("y", ["1"])]))
    }

    @Test func initRejectsDuplicates() {
        // The init builds one append per section and one per non-empty item list: the index
        // counts those.
        #expect(throws: BatchError(operationIndex: 3, violation: .duplicateItem("a"))) {
            try RoomSnapshot([(SnapshotElement("x"), [SnapshotElement("a")]), (SnapshotElement("y"), [SnapshotElement("a")])])
        }
        #expect(throws: BatchError(operationIndex: 2, violation: .duplicateSection("x"))) {
            try RoomSnapshot([(SnapshotElement("x"), [SnapshotElement("a")]), (SnapshotElement("x"), [])])
        }
    }

    @Test func visualDescription() {
        let text = s.visualDescription()
        #expect(
            text == """
                RoomSnapshot: 3 sections, 4 items
                ├─ section main (3) = "M"
                │  ├─ a = "A"
                │  ├─ b
                │  └─ c = "C"
                ├─ section empty (0)
                └─ section side (1)
                   └─ d = "D"

                """)
        #expect(s.description == text)
    }

    @Test func identifierDescriptions() {
        #expect(SnapshotIdentifier("abc").description == "abc")
        #expect(SnapshotIdentifier("a b").description == "\"a b\"")
        #expect(SnapshotIdentifier([0x00, 0xFF]).description == "0x00ff")
        #expect(SnapshotIdentifier(uint64: 258).bytes == [0, 0, 0, 0, 0, 0, 1, 2])
        #expect(SnapshotIdentifier(uint64: 2) < SnapshotIdentifier(uint64: 10))
    }

    @Test func payloadChangesComparesOneSectionInPlace() throws {
        var t = s
        try t.reloadItems([SnapshotElement("c", "C2")])
        try t.reloadItems([SnapshotElement("d", "D2")])  // another section: not reported for main
        func pairs(_ r: [(position: Int, id: SnapshotIdentifier)]?) -> [String]? { r?.map { "\($0.position):\($0.id)" } }
        #expect(pairs(s.payloadChanges(inSection: "main", comparedTo: t)) == ["2:c"])
        #expect(pairs(s.payloadChanges(inSection: "main", comparedTo: s)) == [])
        // Marked items are reported even when their payload is unchanged; unknown marks are ignored.
        #expect(pairs(s.payloadChanges(inSection: "main", comparedTo: t, marking: ["a", "zzz", "d"])) == ["0:a", "2:c"])
        #expect(pairs(s.payloadChanges(inSection: "empty", comparedTo: t)) == [])
        // Different identifiers, order or count, or a missing section: nil.
        var moved = s
        try moved.moveItem("a", afterItem: "b")
        #expect(s.payloadChanges(inSection: "main", comparedTo: moved) == nil)
        var grown = s
        try grown.appendItems(["e"], toSection: "main")
        #expect(s.payloadChanges(inSection: "main", comparedTo: grown) == nil)
        var renamed = s
        try renamed.deleteItems(["b"])
        try renamed.insertItems(["x"], afterItem: "a")
        #expect(s.payloadChanges(inSection: "main", comparedTo: renamed) == nil)
        #expect(s.payloadChanges(inSection: "nope", comparedTo: t) == nil)
    }
}
