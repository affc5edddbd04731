// Every rule a batch can break: the typed error, the index of the failing operation, the
// identifier it names, and a snapshot left exactly as it was.

import Testing
import SnapSyncTestThreads
import SnapSyncModel

@Suite(.unitTests) struct ViolationTests {
    let base = snapshot([("s1", ["a", "b"]), ("s2", ["c"])])

    @Test func duplicateSectionAlreadyPresent() {
        expectRejected([.appendSections(["s2"])], on: base, index: 0, .duplicateSection("s2"))
        expectRejected([.insertSections(["x", "s1"], .after("s2"))], on: base, index: 0, .duplicateSection("s1"))
    }

    @Test func duplicateSectionTwiceInOneBatch() {
        expectRejected([.appendSections(["x", "x"])], on: base, index: 0, .duplicateSection("x"))
        expectRejected([.appendSections(["x"]), .insertSections(["x"], .before("s1"))], on: base, index: 1, .duplicateSection("x"))
    }

    @Test func duplicateItemAlreadyPresent() {
        // Item identifiers are unique across the whole snapshot, not per section (UIKit's rule).
        expectRejected([.appendItems(["a"], toSection: "s2")], on: base, index: 0, .duplicateItem("a"))
        expectRejected([.insertItems(["x", "c"], .before("a"))], on: base, index: 0, .duplicateItem("c"))
    }

    @Test func duplicateItemTwiceInOneBatch() {
        expectRejected([.appendItems(["x", "x"], toSection: "s1")], on: base, index: 0, .duplicateItem("x"))
        expectRejected(
            [.appendItems(["x"], toSection: "s1"), .appendItems(["x"], toSection: "s2")],
            on: base, index: 1, .duplicateItem("x"))
        expectRejected([.insertItems(["x"], .after("a")), .insertItems(["x"], .after("c"))], on: base, index: 1, .duplicateItem("x"))
    }

    @Test func sectionAndItemNamespacesAreSeparate() throws {
        // An item may share bytes with a section: not a duplicate.
        let s = applied([.appendItems(["s1"], toSection: "s1"), .appendSections(["a"])], to: base)
        #expect(s.sectionIdentifier(containingItem: "s1") == "s1")
    }

    @Test func missingSection() {
        expectRejected([.deleteSections(["nope"])], on: base, index: 0, .sectionNotFound("nope"))
        expectRejected([.moveSection("nope", .after("s1"))], on: base, index: 0, .sectionNotFound("nope"))
        expectRejected([.updateSections([SnapshotElement("nope")])], on: base, index: 0, .sectionNotFound("nope"))
        expectRejected([.appendItems(["x"], toSection: "nope")], on: base, index: 0, .sectionNotFound("nope"))
        expectRejected([.moveItemToSection("a", section: "nope")], on: base, index: 0, .sectionNotFound("nope"))
        // A section deleted earlier in the batch is missing for later operations.
        expectRejected([.deleteSections(["s2"]), .appendItems(["x"], toSection: "s2")], on: base, index: 1, .sectionNotFound("s2"))
    }

    @Test func missingAnchorSection() {
        expectRejected([.insertSections(["x"], .before("nope"))], on: base, index: 0, .anchorSectionNotFound("nope"))
        expectRejected([.insertSections(["x"], .after("nope"))], on: base, index: 0, .anchorSectionNotFound("nope"))
        expectRejected([.moveSection("s1", .after("nope"))], on: base, index: 0, .anchorSectionNotFound("nope"))
        // Anchors are sections, not items, even when the bytes match an item.
        expectRejected([.insertSections(["x"], .after("a"))], on: base, index: 0, .anchorSectionNotFound("a"))
    }

    @Test func missingAnchorItem() {
        expectRejected([.insertItems(["x"], .before("nope"))], on: base, index: 0, .anchorItemNotFound("nope"))
        expectRejected([.insertItems(["x"], .after("s1"))], on: base, index: 0, .anchorItemNotFound("s1"))
        expectRejected([.moveItem("a", .before("nope"))], on: base, index: 0, .anchorItemNotFound("nope"))
        expectRejected([.deleteItems(["c"]), .moveItem("a", .after("c"))], on: base, index: 1, .anchorItemNotFound("c"))
    }

    @Test func appendWithNoSections() {
        expectRejected([.appendItems(["x"], toSection: nil)], on: RoomSnapshot(), index: 0, .noSections)
        expectRejected([.deleteAllItems, .appendItems(["x"], toSection: nil)], on: base, index: 1, .noSections)
        expectRejected([.deleteSections(["s1", "s2"]), .appendItems(["x"], toSection: nil)], on: base, index: 1, .noSections)
    }

    @Test func updateDeleteOrMoveOfAMissingItem() {
        expectRejected([.updateItems([SnapshotElement("a", "ok"), SnapshotElement("nope", "x")], .reload)], on: base, index: 0, .itemNotFound("nope"))
        expectRejected([.updateItems([SnapshotElement("nope")], .reconfigure)], on: base, index: 0, .itemNotFound("nope"))
        expectRejected([.moveItem("nope", .after("a"))], on: base, index: 0, .itemNotFound("nope"))
        expectRejected([.moveItemToSection("nope", section: "s1")], on: base, index: 0, .itemNotFound("nope"))
        // The item is checked before the anchor.
        expectRejected([.moveItem("nope", .after("nope2"))], on: base, index: 0, .itemNotFound("nope"))
    }

    /// Protocol/PROTOCOL.md §7: deleting an unknown identifier rejects the whole batch, so that
    /// every DIFF says exactly what happened. UIKit sometimes ignores it; SnapSync does not.
    @Test func deletingAnUnknownIdentifierRejects() {
        expectRejected([.deleteItems(["a", "nope"])], on: base, index: 0, .itemNotFound("nope"))
        expectRejected([.deleteSections(["s1", "nope"])], on: base, index: 0, .sectionNotFound("nope"))
        // Deleting the same identifier twice: the second time it is unknown.
        expectRejected([.deleteItems(["a", "a"])], on: base, index: 0, .itemNotFound("a"))
        expectRejected([.deleteSections(["s2"]), .deleteSections(["s2"])], on: base, index: 1, .sectionNotFound("s2"))
        // Items of a deleted section are gone too.
        expectRejected([.deleteSections(["s2"]), .deleteItems(["c"])], on: base, index: 1, .itemNotFound("c"))
        // A section identifier is not an item identifier.
        expectRejected([.deleteItems(["s1"])], on: base, index: 0, .itemNotFound("s1"))
    }

    @Test func anchorEqualToTheMovedElement() {
        expectRejected([.moveItem("a", .after("a"))], on: base, index: 0, .anchorIsSelf("a"))
        expectRejected([.moveItem("a", .before("a"))], on: base, index: 0, .anchorIsSelf("a"))
        expectRejected([.moveSection("s1", .before("s1"))], on: base, index: 0, .anchorIsSelf("s1"))
        expectRejected([.moveSection("s1", .after("s1"))], on: base, index: 0, .anchorIsSelf("s1"))
    }

    @Test func theFirstFailingOperationIsNamed() {
        expectRejected(
            [.appendSections(["x"]), .deleteItems(["a"]), .moveItem("a", .after("c")), .deleteSections(["nope"])],
            on: base, index: 2, .itemNotFound("a"))
    }

    @Test func violationsNameTheirIdentifier() {
        #expect(BatchError.Violation.duplicateItem("x").identifier == "x")
        #expect(BatchError.Violation.anchorIsSelf("s").identifier == "s")
        #expect(BatchError.Violation.payloadTooLarge("p", size: 9, limit: 1).identifier == "p")
        #expect(BatchError.Violation.identifierTooLong("i", limit: 0).identifier == "i")
        #expect(BatchError.Violation.noSections.identifier == nil)
        #expect(BatchError.Violation.tooManyItems(limit: 1).identifier == nil)
        #expect(BatchError.Violation.tooManySections(limit: 1).identifier == nil)
        #expect(BatchError.Violation.snapshotTooLarge(limit: 1).identifier == nil)
    }

    @Test func messagesSayWhatAndWhich() {
        #expect(BatchError(operationIndex: 3, violation: .itemNotFound("abc")).description == "operation 3: item abc does not exist")
        #expect(BatchError.Violation.duplicateSection("s").description == "section s already exists")
        #expect(BatchError.Violation.anchorItemNotFound("x").description == "anchor item x does not exist")
        #expect(BatchError.Violation.anchorSectionNotFound("x").description == "anchor section x does not exist")
        #expect(BatchError.Violation.sectionNotFound("x").description == "section x does not exist")
        #expect(BatchError.Violation.noSections.description.contains("no sections"))
        #expect(BatchError.Violation.anchorIsSelf("x").description.contains("itself"))
        #expect(BatchError.Violation.payloadTooLarge("p", size: 9, limit: 4).description == "payload of p is 9 bytes, over the limit of 4")
        #expect(BatchError.Violation.identifierTooLong("long", limit: 2).description == "identifier long is 4 bytes, over the limit of 2")
        #expect(BatchError.Violation.tooManyItems(limit: 5).description.contains("5 items"))
        #expect(BatchError.Violation.tooManySections(limit: 5).description.contains("5 sections"))
        #expect(BatchError.Violation.snapshotTooLarge(limit: 100).description.contains("100 bytes"))
        // Binary identifiers print as hex, never as raw control bytes.
        #expect(BatchError.Violation.itemNotFound(SnapshotIdentifier([0x01, 0x0A])).description == "item 0x010a does not exist")
    }
}
