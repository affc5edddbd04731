package import SnapSync
package import Testing

/// Replays `updates` on `old` the way `UICollectionView.performBatchUpdates` does, checking the
/// rules UIKit enforces with an exception, and returns the sections and items it ends up with.
/// Inserted and reloaded sections and inserted items take their content from `new`, as UIKit
/// asks the data source.
///
/// UIKit's model: deletes, reloads and move sources are old positions, processed as if all at
/// once against the old state; inserts and move destinations are final positions, processed in
/// ascending order; everything not named keeps its relative order.
package func replayAsUIKit(_ updates: BatchUpdates, on old: Snapshot, dataSource new: Snapshot) throws -> [(Identifier, [Identifier])] {
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
    try check(movedFrom.count == updates.movedSections.count && movedTo.count == updates.movedSections.count, "a section moves twice")
    try check(
        deletedSections.isDisjoint(with: movedFrom) && deletedSections.isDisjoint(with: reloadedSections)
            && reloadedSections.isDisjoint(with: movedFrom), "a section is deleted, moved or reloaded at once")
    try check(insertedSections.isDisjoint(with: movedTo), "a section is inserted and moved to at once")
    try check((deletedSections.union(movedFrom).union(reloadedSections)).allSatisfy { oldLayout.indices.contains($0) }, "old section index out of range")
    try check((insertedSections.union(movedTo)).allSatisfy { newLayout.indices.contains($0) }, "new section index out of range")

    // Item rules.
    let deletedItems = Set(updates.deletedItems), movedItemsFrom = Set(updates.movedItems.map(\.from))
    let insertedItems = Set(updates.insertedItems), movedItemsTo = Set(updates.movedItems.map(\.to))
    let reloadedItems = Set(updates.reloadedItems + updates.reconfiguredItems)
    try check(deletedItems.count == updates.deletedItems.count && insertedItems.count == updates.insertedItems.count, "an item path appears twice")
    try check(movedItemsFrom.count == updates.movedItems.count && movedItemsTo.count == updates.movedItems.count, "an item moves twice")
    try check(reloadedItems.count == updates.reloadedItems.count + updates.reconfiguredItems.count, "an item is reloaded twice")
    try check(
        deletedItems.isDisjoint(with: movedItemsFrom) && reloadedItems.isDisjoint(with: deletedItems)
            && reloadedItems.isDisjoint(with: movedItemsFrom), "an item is deleted, moved or reloaded at once")
    try check(insertedItems.isDisjoint(with: movedItemsTo), "an item is inserted and moved to at once")
    let goneSections = deletedSections.union(reloadedSections)
    for path in deletedItems.union(movedItemsFrom).union(reloadedItems) {
        try check(oldLayout.indices.contains(path.section) && oldLayout[path.section].1.indices.contains(path.item), "old item path \(path) out of range")
        try check(!goneSections.contains(path.section), "item \(path) in a deleted or reloaded section is named")
    }
    let freshSections = insertedSections.union(
        reloadedSections.map { r in
            // A reloaded section stays in place; its final index is where its identifier is in `new`.
            new.indexOfSection(oldLayout[r].0) ?? -1
        })
    for path in insertedItems.union(movedItemsTo) {
        try check(newLayout.indices.contains(path.section) && newLayout[path.section].1.indices.contains(path.item), "new item path \(path) out of range")
        try check(!freshSections.contains(path.section), "item \(path) in an inserted or reloaded section is named")
    }

    // 1. Remove deleted and moving items (old paths), keeping the moving ones by old path.
    var carriedItems: [ItemIndexPath: Identifier] = [:]
    var sections: [(id: Identifier, items: [Identifier], reloaded: Bool, oldIndex: Int)] = []
    for (s, (id, items)) in oldLayout.enumerated() {
        var kept: [Identifier] = []
        for (i, item) in items.enumerated() {
            let path = ItemIndexPath(item: i, section: s)
            if movedItemsFrom.contains(path) { carriedItems[path] = item } else if !deletedItems.contains(path) { kept.append(item) }
        }
        sections.append((id, kept, reloadedSections.contains(s), s))
    }
    // 2. Remove deleted and moving sections.
    var carriedSections: [Int: (id: Identifier, items: [Identifier], reloaded: Bool, oldIndex: Int)] = [:]
    for section in sections where movedFrom.contains(section.oldIndex) { carriedSections[section.oldIndex] = section }
    sections.removeAll { deletedSections.contains($0.oldIndex) || movedFrom.contains($0.oldIndex) }
    // 3. Insert sections at their final indexes, ascending.
    let sectionMoves = Dictionary(uniqueKeysWithValues: updates.movedSections.map { ($0.to, $0.from) })
    for index in insertedSections.union(movedTo).sorted() {
        try check(index <= sections.count, "section insert at \(index) beyond the end (\(sections.count))")
        if let from = sectionMoves[index] {
            sections.insert(carriedSections[from]!, at: index)
        } else {
            sections.insert((newLayout[index].0, newLayout[index].1, false, -1), at: index)
        }
    }
    // 4. Reloaded sections take their content from the data source, at their final index.
    for index in sections.indices where sections[index].reloaded {
        try check(index < newLayout.count, "reloaded section lands beyond the end")
        sections[index].items = newLayout[index].1
    }
    // 5. Insert items at their final paths, ascending.
    let itemMoves = Dictionary(uniqueKeysWithValues: updates.movedItems.map { ($0.to, $0.from) })
    for path in insertedItems.union(movedItemsTo).sorted() {
        try check(sections.indices.contains(path.section), "item insert into missing section \(path)")
        try check(path.item <= sections[path.section].items.count, "item insert at \(path) beyond the end")
        let id = itemMoves[path].map { carriedItems[$0]! } ?? newLayout[path.section].1[path.item]
        sections[path.section].items.insert(id, at: path.item)
    }
    return sections.map { ($0.id, $0.items) }
}

/// Checks that `updates` take `old` to `new` as UIKit would replay them, and that every item
/// or section whose content changed gets a fresh cell.
package func expectReplays(
    _ updates: BatchUpdates, from old: Snapshot, to new: Snapshot, operations: [SnapshotOperation],
    _ comment: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
) {
    let layout: [(Identifier, [Identifier])]
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
        operations.flatMap { op -> [Identifier] in
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
            #expect(!moved.contains(path), "changed item \(item) is moved, not refreshed\n\(comment())", sourceLocation: sourceLocation)
            #expect(
                refreshed.contains(path) || discarded.contains(path) || goneSections.contains(s),
                "changed item \(item) at \(path) keeps its stale cell\n\(comment())\nupdates: \(updates)", sourceLocation: sourceLocation)
            #expect(
                updates.reloadedItemIdentifiers.contains(item) || updates.reconfiguredItemIdentifiers.contains(item),
                "changed item \(item) is not listed by identifier\n\(comment())", sourceLocation: sourceLocation)
        }
    }
    for (k, from) in updates.reconfiguredItems.enumerated() {
        let to = updates.reconfiguredItemsAfterUpdate[k]
        #expect(
            oldLayout[from.section].1[from.item] == expected[to.section].1[to.item],
            "reconfigured \(from) and \(to) are different items", sourceLocation: sourceLocation)
    }
    for (s, (id, _)) in oldLayout.enumerated() {
        guard let after = new.payload(ofSection: id), after != old.payload(ofSection: id) else { continue }
        #expect(
            updates.reloadedSections.contains(s) || updates.deletedSections.contains(s),
            "changed section \(id) keeps its stale header\n\(comment())", sourceLocation: sourceLocation)
    }
}
