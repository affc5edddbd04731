// The item index (SlotIndex): open addressing in Robin Hood order with backward-shift deletion. Growth, deletion
// in the middle of probe runs, and slot reuse are where such tables break; checkInvariants()
// re-derives every entry's hash and slot.

import SnapSyncTestSupport
import Testing
import SnapSyncTestThreads
@testable import SnapSyncModel

@Suite(.unitTests) struct SlotIndexTests {
    @Test func survivesHeavyChurnWithSlotReuse() throws {
        var rng = SplitMix64(seed: 77)
        var s = snapshot([("a", []), ("b", [])])
        var live: [SnapshotIdentifier] = []
        var next = 0
        for round in 0..<60 {
            // Grow through several capacity doublings, then shrink, with slots freed and reused.
            let adds = round < 30 ? 300 : 100
            var batch: [SnapshotElement] = []
            for _ in 0..<adds { batch.append(SnapshotElement(SnapshotIdentifier("k\(next)"))); next += 1 }
            try s.appendItems(batch, toSection: Bool.random(using: &rng) ? "a" : "b", limits: .unlimited)
            live += batch.map(\.id)
            live.shuffle(using: &rng)
            let removeCount = round < 30 ? 150 : min(live.count, 250)
            try s.deleteItems(Array(live.suffix(removeCount)))
            live.removeLast(removeCount)
            try s.checkInvariants()
            #expect(s.numberOfItems == live.count)
        }
        for id in live { #expect(s.contains(item: id)) }
        // Deleted identifiers are gone, including ones whose slots were reused.
        var gone = 0
        for n in 0..<next where !s.contains(item: SnapshotIdentifier("k\(n)")) { gone += 1 }
        #expect(gone == next - live.count)
    }

    @Test func emptyIdentifierAndBinaryIdentifiersAreItemsLikeAnyOther() throws {
        var s = snapshot([("s", [])])
        let ids = [SnapshotIdentifier([]), SnapshotIdentifier([0]), SnapshotIdentifier([0, 0]), SnapshotIdentifier([0xFF]), SnapshotIdentifier(uint64: 0)]
        try s.appendItems(ids.map { SnapshotElement($0) }, toSection: "s")
        try s.checkInvariants()
        for id in ids { #expect(s.contains(item: id)) }
        #expect(s.itemIdentifiers == ids)
        try s.deleteItems([SnapshotIdentifier([0])])
        try s.checkInvariants()
        #expect(!s.contains(item: SnapshotIdentifier([0])))
        #expect(s.contains(item: SnapshotIdentifier([0, 0])))
        #expect(s.contains(item: SnapshotIdentifier([])))
    }

    @Test func rollbackRestoresTheIndex() throws {
        var s = snapshot([("s", (0..<500).map { "i\($0)" })])
        let before = s
        #expect(throws: BatchError.self) {
            try s.apply([
                .deleteItems((0..<400).map { SnapshotIdentifier("i\($0)") }),
                .appendItems((0..<400).map { SnapshotElement(SnapshotIdentifier("n\($0)")) }, toSection: "s"),
                .deleteItems(["i0"]),
            ])
        }
        try s.checkInvariants()
        #expect(s == before)
        for n in 0..<500 { #expect(s.contains(item: SnapshotIdentifier("i\(n)"))) }
        #expect(!s.contains(item: "n0"))
    }

    /// Tags crowded onto a few home buckets, at up to 7/8 full, inserted and removed in random
    /// order: the buckets stay in Robin Hood order and hold exactly the live entries.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func crowdedHomesKeepRobinHoodOrder(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var index = SlotIndex()
        var live: [(tag: UInt32, slot: RoomSnapshot.Slot)] = []
        var nextSlot: RoomSnapshot.Slot = 0
        for step in 0..<4_000 {
            // Homes 0–3 of whatever capacity, and the top bits vary (they are never used as home).
            let adding = live.isEmpty || (step % 500 < 300 && live.count < 200) || Int.random(in: 0..<3, using: &rng) == 0
            if adding {
                let tag = UInt32.random(in: 0..<4, using: &rng) | UInt32.random(in: 0..<1024, using: &rng) << 20
                index.insert(tag: tag, slot: nextSlot)
                live.append((tag, nextSlot))
                nextSlot += 1
            } else {
                let victim = live.remove(at: Int.random(in: 0..<live.count, using: &rng))
                index.remove(tag: victim.tag, slot: victim.slot)
            }
            #expect(index.isInRobinHoodOrder(), "step \(step)")
            #expect(index.count * 8 <= index.buckets.count * 7)
            if step % 97 == 0 {
                var entries: [RoomSnapshot.Slot: UInt32] = [:]
                index.forEachEntry { tag, slot in entries[slot] = tag }
                #expect(entries == Dictionary(uniqueKeysWithValues: live.map { ($0.slot, $0.tag) }), "step \(step)")
            }
        }
    }
}
