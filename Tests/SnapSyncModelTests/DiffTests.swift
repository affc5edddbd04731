// `difference(to:)` on hand-made cases: the exact shape of the batch where it matters, and the
// exact number of moves where it can be worked out by hand.

import Testing
import SnapSyncTestThreads
import SnapSyncModel

/// Applies `a.difference(to: b)` to `a` and checks it lands on `b`; returns the batch.
@discardableResult
func checkedDiff(_ a: RoomSnapshot, _ b: RoomSnapshot, sourceLocation: SourceLocation = #_sourceLocation) -> [SnapshotOperation] {
    let ops = a.difference(to: b)
    var s = a
    #expect(throws: Never.self, sourceLocation: sourceLocation) { try s.apply(ops, limits: .unlimited) }
    #expect(throws: Never.self, sourceLocation: sourceLocation) { try s.checkInvariants() }
    #expect(s == b, "diff \(ops) does not reach the target", sourceLocation: sourceLocation)
    #expect(RoomSnapshot.diff(a, b) == ops, sourceLocation: sourceLocation)
    return ops
}

func itemMoves(_ ops: [SnapshotOperation]) -> Int {
    ops.filter {
        switch $0 {
        case .moveItem, .moveItemToSection, .moveItemToParent: true
        default: false
        }
    }.count
}

func sectionMoves(_ ops: [SnapshotOperation]) -> Int {
    ops.filter { if case .moveSection = $0 { true } else { false } }.count
}

@Suite(.unitTests) struct DiffTests {
    @Test func equalSnapshotsGiveAnEmptyBatch() {
        #expect(RoomSnapshot().difference(to: RoomSnapshot()).isEmpty)
        let s = snapshot([("s1", ["a", "b"]), ("s2", [])])
        #expect(s.difference(to: s).isEmpty)
        // Equal content in different storage layouts.
        var t = s
        try! t.apply([.deleteItems(["a"]), .insertItems(["a"], .before("b"))])
        #expect(s.difference(to: t).isEmpty)
    }

    @Test func fromEmpty() {
        let b = try! RoomSnapshot([
            (SnapshotElement("s1", "P"), [SnapshotElement("a", "A"), "b"]), (SnapshotElement("s2"), []), (SnapshotElement("s3"), ["c"]),
        ])
        let ops = checkedDiff(RoomSnapshot(), b)
        #expect(
            ops == [
                .appendSections([SnapshotElement("s1", "P"), "s2", "s3"]),
                .appendItems([SnapshotElement("a", "A"), "b"], toSection: "s1"),
                .appendItems(["c"], toSection: "s3"),
            ])
    }

    @Test func toEmptyIsOneDeleteAll() {
        let ops = checkedDiff(snapshot([("s1", ["a"]), ("s2", [])]), RoomSnapshot())
        #expect(ops == [.deleteAllItems])
    }

    @Test func payloadChangesAreUpdatesNotDeletesAndInserts() throws {
        let a = snapshot([("s1", ["a", "b"]), ("s2", ["c"])])
        var b = a
        try b.reloadItems([SnapshotElement("b", "new"), SnapshotElement("c", "C")])
        try b.reloadSections([SnapshotElement("s2", "S")])
        let ops = checkedDiff(a, b)
        #expect(ops == [.updateSections([SnapshotElement("s2", "S")]), .updateItems([SnapshotElement("b", "new"), SnapshotElement("c", "C")], .reload)])
    }

    @Test func oneMovedItemIsOneMove() {
        let a = snapshot([("s", ["1", "2", "3", "4", "5"])])
        #expect(checkedDiff(a, snapshot([("s", ["2", "3", "4", "5", "1"])])) == [.moveItem("1", .after("5"))])
        #expect(checkedDiff(a, snapshot([("s", ["5", "1", "2", "3", "4"])])) == [.moveItem("5", .before("1"))])
        #expect(checkedDiff(a, snapshot([("s", ["1", "3", "2", "4", "5"])])).count == 1)
    }

    @Test func reversingNItemsTakesNMinusOneMoves() {
        let n = 50
        let ids = (0..<n).map { "i\($0)" }
        let ops = checkedDiff(snapshot([("s", ids)]), snapshot([("s", ids.reversed())]))
        #expect(itemMoves(ops) == n - 1)
        #expect(ops.count == n - 1)
    }

    @Test func interleavedRotationMovesOnlyWhatLeftTheLIS() {
        // 0..<20 → evens then odds: the a positions read 0 2 … 18 1 3 … 19, whose LIS has 11
        // elements (the evens and 19, or 0 and the odds); the other 9 move.
        let ids = (0..<20).map { "i\($0)" }
        let reordered = stride(from: 0, to: 20, by: 2).map { "i\($0)" } + stride(from: 1, to: 20, by: 2).map { "i\($0)" }
        #expect(itemMoves(checkedDiff(snapshot([("s", ids)]), snapshot([("s", reordered)]))) == 9)
    }

    @Test func itemsChangingSectionAlwaysMove() {
        let a = snapshot([("s1", ["a", "b", "c"]), ("s2", ["d"])])
        let b = snapshot([("s1", ["a", "c"]), ("s2", ["b", "d"])])
        #expect(checkedDiff(a, b) == [.moveItem("b", .before("d"))])
        // To an empty section: no item to anchor on.
        let c = snapshot([("s1", ["a", "b", "c"]), ("s2", [])])
        let d = snapshot([("s1", ["a", "c"]), ("s2", ["b"])])
        #expect(checkedDiff(c, d) == [.moveItemToSection("b", section: "s2")])
    }

    @Test func insertsAreGroupedAndAnchoredOnThePreviousItem() {
        let a = snapshot([("s", ["a", "b"])])
        let b = snapshot([("s", ["x", "y", "a", "p", "q", "b", "z"])])
        #expect(
            checkedDiff(a, b) == [
                .insertItems(["x", "y"], .before("a")),
                .insertItems(["p", "q"], .after("a")),
                .insertItems(["z"], .after("b")),
            ])
    }

    @Test func itemsOfDeletedSectionsGoWithTheirSection() {
        let a = snapshot([("s1", ["a", "b"]), ("s2", ["c", "d"]), ("s3", ["e", "f"])])
        let b = snapshot([("s1", ["a"]), ("s3", ["f", "d"])])
        let ops = checkedDiff(a, b)
        // s2 is deleted first with "c" and "d"; "d" reappears in s3, so it is inserted there.
        #expect(
            ops == [
                .deleteSections(["s2"]),
                .deleteItems(["b", "e"]),
                .insertItems(["d"], .after("f")),
            ])
    }

    @Test func goneSectionsAreDeletedFirst() {
        let a = snapshot([("s1", ["a"]), ("s2", ["b"]), ("s3", ["c"])])
        let b = snapshot([("n", ["a", "x"])])
        #expect(
            checkedDiff(a, b) == [
                .deleteSections(["s1", "s2", "s3"]),
                .appendSections(["n"]),
                .appendItems(["a", "x"], toSection: "n"),
            ])
    }

    /// A room at its section limit, where the new section used to be
    /// inserted before the gone section that handed an item over was deleted.
    @Test func aSectionLimitIsNeverCrossedMidWay() {
        let limits = SnapshotLimits(maxItems: 40, maxSections: 2, maxSnapshotBytes: 600)
        let a = snapshot([("s1", ["a"]), ("s2", ["b"])])
        let b = snapshot([("n", ["a"]), ("s2", ["b"])])
        let ops = a.difference(to: b, limits: limits)
        var s = a
        for op in ops { #expect(throws: Never.self) { try s.apply(op, limits: limits) } }
        #expect(s == b)
    }

    /// Growing payload updates come after the deletes and the shrinking ones.
    @Test func shrinkingUpdatesComeBeforeGrowingOnes() {
        let a = try! RoomSnapshot([
            (SnapshotElement("s", "long section"), [SnapshotElement("a", "xxxxxxx"), SnapshotElement("b", "y"), SnapshotElement("c", "z")])
        ])
        let b = try! RoomSnapshot([(SnapshotElement("s", "s"), [SnapshotElement("a", "x"), SnapshotElement("b", "yyyyyyy")])])
        #expect(
            checkedDiff(a, b) == [
                .deleteItems(["c"]),
                .updateSections([SnapshotElement("s", "s")]),
                .updateItems([SnapshotElement("a", "x")], .reload),
                .updateItems([SnapshotElement("b", "yyyyyyy")], .reload),
            ])
    }

    /// Where item-count varints would cross the size limit mid-way (a section at 129 items hands
    /// two to one at 127: both ends encode to the same size, but every way of moving the items
    /// one by one passes 128 + 128), the batch is a rebuild whose prefixes are prefixes of b.
    @Test func aVarintCrossingFallsBackToARebuild() throws {
        let ids = (0..<256).map { "i\($0)" }
        let a = snapshot([("s1", Array(ids[0..<129])), ("s2", Array(ids[129...]))])
        let b = snapshot([("s1", Array(ids[0..<127])), ("s2", Array(ids[129...]) + Array(ids[127..<129]))])
        #expect(a.canonicalByteCount == b.canonicalByteCount)
        let limits = SnapshotLimits(maxSnapshotBytes: b.canonicalByteCount)
        // Unlimited, the batch is two moves, and it does pass over the limit.
        let moves = a.difference(to: b)
        #expect(moves.count == 2 && itemMoves(moves) == 2)
        var s = a
        #expect(throws: BatchError.self) { try s.apply(moves, limits: limits) }
        let ops = a.difference(to: b, limits: limits)
        #expect(
            ops == [
                .deleteAllItems, .appendSections(["s1"]),
                .appendItems(ids[0..<127].map { SnapshotElement(SnapshotIdentifier($0)) }, toSection: nil),
                .appendSections(["s2"]),
                .appendItems((ids[129...] + ids[127..<129]).map { SnapshotElement(SnapshotIdentifier($0)) }, toSection: nil),
            ])
        s = a
        for op in ops {
            try s.apply(op, limits: limits)
            #expect(s.canonicalByteCount <= limits.maxSnapshotBytes)
        }
        #expect(s == b)
    }

    @Test func sectionsMoveMinimally() {
        let a = snapshot([("s1", ["a"]), ("s2", ["b"]), ("s3", []), ("s4", ["c"])])
        #expect(checkedDiff(a, snapshot([("s4", ["c"]), ("s1", ["a"]), ("s2", ["b"]), ("s3", [])])) == [.moveSection("s4", .before("s1"))])
        #expect(checkedDiff(a, snapshot([("s2", ["b"]), ("s3", []), ("s4", ["c"]), ("s1", ["a"])])) == [.moveSection("s1", .after("s4"))])
        let reversed = checkedDiff(a, snapshot([("s4", ["c"]), ("s3", []), ("s2", ["b"]), ("s1", ["a"])]))
        #expect(sectionMoves(reversed) == 3)
        #expect(itemMoves(reversed) == 0)  // items travel with their sections
    }

    @Test func newSectionsAreGroupedAndPlacedAfterThePreviousOne() {
        let a = snapshot([("s1", []), ("s2", [])])
        let b = snapshot([("n1", []), ("n2", []), ("s1", []), ("n3", []), ("n4", []), ("s2", []), ("n5", [])])
        #expect(
            checkedDiff(a, b) == [
                .insertSections(["n1", "n2"], .before("s1")),
                .insertSections(["n3", "n4"], .after("s1")),
                .insertSections(["n5"], .after("s2")),
            ])
    }

    @Test func everythingAtOnce() throws {
        let a = try RoomSnapshot([
            (SnapshotElement("s1", "x"), ["a", "b", "c", "d"]),
            (SnapshotElement("s2"), ["e", SnapshotElement("f", "F")]),
            (SnapshotElement("s3"), ["g"]),
        ])
        let b = try RoomSnapshot([
            (SnapshotElement("s3", "y"), ["g", "b"]),
            (SnapshotElement("new"), ["h", "e"]),
            (SnapshotElement("s1", "x"), ["d", "a", "i", "c"]),
        ])
        let ops = checkedDiff(a, b)
        #expect(itemMoves(ops) == 2)  // b changes section; d leaves s1's LIS [a, c]; e's s2 is deleted
        #expect(ops.contains(.appendItems(["h", "e"], toSection: "new")))
        #expect(sectionMoves(ops) == 1)  // s3 before s1
    }
}
