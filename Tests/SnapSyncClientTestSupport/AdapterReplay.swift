package import SnapSync
package import Testing

/// Replays what the UIKit adapter (`UICollectionView.apply(_:updateModel:)`) calls, step by step,
/// as a recording collection view would, into the lists UIKit then processes as one batch, and
/// checks them with `expectReplays`; then the reconfigures it calls after the batch. A list
/// named by two steps, or a step UIKit would take for another, shows as a difference from the
/// change's own `updates`.
package func expectAdapterReplays(
    _ change: RoomChange, from old: RoomSnapshot, _ comment: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
) {
    var recorded = BatchUpdates()
    for step in change.updates.steps {
        switch step {
        case .deleteSections(let list): recorded.deletedSections += list
        case .insertSections(let list): recorded.insertedSections += list
        case .moveSection(let from, let to): recorded.movedSections.append(BatchUpdates.Move(from: from, to: to))
        case .reloadSections(let list): recorded.reloadedSections += list
        case .deleteItems(let list): recorded.deletedItems += list
        case .insertItems(let list): recorded.insertedItems += list
        case .moveItem(let from, let to): recorded.movedItems.append(BatchUpdates.Move(from: from, to: to))
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
/// its layout is the change's visible rows (what the replica's lookups count), and every item or
/// section whose content changed and stayed a row is reloaded or reconfigured. `old` is the
/// previous change's visible rows. Then, for every section, the `DiffableSectionUpdate`: its
/// runs rebuild the section's items and hierarchy exactly, its expanded items are the viewer's,
/// and the rows a section snapshot built from it shows (as UIKit computes them) are the change's
/// visible rows of that section.
package func expectDiffableUpdate(
    _ change: RoomChange, from old: RoomSnapshot, _ comment: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
) {
    let update = DiffableUpdate(change)
    let new = change.visibleSnapshot
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
    for section in change.snapshot.sectionIdentifiers {
        guard let sectionUpdate = DiffableSectionUpdate(change, section: section) else {
            Issue.record("no section update for \(section)\n\(comment())", sourceLocation: sourceLocation)
            continue
        }
        let all = change.snapshot.itemIdentifiers(inSection: section)!
        #expect(sectionUpdate.runs.flatMap(\.items) == all, "section \(section): every item, in order\n\(comment())", sourceLocation: sourceLocation)
        for run in sectionUpdate.runs {
            #expect(!run.items.isEmpty, sourceLocation: sourceLocation)
            for item in run.items {
                #expect(change.snapshot.parent(of: item) == run.parent, "section \(section): parent of \(item)\n\(comment())", sourceLocation: sourceLocation)
            }
        }
        #expect(
            sectionUpdate.expandedItems == all.filter { change.expansion.isExpanded($0) && !(change.snapshot.children(of: $0)?.isEmpty ?? true) },
            "section \(section): expanded items\n\(comment())", sourceLocation: sourceLocation)
        #expect(
            sectionUpdate.visibleItems == (new.itemIdentifiers(inSection: section) ?? []),
            "section \(section): the section snapshot's rows are the visible rows\n\(comment())", sourceLocation: sourceLocation)
        #expect(
            Set(sectionUpdate.reloadedItems + sectionUpdate.reconfiguredItems).isSubset(of: Set(new.itemIdentifiers(inSection: section) ?? [])),
            "section \(section): refreshes only its rows\n\(comment())", sourceLocation: sourceLocation)
    }
}

/// `positions` answers every lookup as `snapshot`'s brute-force walk does.
package func expectPositions(
    _ positions: SnapshotPositions, match snapshot: RoomSnapshot, _ comment: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
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
