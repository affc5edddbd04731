/// What `NSDiffableDataSourceSectionSnapshot` needs to show one section of a change: the
/// section's items with their hierarchy, this viewer's expanded items, and the items to reload
/// or reconfigure. The UIKit adapter (`apply(_:to:)`) builds the section snapshot from it; this,
/// its logic, compiles and is tested everywhere.
///
/// Unlike `DiffableUpdate`, which lists the visible rows flat, a section snapshot holds **every**
/// item of the section, hidden ones included, and UIKit shows the rows under expanded items and
/// draws the disclosure itself: the rows it shows are `RoomChange.visibleSnapshot`'s for that
/// section, so the replica's lookups (which count visible rows) agree with it.
public struct DiffableSectionUpdate: Hashable, Sendable {
    public var section: SnapshotIdentifier
    /// The section's items in depth-first order, as runs of consecutive siblings:
    /// `append(items, to: parent)` run after run builds the hierarchy (nil: roots).
    public var runs: [Run]
    /// The items with children this viewer has expanded (`RoomChange.expansion`), in
    /// depth-first order: `expand(_:)` on the section snapshot.
    public var expandedItems: [SnapshotIdentifier]
    /// Visible rows whose content changed, to show with a fresh cell.
    public var reloadedItems: [SnapshotIdentifier]
    /// Visible rows whose content (or level, children, expansion) changed, to show in the same
    /// cell.
    public var reconfiguredItems: [SnapshotIdentifier]

    /// Consecutive siblings: children of `parent`, or roots when it is nil.
    public struct Run: Hashable, Sendable {
        public var parent: SnapshotIdentifier?
        public var items: [SnapshotIdentifier]
    }

    /// The update of `section` for `change`; nil when the change's snapshot has no such
    /// section. O(items in the section).
    public init?(_ change: RoomChange, section: SnapshotIdentifier) {
        let snapshot = change.snapshot
        guard let items = snapshot.itemIdentifiers(inSection: section) else { return nil }
        self.section = section
        runs = []
        expandedItems = []
        for item in items {
            let parent = snapshot.parent(of: item)
            // In depth-first order an item with children is followed by its first child, so the
            // last run holds this item's previous sibling exactly when it has the same parent.
            if let last = runs.last, last.parent == parent {
                runs[runs.count - 1].items.append(item)
            } else {
                runs.append(Run(parent: parent, items: [item]))
            }
            if change.expansion.isExpanded(item), !(snapshot.children(of: item)?.isEmpty ?? true) { expandedItems.append(item) }
        }
        let rows = Set(change.visibleSnapshot.itemIdentifiers(inSection: section) ?? [])
        reloadedItems = change.updates.reloadedItemIdentifiers.filter { rows.contains($0) }
        let reloaded = Set(reloadedItems)
        reconfiguredItems = change.updates.reconfiguredItemIdentifiers.filter { rows.contains($0) && !reloaded.contains($0) }
    }

    /// The rows a section snapshot built from this update shows, as UIKit computes them: every
    /// root, and the children of an item shown and expanded. O(items)
    public var visibleItems: [SnapshotIdentifier] {
        var parentOf: [SnapshotIdentifier: SnapshotIdentifier] = [:]
        var ordered: [SnapshotIdentifier] = []
        for run in runs {
            for item in run.items {
                ordered.append(item)
                if let parent = run.parent { parentOf[item] = parent }
            }
        }
        let expanded = Set(expandedItems)
        var shown = Set<SnapshotIdentifier>()
        var rows: [SnapshotIdentifier] = []
        for item in ordered {
            if let parent = parentOf[item], !(shown.contains(parent) && expanded.contains(parent)) { continue }
            shown.insert(item)
            rows.append(item)
        }
        return rows
    }
}
