package import SnapSync
package import Testing

/// Replays what the UIKit adapter (`UICollectionView.apply(_:updateModel:)`) calls, step by step,
/// as a recording collection view would, into the lists UIKit then processes as one batch, and
/// checks them with `expectReplays`; then the reconfigures it calls after the batch. A list
/// named by two steps, or a step UIKit would take for another, shows as a difference from the
/// change's own `updates`.
package func expectAdapterReplays(
    _ change: RoomChange, from old: Snapshot, _ comment: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
) {
    var recorded = BatchUpdates()
    for step in change.updates.steps {
        switch step {
        case .deleteSections(let list): recorded.deletedSections += list
        case .insertSections(let list): recorded.insertedSections += list
        case .moveSection(let from, let to): recorded.movedSections.append(Move(from: from, to: to))
        case .reloadSections(let list): recorded.reloadedSections += list
        case .deleteItems(let list): recorded.deletedItems += list
        case .insertItems(let list): recorded.insertedItems += list
        case .moveItem(let from, let to): recorded.movedItems.append(Move(from: from, to: to))
        case .reloadItems(let list): recorded.reloadedItems += list
        }
    }
    // The adapter reconfigures after the batch, at the new paths; the old ones inform only.
    recorded.reconfiguredItems = change.updates.reconfiguredItems
    recorded.reconfiguredItemsAfterUpdate = change.updates.reconfiguredItemsAfterUpdate
    recorded.reloadedItemIdentifiers = change.updates.reloadedItemIdentifiers
    recorded.reconfiguredItemIdentifiers = change.updates.reconfiguredItemIdentifiers
    recorded.reloadedSectionIdentifiers = change.updates.reloadedSectionIdentifiers
    #expect(recorded == change.updates, "the steps are the updates\n\(comment())", sourceLocation: sourceLocation)
    expectReplays(recorded, from: old, to: change.snapshot, operations: change.operations, comment(), sourceLocation: sourceLocation)
}

/// Checks a `DiffableUpdate` against what `NSDiffableDataSourceSnapshot` refuses (an identifier
/// twice; a reload or reconfigure of an identifier it does not hold) and against the change:
/// its layout is the new snapshot's, and every item or section whose content changed and
/// stayed is reloaded or reconfigured.
package func expectDiffableUpdate(
    _ change: RoomChange, from old: Snapshot, _ comment: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
) {
    let update = DiffableUpdate(change)
    let new = change.snapshot
    let sections = update.sections.map(\.section), items = update.sections.flatMap(\.items)
    #expect(sections == new.sectionIdentifiers && items == new.itemIdentifiers, "layout\n\(comment())", sourceLocation: sourceLocation)
    #expect(Set(sections).count == sections.count && Set(items).count == items.count, "no identifier twice\n\(comment())", sourceLocation: sourceLocation)
    let held = Set(items), heldSections = Set(sections)
    let refreshed = Set(update.reloadedItems + update.reconfiguredItems)
    #expect(refreshed.isSubset(of: held), "reloads only items it holds\n\(comment())", sourceLocation: sourceLocation)
    #expect(Set(update.reloadedSections).isSubset(of: heldSections), "reloads only sections it holds\n\(comment())", sourceLocation: sourceLocation)
    #expect(
        Set(update.reloadedItems).isDisjoint(with: update.reconfiguredItems), "reload or reconfigure, not both\n\(comment())", sourceLocation: sourceLocation)
    for item in items where old.contains(item: item) && old.payload(ofItem: item) != new.payload(ofItem: item) {
        #expect(refreshed.contains(item), "changed item \(item) is refreshed\n\(comment())", sourceLocation: sourceLocation)
    }
    for section in sections where old.contains(section: section) && old.payload(ofSection: section) != new.payload(ofSection: section) {
        #expect(update.reloadedSections.contains(section), "changed section \(section) is reloaded\n\(comment())", sourceLocation: sourceLocation)
    }
}

/// `positions` answers every lookup as `snapshot`'s brute-force walk does.
package func expectPositions(
    _ positions: SnapshotPositions, match snapshot: Snapshot, _ comment: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
) {
    let sections = snapshot.sectionIdentifiers
    #expect(positions.numberOfSections == sections.count, "\(comment())", sourceLocation: sourceLocation)
    for (s, section) in sections.enumerated() {
        let items = snapshot.itemIdentifiers(inSection: section)!
        guard positions.sectionIdentifier(for: s) == section, positions.index(ofSection: section) == s,
            positions.numberOfItems(inSection: s) == items.count
        else {
            Issue.record("section \(s) (\(section)) is misplaced\n\(comment())", sourceLocation: sourceLocation)
            return
        }
        for (i, item) in items.enumerated() {
            let path = ItemIndexPath(item: i, section: s)
            guard positions.itemIdentifier(for: path) == item, positions.indexPath(for: item) == path else {
                Issue.record(
                    "item \(item) at \(path) is misplaced: \(positions.itemIdentifier(for: path).map { "\($0)" } ?? "nil"), \(positions.indexPath(for: item).map { "\($0)" } ?? "nil")\n\(comment())",
                    sourceLocation: sourceLocation)
                return
            }
        }
        #expect(positions.itemIdentifier(for: ItemIndexPath(item: items.count, section: s)) == nil, sourceLocation: sourceLocation)
    }
    #expect(positions.sectionIdentifier(for: sections.count) == nil && positions.sectionIdentifier(for: -1) == nil, sourceLocation: sourceLocation)
    #expect(positions.indexPath(for: "never-an-item") == nil, sourceLocation: sourceLocation)
}
