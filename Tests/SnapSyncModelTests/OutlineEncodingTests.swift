// The canonical encoding of outlines (PROTOCOL.md §4): `list<section> [levels]`, the levels part
// only when some item is nested, and building a snapshot back from levels.

import Testing
import SnapSyncTestThreads
@testable import SnapSyncModel

@Suite(.unitTests) struct OutlineEncodingTests {
    /// PROTOCOL.md §4's example: `groceries`, root `fruit` with `apple` and `pear`, root `bread`.
    let groceries: RoomSnapshot = {
        var s = try! RoomSnapshot([
            (SnapshotElement("groceries", "Groceries"), [SnapshotElement("fruit", "Fruit"), "apple", "pear", "bread"])
        ])
        try! s.setOutlineLevels([0, 1, 1, 0], maxOutlineDepth: 64)
        return s
    }()

    @Test func levelsFollowTheSections() {
        let expected: [UInt8] =
            [0x01, 0x09] + Array("groceries".utf8) + [0x09] + Array("Groceries".utf8) + [0x04]
            + [0x05] + Array("fruit".utf8) + [0x05] + Array("Fruit".utf8)
            + [0x05] + Array("apple".utf8) + [0x00] + [0x04] + Array("pear".utf8) + [0x00] + [0x05] + Array("bread".utf8) + [0x00]
            + [0x00, 0x01, 0x01, 0x00]
        #expect(groceries.canonicalEncoding == expected)
        #expect(groceries.canonicalByteCount == expected.count)
        #expect(groceries.digest == SnapshotDigest(hashing: expected))
    }

    @Test func aFlatSnapshotHasNoLevelsPart() throws {
        var s = groceries
        try s.apply(.moveItemToSection("apple", section: "groceries"))
        try s.apply(.moveItemToSection("pear", section: "groceries"))
        let flat = try RoomSnapshot([(SnapshotElement("groceries", "Groceries"), [SnapshotElement("fruit", "Fruit"), "bread", "apple", "pear"])])
        #expect(s.canonicalEncoding == flat.canonicalEncoding)
        #expect(s.digest == flat.digest)
        #expect(s == flat)
    }

    @Test func theHierarchyIsPartOfEqualityAndDigest() throws {
        var other = groceries
        try other.apply(.moveItemToParent("pear", parent: "apple"))
        #expect(other.itemIdentifiers == groceries.itemIdentifiers)
        #expect(other != groceries)
        #expect(other.digest != groceries.digest)
    }

    @Test func levelsOf128AndMoreTakeTwoBytes() throws {
        var s = try RoomSnapshot([(SnapshotElement("s"), (0...129).map { SnapshotElement(SnapshotIdentifier("i\($0)")) })])
        try s.setOutlineLevels(Array(0...129), maxOutlineDepth: 200)
        #expect(s.canonicalEncoding.count == s.canonicalByteCount)
        #expect(Array(s.canonicalEncoding.suffix(4)) == [0x80, 0x01, 0x81, 0x01])
        try s.checkInvariants()
        try s.apply(.moveItemToSection("i128", section: "s"), limits: .unlimited)
        #expect(s.canonicalEncoding.count == s.canonicalByteCount)
        try s.checkInvariants()
    }

    @Test func setOutlineLevelsRefusesWhatIsNotAForest() {
        let flat = snapshot([("s1", ["a", "b"]), ("s2", ["c"])])
        func refused(_ levels: [Int], depth: Int = 64, sourceLocation: SourceLocation = #_sourceLocation) {
            var s = flat
            #expect(throws: OutlineLevelsError.self, sourceLocation: sourceLocation) { try s.setOutlineLevels(levels, maxOutlineDepth: depth) }
            #expect(s == flat, sourceLocation: sourceLocation)
            #expect(!s.isOutline, sourceLocation: sourceLocation)
        }
        refused([0, 1])  // one level short
        refused([0, 1, 0, 0])  // one too many
        refused([1, 0, 0])  // a section's first item is a root
        refused([0, 1, 1])  // s2's first item cannot continue s1's tree
        refused([0, 2, 0])  // a jump of two levels
        refused([0, -1, 0])
        refused([0, 1, 0], depth: 1)
        var s = flat
        #expect(throws: Never.self) { try s.setOutlineLevels([0, 0, 0], maxOutlineDepth: 64) }
        #expect(s == flat)
        #expect(throws: Never.self) { try s.setOutlineLevels([0, 1, 0], maxOutlineDepth: 2) }
        #expect(s.parent(of: "b") == "a")
        #expect(throws: OutlineLevelsError.self) { try s.setOutlineLevels([0, 1, 0], maxOutlineDepth: 2) }
    }

    @Test func levelsRoundTrip() {
        var random = RandomOperations(seed: 91)
        for _ in 0..<200 {
            let s = random.forest(sections: 4, items: 30, universe: 40)
            var rebuilt = try! RoomSnapshot(s.sections.map { ($0, Array(s.items(inSection: $0.id))) })
            try! rebuilt.setOutlineLevels(s.itemLevels, maxOutlineDepth: 64)
            #expect(rebuilt == s)
            #expect(rebuilt.canonicalEncoding == s.canonicalEncoding)
            #expect(throws: Never.self) { try rebuilt.checkInvariants() }
        }
    }
}
