// Property: a run of accepted batches (flat and outline operations, `deleteAllItems` among them),
// each applied with `applyReversibly`, is undone newest first back through every state it
// passed, exactly: content, hierarchy, digest and invariants. This is what a room's resume base
// relies on to rebuild an older version from its state now.

import SnapSyncTestSupport
import Testing
import SnapSyncTestThreads
@testable import SnapSyncModel

@Suite(.unitTests) struct UndoPropertyTests {
    @Test(arguments: [UInt64(71), 72, 73, 74])
    func undoingNewestFirstGivesBackEveryEarlierState(seed: UInt64) throws {
        var random = RandomOperations(seed: seed)
        let limits = OutlinePropertyTests.tight
        var undone = 0, wholes = 0
        for _ in 0..<25 {
            var s = random.forest(sections: 3, items: 20, universe: 30, maxDepth: 3)
            var model = ReferenceModel(s)
            var states = [s]
            var undos: [SnapshotUndo] = []
            for _ in 0..<60 {
                let batch = random.chance(3) ? [SnapshotOperation.deleteAllItems] : random.outlineBatch(for: model, limits: limits)
                let before = s
                guard let undo = try? s.applyReversibly(batch, limits: limits) else {
                    #expect(s == before)
                    continue
                }
                try model.apply(batch, limits: limits)
                if !undo.states.isEmpty { wholes += 1 }
                #expect(undo.byteCount >= undo.entries.count)
                states.append(s)
                undos.append(undo)
            }
            var back = s
            for (undo, expected) in zip(undos.reversed(), states.dropLast().reversed()) {
                back.undo(undo)
                try back.checkInvariants()
                #expect(back == expected)
                #expect(back.digest == expected.digest)
                #expect(back.canonicalByteCount == expected.canonicalByteCount)
                undone += 1
            }
            // The state the undos were made after is untouched: `back` was a copy.
            #expect(s == states.last)
        }
        #expect(undone > 150, "only \(undone) batches undone")
        #expect(wholes > 3, "only \(wholes) batches with deleteAllItems")
    }

    @Test func aWholeUndoRestoresTheStateItWasGiven() throws {
        var random = RandomOperations(seed: 75)
        let before = random.snapshot(sections: 3, items: 20, universe: 30)
        let after = random.snapshot(sections: 2, items: 12, universe: 30)
        let undo = SnapshotUndo.whole(before)
        #expect(undo.byteCount == before.canonicalByteCount + 2)
        var s = after
        s.undo(undo)
        #expect(s == before)
        try s.checkInvariants()
    }

    /// An entry costs about its DIFF op's bytes, not a boxed value per entry.
    @Test func entriesCostTheirIdentifiersAndPayloads() throws {
        var s = RoomSnapshot()
        try s.apply(.appendSections([SnapshotElement("s")]))
        let items = (0..<1000).map { SnapshotElement(SnapshotIdentifier(uint64: UInt64($0)), payload: SnapshotPayload(Array(repeating: 7, count: 16))) }
        let appended = try s.applyReversibly([.appendItems(items, toSection: "s")])
        // One removeItem per item: a tag, a length and 8 bytes of identifier.
        #expect(appended.byteCount == 1000 * 10)
        let updated = try s.applyReversibly([.updateItems(items.map { SnapshotElement($0.id, payload: "new") }, .reload)])
        // One restoreItemPayload per item: a tag, the identifier and the old 16-byte payload.
        #expect(updated.byteCount == 1000 * (1 + 9 + 17))
        s.undo(updated)
        s.undo(appended)
        #expect(s.numberOfItems == 0 && s.numberOfSections == 1)
    }
}
