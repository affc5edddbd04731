// Random outlines for the property tests: forests built through the operations, batches that mix
// the outline operations with the flat ones, and an independent count of the fewest moves.

import SnapSyncTestSupport
import SnapSyncModel

extension RandomOperations {
    /// A random outline over small universes: each item goes into a random section, as a root or
    /// as the last child of a random earlier item of that section (at most `maxDepth` levels).
    mutating func forest(sections maxSections: Int, items maxItems: Int, universe: Int, maxDepth: Int = 4, maxPayload: Int = 2) -> RoomSnapshot {
        var sectionIDs = (0..<maxSections).map { SnapshotIdentifier($0 == 0 ? "" : "s\($0)") }.shuffled(using: &rng)
        sectionIDs = Array(sectionIDs.prefix(Int.random(in: 0...maxSections, using: &rng)))
        var itemIDs = (0..<universe).map { SnapshotIdentifier($0 == 0 ? "" : "i\($0)") }.shuffled(using: &rng)
        itemIDs = Array(itemIDs.prefix(sectionIDs.isEmpty ? 0 : Int.random(in: 0...maxItems, using: &rng)))
        var s = RoomSnapshot()
        func payload(_ rng: inout SplitMix64) -> SnapshotPayload {
            SnapshotPayload([UInt8](repeating: 0x70, count: Int.random(in: 0...maxPayload, using: &rng)))
        }
        for id in sectionIDs { try! s.apply(.appendSections([SnapshotElement(id, payload: payload(&rng))]), limits: .unlimited) }
        var members: [SnapshotIdentifier: [SnapshotIdentifier]] = [:]
        for id in itemIDs {
            let section = sectionIDs.randomElement(using: &rng)!
            let candidates = (members[section] ?? []).filter { s.level(of: $0)! < maxDepth - 1 }
            let element = SnapshotElement(id, payload: payload(&rng))
            if !candidates.isEmpty, chance(65) {
                try! s.apply(.appendChildren([element], toParent: candidates.randomElement(using: &rng)!), limits: .unlimited)
            } else {
                try! s.apply(.appendItems([element], toSection: section), limits: .unlimited)
            }
            members[section, default: []].append(id)
        }
        return s
    }

    /// Flat operations (as `operation(in:)` draws them) mixed with `appendChildren` and
    /// `moveItemToParent`, often under or onto the item's own subtree.
    mutating func outlineOperation(in model: ReferenceModel) -> SnapshotOperation {
        switch Int.random(in: 0..<100, using: &rng) {
        case 0..<18: return .appendChildren(newItems(in: model), toParent: item(in: model))
        case 18..<34:
            let moved = item(in: model)
            // Its own descendants now and then, to hit moveIntoOwnSubtree.
            if chance(25), let (s, i) = model.itemPath(moved) {
                let end = model.sections[s].subtreeEnd(i)
                return .moveItemToParent(moved, parent: model.sections[s].items[Int.random(in: i..<end, using: &rng)].id)
            }
            return .moveItemToParent(moved, parent: item(in: model))
        case 34..<42:
            let moved = item(in: model)
            if chance(40), let (s, i) = model.itemPath(moved), sectionHasDescendant(model, s, i) {
                let end = model.sections[s].subtreeEnd(i)
                return .moveItem(moved, placement(model.sections[s].items[Int.random(in: (i + 1)..<end, using: &rng)].id))
            }
            return .moveItem(moved, placement(item(in: model)))
        default: return operation(in: model)
        }
    }

    private func sectionHasDescendant(_ model: ReferenceModel, _ s: Int, _ i: Int) -> Bool { model.sections[s].subtreeEnd(i) > i + 1 }

    /// A batch of 1 to 3 outline operations, drawn against the model as it evolves.
    mutating func outlineBatch(for model: ReferenceModel, limits: SnapshotLimits) -> [SnapshotOperation] {
        var evolving = model
        var ops: [SnapshotOperation] = []
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let op = outlineOperation(in: evolving)
            ops.append(op)
            try? evolving.apply([op], limits: limits)
        }
        return ops
    }
}

/// The deepest level of a snapshot (0 when flat or empty).
func deepestLevel(_ s: RoomSnapshot) -> Int { s.itemLevels.max() ?? 0 }

/// Items of `a` that keep their identity: in `b`, and in a section that survives (items of a
/// deleted section are inserted again; a survivor under a deleted parent is moved out of it).
/// Computed from the public queries only.
func survivors(_ a: RoomSnapshot, _ b: RoomSnapshot) -> Set<SnapshotIdentifier> {
    let bSections = Set(b.sectionIdentifiers)
    return Set(a.itemIdentifiers.filter { b.contains(item: $0) && bSections.contains(a.sectionIdentifier(containingItem: $0)!) })
}

/// `a` after the rescues a diff to `b` makes before its deletes, and how many: each survivor
/// whose parent does not survive moved right after its topmost non-surviving ancestor, the
/// deepest first (so that those after one ancestor end in `a`'s order), applied with the public
/// `apply`.
func rescued(_ a: RoomSnapshot, _ b: RoomSnapshot) -> (state: RoomSnapshot, moves: Int) {
    let alive = survivors(a, b)
    var state = a
    var moves = 0
    for id in a.itemIdentifiers.reversed() where alive.contains(id) {
        guard var top = a.parent(of: id), !alive.contains(top) else { continue }
        while let up = a.parent(of: top), !alive.contains(up) { top = up }
        try! state.apply([.moveItem(id, .after(top))], limits: .unlimited)
        moves += 1
    }
    return (state, moves)
}

/// The fewest single-subtree moves that turn `a` into `b` for a batch that deletes gone sections
/// first and rescues survivors from gone items before deleting those (`rescued`): the rescues,
/// then, from the rescued state, for each sibling group of `b` (a section's roots, an item's
/// children), the survivors that were already in that group, less a longest run of them that
/// kept its order, plus every survivor that changed group.
func minimalForestMoves(_ a: RoomSnapshot, _ b: RoomSnapshot) -> (sections: Int, items: Int) {
    let aSections = a.sectionIdentifiers
    let common = b.sectionIdentifiers.compactMap { aSections.firstIndex(of: $0) }
    let alive = survivors(a, b)
    let (start, rescues) = rescued(a, b)
    let order = Dictionary(uniqueKeysWithValues: start.itemIdentifiers.enumerated().map { ($1, $0) })
    var moves = rescues
    func count(_ group: [SnapshotIdentifier], stays: (SnapshotIdentifier) -> Bool) {
        var staying: [Int] = []
        for id in group where alive.contains(id) {
            if stays(id) { staying.append(order[id]!) } else { moves += 1 }
        }
        moves += staying.count - lisLength(staying)
    }
    for section in b.sectionIdentifiers {
        count(b.rootItems(inSection: section)!) { start.parent(of: $0) == nil && start.sectionIdentifier(containingItem: $0) == section }
    }
    for parent in b.itemIdentifiers {
        count(b.children(of: parent)!) { start.parent(of: $0) == parent }
    }
    return (common.count - lisLength(common), moves)
}
