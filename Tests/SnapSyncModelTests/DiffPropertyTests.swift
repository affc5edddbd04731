// Laws of `difference(to:)` on random snapshots (seeded, so failures reproduce):
//   a.apply(a.difference(to: b)) == b, with the invariants intact;
//   a.difference(to: a) is empty;
//   the number of moves equals an independent O(n²) longest-increasing-subsequence count;
//   identities are kept: only items of b ∖ a and items of deleted sections are inserted, only
//   items of a ∖ b removed, and only elements whose payload changed are updated.

import SnapSyncTestSupport
import Testing
import SnapSyncTestThreads
import SnapSyncModel

/// Length of a longest strictly increasing subsequence, by the textbook O(n²) dynamic program:
/// independent of the patience-sorting code under test.
func lisLength(_ values: [Int]) -> Int {
    var best = [Int](repeating: 1, count: values.count)
    for i in values.indices {
        for j in 0..<i where values[j] < values[i] { best[i] = max(best[i], best[j] + 1) }
    }
    return best.max() ?? 0
}

/// The fewest moves any batch of single-element moves that deletes gone sections first needs to
/// turn a into b (see the file comment of RoomSnapshot+Diffing.swift for why).
func minimalMoves(_ a: RoomSnapshot, _ b: RoomSnapshot) -> (sections: Int, items: Int) {
    let aSections = a.sectionIdentifiers
    let common = b.sectionIdentifiers.compactMap { aSections.firstIndex(of: $0) }
    var items = 0
    for section in b.sectionIdentifiers {
        let aItems = a.itemIdentifiers(inSection: section) ?? []
        var staying: [Int] = []
        // An item of a deleted section is inserted where it reappears, not moved.
        for item in b.itemIdentifiers(inSection: section)! where a.sectionIdentifier(containingItem: item).map(b.contains(section:)) == true {
            if let position = aItems.firstIndex(of: item) { staying.append(position) } else { items += 1 }
        }
        items += staying.count - lisLength(staying)
    }
    return (common.count - lisLength(common), items)
}

@Suite(.unitTests) struct DiffPropertyTests {
    func checkLaws(_ a: RoomSnapshot, _ b: RoomSnapshot, context: String) {
        let ops = checkedDiff(a, b)
        #expect(a.difference(to: a).isEmpty, "\(context)")
        #expect(b.difference(to: b).isEmpty, "\(context)")
        let expected = minimalMoves(a, b)
        #expect(sectionMoves(ops) == expected.sections, "\(context): \(ops)")
        #expect(itemMoves(ops) == expected.items, "\(context): \(ops)")

        var inserted: [SnapshotIdentifier] = [], deletedItems: [SnapshotIdentifier] = [], deletedSections: [SnapshotIdentifier] = []
        var updatedItems: [SnapshotIdentifier] = [], updatedSections: [SnapshotIdentifier] = [], insertedSections: [SnapshotIdentifier] = []
        for op in ops {
            switch op {
            case .appendItems(let e, _), .insertItems(let e, _): #expect(!e.isEmpty); inserted += e.map(\.id)
            case .appendSections(let e), .insertSections(let e, _): #expect(!e.isEmpty); insertedSections += e.map(\.id)
            case .deleteItems(let ids): #expect(!ids.isEmpty); deletedItems += ids
            case .deleteSections(let ids): #expect(!ids.isEmpty); deletedSections += ids
            case .updateItems(let e, let kind): #expect(kind == .reload); updatedItems += e.map(\.id)
            case .updateSections(let e): updatedSections += e.map(\.id)
            case .deleteAllItems: #expect(b.isEmpty)
            case .appendChildren: Issue.record("\(context): a flat diff appended children")
            case .moveItem, .moveItemToSection, .moveSection, .moveItemToParent: break
            }
        }
        let aItems = Set(a.itemIdentifiers), bItems = Set(b.itemIdentifiers)
        let aSections = Set(a.sectionIdentifiers), bSections = Set(b.sectionIdentifiers)
        // Items of deleted sections are inserted again where they reappear.
        let survivors = aItems.filter { bSections.contains(a.sectionIdentifier(containingItem: $0)!) }
        #expect(Set(inserted) == bItems.subtracting(survivors) && inserted.count == Set(inserted).count, "\(context)")
        #expect(Set(insertedSections) == bSections.subtracting(aSections), "\(context)")
        if !b.isEmpty {
            #expect(Set(deletedSections) == aSections.subtracting(bSections), "\(context)")
            // Gone items are deleted one by one only outside deleted sections.
            let goneOutside = aItems.subtracting(bItems).filter { bSections.contains(a.sectionIdentifier(containingItem: $0)!) }
            #expect(Set(deletedItems) == goneOutside && deletedItems.count == goneOutside.count, "\(context)")
        }
        let changedItems = survivors.intersection(bItems).filter { a.payload(ofItem: $0) != b.payload(ofItem: $0) }
        #expect(Set(updatedItems) == changedItems && updatedItems.count == changedItems.count, "\(context)")
        let changedSections = aSections.intersection(bSections).filter { a.payload(ofSection: $0) != b.payload(ofSection: $0) }
        #expect(Set(updatedSections) == changedSections, "\(context)")
    }

    /// Independent draws over a small universe: many sections gone or new, items crossing sections.
    @Test(arguments: [UInt64(11), 12, 13, 14])
    func lawsOnIndependentSnapshots(seed: UInt64) {
        var random = RandomOperations(seed: seed)
        for round in 0..<400 {
            let a = random.snapshot(sections: 6, items: 30, universe: 40)
            let b = random.snapshot(sections: 6, items: 30, universe: 40)
            checkLaws(a, b, context: "seed \(seed), round \(round)")
        }
    }

    /// b is a after a few random operations: the realistic case of mostly stable content.
    @Test(arguments: [UInt64(21), 22, 23, 24])
    func lawsOnNearbySnapshots(seed: UInt64) {
        var random = RandomOperations(seed: seed)
        for round in 0..<300 {
            let a = random.snapshot(sections: 5, items: 40, universe: 60)
            var b = a
            var model = ReferenceModel(a)
            for _ in 0..<Int.random(in: 1...4, using: &random.rng) {
                let batch = random.batch(for: model, limits: .unlimited)
                if (try? b.apply(batch, limits: .unlimited)) != nil { model = ReferenceModel(b) }
            }
            checkLaws(a, b, context: "seed \(seed), round \(round)")
        }
    }

    /// Larger single-section shuffles, where the LIS does the real work.
    @Test(arguments: [UInt64(31), 32])
    func movesAreMinimalOnLargerShuffles(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        for round in 0..<20 {
            let ids = (0..<300).map { "i\($0)" }
            var target = ids
            // Some random moves, some deletes and inserts.
            for _ in 0..<Int.random(in: 1...60, using: &rng) {
                let from = Int.random(in: 0..<target.count, using: &rng)
                let id = target.remove(at: from)
                target.insert(id, at: Int.random(in: 0...target.count, using: &rng))
            }
            for _ in 0..<10 { target.remove(at: Int.random(in: 0..<target.count, using: &rng)) }
            for n in 0..<10 { target.insert("new\(n)", at: Int.random(in: 0...target.count, using: &rng)) }
            checkLaws(snapshot([("s", ids)]), snapshot([("s", target)]), context: "seed \(seed), round \(round)")
        }
    }
}
