// Section operations: each one's effect, under every placement, with invariants checked after
// every mutation.

import Testing
import SnapSyncTestThreads
import SnapSyncModel

@Suite(.unitTests) struct SectionOperationTests {
    let base = snapshot([("s1", ["a"]), ("s2", ["b", "c"]), ("s3", [])])

    @Test func appendSections() throws {
        let s = applied([.appendSections([SnapshotElement("n1", "P"), "n2"])], to: base)
        #expect(s.sectionIdentifiers == ["s1", "s2", "s3", "n1", "n2"])
        #expect(s.payload(ofSection: "n1") == "P")
        #expect(s.numberOfItems(inSection: "n1") == 0)
        let fromEmpty = applied([.appendSections(["x"])], to: RoomSnapshot())
        #expect(fromEmpty.sectionIdentifiers == ["x"])
        // An empty list is a no-op, not an error.
        #expect(applied([.appendSections([])], to: base) == base)
    }

    @Test(arguments: [
        (SnapshotOperation.Placement.before("s1"), ["n1", "n2", "s1", "s2", "s3"]),
        (.after("s1"), ["s1", "n1", "n2", "s2", "s3"]),
        (.before("s3"), ["s1", "s2", "n1", "n2", "s3"]),
        (.after("s3"), ["s1", "s2", "s3", "n1", "n2"]),
    ])
    func insertSections(placement: SnapshotOperation.Placement, expected: [SnapshotIdentifier]) throws {
        let s = applied([.insertSections(["n1", "n2"], placement)], to: base)
        #expect(s.sectionIdentifiers == expected)
        #expect(s.itemIdentifiers == ["a", "b", "c"])
    }

    @Test func insertSectionsUIKitNames() throws {
        var s = base
        try s.insertSections(["x"], beforeSection: "s2")
        try s.insertSections(["y"], afterSection: "s2")
        try s.checkInvariants()
        #expect(s.sectionIdentifiers == ["s1", "x", "s2", "y", "s3"])
    }

    @Test func deleteSectionsRemovesTheirItems() throws {
        var s = base
        try s.deleteSections(["s2", "s3"])
        try s.checkInvariants()
        #expect(layout(s) == [["s1", "a"]])
        #expect(!s.contains(item: "b"))
        #expect(s.numberOfItems == 1)
        // The identifiers are free again.
        try s.appendSections(["s2"])
        try s.appendItems(["b"], toSection: "s2")
        try s.checkInvariants()
        #expect(layout(s) == [["s1", "a"], ["s2", "b"]])
    }

    @Test(
        arguments: [
            ("s1", SnapshotOperation.Placement.after("s3"), ["s2", "s3", "s1"]),
            ("s1", .before("s3"), ["s2", "s1", "s3"]),
            ("s3", .before("s1"), ["s3", "s1", "s2"]),
            ("s3", .after("s1"), ["s1", "s3", "s2"]),
            ("s2", .after("s1"), ["s1", "s2", "s3"]),  // already there: a no-op
            ("s2", .before("s3"), ["s1", "s2", "s3"]),
        ] as [(SnapshotIdentifier, SnapshotOperation.Placement, [SnapshotIdentifier])])
    func moveSection(section: SnapshotIdentifier, placement: SnapshotOperation.Placement, expected: [SnapshotIdentifier]) throws {
        let s = applied([.moveSection(section, placement)], to: base)
        #expect(s.sectionIdentifiers == expected)
        // Items travel with their section.
        #expect(s.itemIdentifiers(inSection: "s2") == ["b", "c"])
        #expect(s.sectionIdentifier(containingItem: "a") == "s1")
    }

    @Test func moveSectionUIKitNames() throws {
        var s = base
        try s.moveSection("s1", afterSection: "s2")
        try s.checkInvariants()
        #expect(s.sectionIdentifiers == ["s2", "s1", "s3"])
        try s.moveSection("s3", beforeSection: "s2")
        try s.checkInvariants()
        #expect(s.sectionIdentifiers == ["s3", "s2", "s1"])
    }

    @Test func updateSectionsReplacesPayloadsOnly() throws {
        var s = base
        let count = s.canonicalByteCount
        try s.reloadSections([SnapshotElement("s2", "new"), SnapshotElement("s3", "x")])
        try s.checkInvariants()
        #expect(s.payload(ofSection: "s2") == "new")
        #expect(s.payload(ofSection: "s3") == "x")
        #expect(s.itemIdentifiers(inSection: "s2") == ["b", "c"])
        #expect(s.canonicalByteCount == count + 4)
        try s.apply(.updateSections([SnapshotElement("s2")]))
        try s.checkInvariants()
        #expect(s.payload(ofSection: "s2") == .empty)
    }
}
