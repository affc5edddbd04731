package import SnapSync
package import Testing

/// Replays `updates` on `old` the way `UICollectionView.performBatchUpdates` does, checking the
/// rules UIKit enforces with an exception, and returns the sections and items it ends up with.
/// Inserted sections and items take their content from `new`, as UIKit asks the data source.
///
/// UIKit's model: deletes, reloads and move sources are old positions, processed as if all at
/// once against the old state; inserts and move destinations are final positions, processed in
/// ascending order; everything not named keeps its relative order.
///
/// A reload is a delete at its old position plus an insert at that position shifted by the
/// batch's deletes and inserts, **ignoring its moves** (`reloadSpot`). So a reload whose spot is
/// also inserted into or moved to is refused ("attempt to perform an insert and a move to the
/// same index path"), one past the end of its section is refused, and one whose spot holds another
/// item refreshes the wrong cell, which this refuses too. A section move onto its own index is
/// refused (openradar 48941906). Reconfigures are not part of the batch: `reconfiguredItems` must
/// survive the batch (deleted or reloaded they are refused), `reconfiguredItemsAfterUpdate` must
/// name the same items after it.
package func replayAsUIKit(_ updates: BatchUpdates, on old: RoomSnapshot, dataSource new: RoomSnapshot) throws -> [(SnapshotIdentifier, [SnapshotIdentifier])] {
    struct Broken: Error, CustomStringConvertible { var description: String }
    func check(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw Broken(description: message()) }
    }
    let oldLayout = old.sectionIdentifiers.map { ($0, old.itemIdentifiers(inSection: $0)!) }
    let newLayout = new.sectionIdentifiers.map { ($0, new.itemIdentifiers(inSection: $0)!) }

    // Section rules.
    let deletedSections = Set(updates.deletedSections), reloadedSections = Set(updates.reloadedSections)
    let movedFrom = Set(updates.movedSections.map(\.from)), movedTo = Set(updates.movedSections.map(\.to))
    let insertedSections = Set(updates.insertedSections)
    try check(deletedSections.count == updates.deletedSections.count, "a section is deleted twice")
    try check(insertedSections.count == updates.insertedSections.count, "a section is inserted twice")
    try check(reloadedSections.count == updates.reloadedSections.count, "a section is reloaded twice")
    try check(movedFrom.count == updates.movedSections.count && movedTo.count == updates.movedSections.count, "a section moves twice")
    try check(updates.movedSections.allSatisfy { $0.from != $0.to }, "a section moves onto its own index")
    try check(deletedSections.isDisjoint(with: reloadedSections), "attempt to delete and reload the same section")
    try check(deletedSections.isDisjoint(with: movedFrom), "attempt to perform a delete and a move from the same section")
    try check(reloadedSections.isDisjoint(with: movedFrom), "attempt to reload and move the same section")
    try check(insertedSections.isDisjoint(with: movedTo), "attempt to perform an insert and a move to the same section")
    try check((deletedSections.union(movedFrom).union(reloadedSections)).allSatisfy { oldLayout.indices.contains($0) }, "old section index out of range")
    try check((insertedSections.union(movedTo)).allSatisfy { newLayout.indices.contains($0) }, "new section index out of range")

    // Where UIKit inserts each reloaded section: moves ignored.
    let sortedInsertedSections = insertedSections.sorted()
    func sectionSpot(_ s: Int) -> Int {
        reloadSpot(s, deleted: deletedSections, insertedAscending: sortedInsertedSections)
    }
    var sectionReloadSpots: [Int: Int] = [:]  // final index → old index
    for s in reloadedSections {
        let spot = sectionSpot(s)
        try check(!insertedSections.contains(spot), "reloaded section \(s) lands on inserted section \(spot)")
        try check(!movedTo.contains(spot), "attempt to perform an insert and a move to the same section (reload of \(s) lands on \(spot))")
        try check(sectionReloadSpots[spot] == nil, "two reloaded sections land on \(spot)")
        try check(newLayout.indices.contains(spot), "reloaded section \(s) lands at \(spot), past the end (\(newLayout.count))")
        try check(newLayout[spot].0 == oldLayout[s].0, "reloaded section \(oldLayout[s].0) lands on section \(newLayout[spot].0)")
        sectionReloadSpots[spot] = s
    }

    // Item rules.
    let deletedItems = Set(updates.deletedItems), movedItemsFrom = Set(updates.movedItems.map(\.from))
    let insertedItems = Set(updates.insertedItems), movedItemsTo = Set(updates.movedItems.map(\.to))
    let reloadedItems = Set(updates.reloadedItems), reconfiguredItems = Set(updates.reconfiguredItems)
    try check(deletedItems.count == updates.deletedItems.count && insertedItems.count == updates.insertedItems.count, "an item path appears twice")
    try check(movedItemsFrom.count == updates.movedItems.count && movedItemsTo.count == updates.movedItems.count, "an item moves twice")
    try check(reloadedItems.count == updates.reloadedItems.count, "an item is reloaded twice")
    try check(reconfiguredItems.count == updates.reconfiguredItems.count, "an item is reconfigured twice")
    try check(updates.reconfiguredItems.count == updates.reconfiguredItemsAfterUpdate.count, "reconfigured lists differ in length")
    try check(deletedItems.isDisjoint(with: movedItemsFrom), "attempt to perform a delete and a move from the same index path")
    try check(reloadedItems.isDisjoint(with: deletedItems), "attempt to delete and reload the same index path")
    try check(reloadedItems.isDisjoint(with: movedItemsFrom), "attempt to reload and move the same index path")
    try check(insertedItems.isDisjoint(with: movedItemsTo), "attempt to perform an insert and a move to the same index path")
    try check(
        reconfiguredItems.isDisjoint(with: deletedItems) && reconfiguredItems.isDisjoint(with: reloadedItems),
        "a reconfigured item is deleted or reloaded")
    let goneSections = deletedSections.union(reloadedSections)
    for path in deletedItems.union(movedItemsFrom).union(reloadedItems).union(reconfiguredItems) {
        try check(oldLayout.indices.contains(path.section) && oldLayout[path.section].1.indices.contains(path.item), "old item path \(path) out of range")
        try check(!goneSections.contains(path.section), "item \(path) in a deleted or reloaded section is named")
    }
    let freshSections = insertedSections.union(sectionReloadSpots.keys)
    for path in insertedItems.union(movedItemsTo).union(updates.reconfiguredItemsAfterUpdate) {
        try check(newLayout.indices.contains(path.section) && newLayout[path.section].1.indices.contains(path.item), "new item path \(path) out of range")
        try check(!freshSections.contains(path.section), "item \(path) in an inserted or reloaded section is named")
    }

    // Where UIKit inserts each reloaded item: its section placed like a reloaded section, its
    // index shifted by the deletes of its old section and the inserts of its new one, moves ignored.
    var deletedBySection: [Int: Set<Int>] = [:], insertedBySection: [Int: [Int]] = [:]
    for path in deletedItems { deletedBySection[path.section, default: []].insert(path.item) }
    for path in insertedItems.sorted() { insertedBySection[path.section, default: []].append(path.item) }
    var itemReloadSpots: [ItemIndexPath: ItemIndexPath] = [:]  // final path → old path
    for path in reloadedItems {
        let section = sectionSpot(path.section)
        let spot = ItemIndexPath(
            item: reloadSpot(path.item, deleted: deletedBySection[path.section] ?? [], insertedAscending: insertedBySection[section] ?? []),
            section: section)
        try check(!insertedItems.contains(spot), "reloaded item \(path) lands on inserted \(spot)")
        try check(!movedItemsTo.contains(spot), "attempt to perform an insert and a move to the same index path (reload of \(path) lands on \(spot))")
        try check(itemReloadSpots[spot] == nil, "two reloaded items land on \(spot)")
        try check(
            newLayout.indices.contains(spot.section) && newLayout[spot.section].1.indices.contains(spot.item),
            "reloaded item \(path) lands at \(spot), past the end of its section")
        let before = oldLayout[path.section].1[path.item], after = newLayout[spot.section].1[spot.item]
        try check(before == after, "reloaded item \(before) at \(path) lands on \(after) at \(spot)")
        itemReloadSpots[spot] = path
    }

    // 1. Remove deleted, reloaded and moving items (old paths), keeping the moving ones by old path.
    var carriedItems: [ItemIndexPath: SnapshotIdentifier] = [:]
    var sections: [(id: SnapshotIdentifier, items: [SnapshotIdentifier], oldIndex: Int)] = []
    for (s, (id, items)) in oldLayout.enumerated() {
        var kept: [SnapshotIdentifier] = []
        for (i, item) in items.enumerated() {
            let path = ItemIndexPath(item: i, section: s)
            if movedItemsFrom.contains(path) {
                carriedItems[path] = item
            } else if !deletedItems.contains(path) && !reloadedItems.contains(path) {
                kept.append(item)
            }
        }
        sections.append((id, kept, s))
    }
    // 2. Remove deleted, reloaded and moving sections.
    var carriedSections: [Int: (id: SnapshotIdentifier, items: [SnapshotIdentifier], oldIndex: Int)] = [:]
    for section in sections where movedFrom.contains(section.oldIndex) { carriedSections[section.oldIndex] = section }
    sections.removeAll { goneSections.contains($0.oldIndex) || movedFrom.contains($0.oldIndex) }
    // 3. Insert sections (inserted, moved, reloaded) at their final indexes, ascending.
    let sectionMoves = Dictionary(uniqueKeysWithValues: updates.movedSections.map { ($0.to, $0.from) })
    for index in insertedSections.union(movedTo).union(sectionReloadSpots.keys).sorted() {
        try check(index <= sections.count, "section insert at \(index) beyond the end (\(sections.count))")
        if let from = sectionMoves[index] {
            sections.insert(carriedSections[from]!, at: index)
        } else {
            try check(newLayout.indices.contains(index), "section insert at \(index) beyond the data source's sections")
            sections.insert((newLayout[index].0, newLayout[index].1, -1), at: index)
        }
    }
    // 4. Insert items (inserted, moved, reloaded) at their final paths, ascending.
    let itemMoves = Dictionary(uniqueKeysWithValues: updates.movedItems.map { ($0.to, $0.from) })
    for path in insertedItems.union(movedItemsTo).union(itemReloadSpots.keys).sorted() {
        try check(sections.indices.contains(path.section), "item insert into missing section \(path)")
        try check(path.item <= sections[path.section].items.count, "item insert at \(path) beyond the end")
        let id = itemMoves[path].map { carriedItems[$0]! } ?? newLayout[path.section].1[path.item]
        sections[path.section].items.insert(id, at: path.item)
    }
    // 5. UIKit's count check: every section holds what the data source says.
    try check(sections.count == newLayout.count, "invalid number of sections: \(sections.count), data source \(newLayout.count)")
    for (s, section) in sections.enumerated() {
        try check(
            section.items.count == newLayout[s].1.count,
            "invalid number of items in section \(s): \(section.items.count), data source \(newLayout[s].1.count)")
    }
    // Reconfigures run after the batch: each names one item on both sides.
    for (from, to) in zip(updates.reconfiguredItems, updates.reconfiguredItemsAfterUpdate) {
        try check(oldLayout[from.section].1[from.item] == newLayout[to.section].1[to.item], "reconfigured \(from) and \(to) are different items")
    }
    return sections.map { ($0.id, $0.items) }
}

/// The index UIKit gives a reload's insert: `index` less the deletes before it, then moved past
/// each insert at or before it, in ascending order. Moves are not counted.
package func reloadSpot(_ index: Int, deleted: Set<Int>, insertedAscending: [Int]) -> Int {
    var spot = index - deleted.filter { $0 < index }.count
    for inserted in insertedAscending where inserted <= spot { spot += 1 }
    return spot
}

/// Checks that `updates` take `old` to `new` as UIKit would replay them, and that every item
/// or section whose content changed gets a fresh cell.
package func expectReplays(
    _ updates: BatchUpdates, from old: RoomSnapshot, to new: RoomSnapshot, operations: [SnapshotOperation],
    _ comment: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
) {
    let layout: [(SnapshotIdentifier, [SnapshotIdentifier])]
    do {
        layout = try replayAsUIKit(updates, on: old, dataSource: new)
    } catch {
        Issue.record("UIKit would refuse: \(error)\n\(comment())\nupdates: \(updates)", sourceLocation: sourceLocation)
        return
    }
    let expected = new.sectionIdentifiers.map { ($0, new.itemIdentifiers(inSection: $0)!) }
    let same = layout.count == expected.count && zip(layout, expected).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    #expect(same, "replay gives \(layout), expected \(expected)\n\(comment())\nupdates: \(updates)", sourceLocation: sourceLocation)

    // Content: a changed item is reloaded/reconfigured in place, or its old cell goes away.
    let oldLayout = old.sectionIdentifiers.map { ($0, old.itemIdentifiers(inSection: $0)!) }
    let namedItems = Set(
        operations.flatMap { op -> [SnapshotIdentifier] in
            if case .updateItems(let elements, _) = op { return elements.map(\.id) }
            return []
        })
    let refreshed = Set(updates.reloadedItems + updates.reconfiguredItems)
    let discarded = Set(updates.deletedItems)
    let goneSections = Set(updates.deletedSections + updates.reloadedSections)
    let moved = Set(updates.movedItems.map(\.from))
    for (s, (_, items)) in oldLayout.enumerated() {
        for (i, item) in items.enumerated() {
            guard let after = new.payload(ofItem: item) else { continue }
            let changed = old.payload(ofItem: item) != after || namedItems.contains(item)
            guard changed else { continue }
            let path = ItemIndexPath(item: i, section: s)
            #expect(
                !moved.contains(path) || updates.reconfiguredItems.contains(path),
                "changed item \(item) is moved, not refreshed\n\(comment())", sourceLocation: sourceLocation)
            #expect(
                refreshed.contains(path) || discarded.contains(path) || goneSections.contains(s),
                "changed item \(item) at \(path) keeps its stale cell\n\(comment())\nupdates: \(updates)", sourceLocation: sourceLocation)
            #expect(
                updates.reloadedItemIdentifiers.contains(item) || updates.reconfiguredItemIdentifiers.contains(item),
                "changed item \(item) is not listed by identifier\n\(comment())", sourceLocation: sourceLocation)
        }
    }
    for (s, (id, _)) in oldLayout.enumerated() {
        guard let after = new.payload(ofSection: id), after != old.payload(ofSection: id) else { continue }
        #expect(
            updates.reloadedSections.contains(s) || updates.deletedSections.contains(s),
            "changed section \(id) keeps its stale header\n\(comment())", sourceLocation: sourceLocation)
    }
}
