// Size limits: identifiers, payloads, item and section counts, and the snapshot's encoded size.

import Testing
import SnapSyncTestThreads
import SnapSyncModel

@Suite(.unitTests) struct LimitTests {
    let base = snapshot([("s1", ["a"])])

    @Test func identifierTooLong() {
        let limits = SnapshotLimits(maxIdentifierBytes: 3)
        // At the limit is fine.
        _ = applied([.appendSections(["abc"]), .appendItems(["xyz"], toSection: "abc")], to: base, limits: limits)
        expectRejected([.appendSections(["abcd"])], on: base, limits: limits, index: 0, .identifierTooLong("abcd", limit: 3))
        expectRejected([.insertSections(["abcd"], .after("s1"))], on: base, limits: limits, index: 0, .identifierTooLong("abcd", limit: 3))
        expectRejected(
            [.appendItems(["b"], toSection: nil), .appendItems(["long"], toSection: nil)], on: base, limits: limits, index: 1,
            .identifierTooLong("long", limit: 3))
        expectRejected([.insertItems(["long"], .before("a"))], on: base, limits: limits, index: 0, .identifierTooLong("long", limit: 3))
    }

    @Test func payloadTooLarge() {
        let limits = SnapshotLimits(maxPayloadBytes: 2)
        _ = applied([.appendItems([SnapshotElement("b", "xy")], toSection: nil)], to: base, limits: limits)
        expectRejected(
            [.appendItems([SnapshotElement("b", "xyz")], toSection: nil)], on: base, limits: limits, index: 0, .payloadTooLarge("b", size: 3, limit: 2))
        expectRejected([.insertItems([SnapshotElement("b", "xyz")], .after("a"))], on: base, limits: limits, index: 0, .payloadTooLarge("b", size: 3, limit: 2))
        expectRejected([.appendSections([SnapshotElement("s", "xyz")])], on: base, limits: limits, index: 0, .payloadTooLarge("s", size: 3, limit: 2))
        expectRejected(
            [.insertSections([SnapshotElement("s", "xyz")], .before("s1"))], on: base, limits: limits, index: 0, .payloadTooLarge("s", size: 3, limit: 2))
        expectRejected([.updateItems([SnapshotElement("a", "xyz")], .reload)], on: base, limits: limits, index: 0, .payloadTooLarge("a", size: 3, limit: 2))
        expectRejected([.updateSections([SnapshotElement("s1", "xyz")])], on: base, limits: limits, index: 0, .payloadTooLarge("s1", size: 3, limit: 2))
    }

    @Test func tooManyItems() {
        let limits = SnapshotLimits(maxItems: 3)
        let full = applied([.appendItems(["b", "c"], toSection: nil)], to: base, limits: limits)
        #expect(full.numberOfItems == 3)
        expectRejected([.appendItems(["d"], toSection: nil)], on: full, limits: limits, index: 0, .tooManyItems(limit: 3))
        expectRejected([.insertItems(["d"], .before("a"))], on: full, limits: limits, index: 0, .tooManyItems(limit: 3))
        expectRejected([.appendItems(["b", "c", "d"], toSection: nil)], on: base, limits: limits, index: 0, .tooManyItems(limit: 3))
        // Deleting first makes room within the same batch.
        let swapped = applied([.deleteItems(["a"]), .appendItems(["d"], toSection: nil)], to: full, limits: limits)
        #expect(swapped.itemIdentifiers == ["b", "c", "d"])
    }

    @Test func tooManySections() {
        let limits = SnapshotLimits(maxSections: 2)
        let full = applied([.appendSections(["s2"])], to: base, limits: limits)
        expectRejected([.appendSections(["s3"])], on: full, limits: limits, index: 0, .tooManySections(limit: 2))
        expectRejected([.insertSections(["s3"], .before("s1"))], on: full, limits: limits, index: 0, .tooManySections(limit: 2))
        _ = applied([.deleteSections(["s1"]), .appendSections(["s3"])], to: full, limits: limits)
    }

    @Test func snapshotTooLargeNamesTheOperationThatCrossedTheLimit() {
        // base encodes as: 01 | 02 "s1" 00 01 | 01 "a" 00  = 9 bytes; each new empty item "x" adds 3.
        #expect(base.canonicalByteCount == 9)
        let limits = SnapshotLimits(maxSnapshotBytes: 15)
        let at = applied([.appendItems(["b"], toSection: nil), .appendItems(["c"], toSection: nil)], to: base, limits: limits)
        #expect(at.canonicalByteCount == 15)
        expectRejected(
            [.appendItems(["b"], toSection: nil), .appendItems(["c"], toSection: nil), .appendItems(["d"], toSection: nil)], on: base, limits: limits,
            index: 2, .snapshotTooLarge(limit: 15))
        expectRejected([.updateItems([SnapshotElement("a", "1234567")], .reload)], on: base, limits: limits, index: 0, .snapshotTooLarge(limit: 15))
        expectRejected([.updateSections([SnapshotElement("s1", "1234567")])], on: base, limits: limits, index: 0, .snapshotTooLarge(limit: 15))
        expectRejected([.appendSections(["s2", "s3"])], on: base, limits: limits, index: 0, .snapshotTooLarge(limit: 15))
        // Shrinking first makes room within the same batch.
        _ = applied(
            [.deleteItems(["a"]), .appendItems(["b"], toSection: nil), .appendItems(["c"], toSection: nil), .appendItems(["d"], toSection: nil)], to: base,
            limits: limits)
    }

    @Test func aSnapshotOverALoweredLimitCanStillShrink() {
        let big = applied([.appendItems(["b", "c", "d"], toSection: nil)], to: base, limits: .unlimited)
        let limits = SnapshotLimits(maxSnapshotBytes: 10)
        #expect(big.canonicalByteCount > 10)
        let smaller = applied([.deleteItems(["d"])], to: big, limits: limits)
        #expect(smaller.canonicalByteCount > 10)
        _ = applied([.moveItem("a", .after("c")), .updateItems([SnapshotElement("a")], .reload)], to: smaller, limits: limits)
        expectRejected([.appendItems(["e"], toSection: nil)], on: smaller, limits: limits, index: 0, .snapshotTooLarge(limit: 10))
    }

    @Test func defaults() {
        #expect(SnapshotLimits.default.maxSnapshotBytes == 16 * 1024 * 1024 - 64 * 1024)
        #expect(SnapshotLimits.unlimited.maxSnapshotBytes == .max)
        #expect(SnapshotLimits.default.maxIdentifierBytes == 256)
    }

    /// The running size must follow every change, including the item-count varint of a section
    /// crossing 127 → 128 items (one byte to two) and back.
    @Test func runningByteCountFollowsVarintWidths() throws {
        var s = snapshot([("s", [])])
        var items: [SnapshotElement] = []
        for n in 0..<130 { items.append(SnapshotElement(SnapshotIdentifier("i\(n)"))) }
        for item in items {
            try s.appendItems([item], toSection: "s")
            #expect(s.canonicalByteCount == s.canonicalEncoding.count)
        }
        try s.checkInvariants()
        for item in items.reversed() {
            try s.deleteItems([item.id])
            #expect(s.canonicalByteCount == s.canonicalEncoding.count)
        }
        try s.reloadSections([SnapshotElement(SnapshotIdentifier("s"), payload: SnapshotPayload(Array(repeating: 1, count: 300)))], limits: .unlimited)
        #expect(s.canonicalByteCount == s.canonicalEncoding.count)
        try s.checkInvariants()
    }

    /// A snapshot built without limits, checked against lowered ones (a room recovered from the
    /// store): the first item over a limit is named, its identifier checked before its payload,
    /// and the item count after both.
    @Test func firstLimitViolationNamesTheFirstItemOverALimit() throws {
        let long = SnapshotElement(SnapshotIdentifier(String(repeating: "l", count: 300)), payload: SnapshotPayload(Array(repeating: 1, count: 200)))
        let big = SnapshotElement(SnapshotIdentifier("big"), payload: SnapshotPayload(Array(repeating: 2, count: 200)))
        let s = try RoomSnapshot(
            [(section: SnapshotElement("s1"), items: [SnapshotElement("a"), big]), (section: SnapshotElement("s2"), items: [long])],
            limits: .unlimited)
        #expect(s.firstLimitViolation(.unlimited) == nil)
        #expect(s.firstLimitViolation(SnapshotLimits(maxIdentifierBytes: 256, maxPayloadBytes: 100)) == .payloadTooLarge("big", size: 200, limit: 100))
        #expect(s.firstLimitViolation(SnapshotLimits(maxIdentifierBytes: 256, maxPayloadBytes: 1000)) == .identifierTooLong(long.id, limit: 256))
        #expect(s.firstLimitViolation(SnapshotLimits(maxIdentifierBytes: 299, maxPayloadBytes: 1000, maxItems: 1)) == .tooManyItems(limit: 1))
        #expect(s.firstLimitViolation(SnapshotLimits(maxIdentifierBytes: 299, maxPayloadBytes: 199)) == .payloadTooLarge("big", size: 200, limit: 199))
    }
}
