/// What a diffable data source needs for one change: the rows' layout by identifier, and which
/// sections and items to reload or reconfigure. The UIKit and AppKit adapters build an
/// `NSDiffableDataSourceSnapshot` from it and apply it; this, their logic, compiles and is
/// tested everywhere.
///
/// The layout is the change's **visible rows** (`RoomChange.visibleSnapshot`): for an outline
/// room, the items under a collapsed item (this viewer's `RoomReplica.expansion`) are not listed,
/// so the diffable snapshot counts the rows that `RoomReplica`'s lookups (`indexPath(for:)`,
/// `itemIdentifier(for:)`, `numberOfItems(inSection:)`) count, and an `.expansion` change shows
/// the rows that appear or go. A list draws each row's indentation from `level(of:)`. To let
/// UIKit own the hierarchy and the disclosure instead, use section snapshots
/// (`DiffableSectionUpdate`, `apply(_:to:)`). For a flat room the rows are the snapshot.
///
/// The diffable data source computes its own batch from the two layouts, so it needs no index
/// paths; it does refuse to reload or reconfigure an identifier that is not in the new
/// snapshot, so every list here names only identifiers that are (an item that changed and then
/// left is simply gone).
public struct DiffableUpdate: Hashable, Sendable {
    /// The sections in order, each with its visible rows' items in order.
    public var sections: [(section: SnapshotIdentifier, items: [SnapshotIdentifier])]
    /// Sections present before and after whose payload changed (`reloadSections`).
    public var reloadedSections: [SnapshotIdentifier]
    /// Items present before and after whose content changed, to show with a fresh cell.
    public var reloadedItems: [SnapshotIdentifier]
    /// Items present before and after whose content changed, to show in the same cell.
    public var reconfiguredItems: [SnapshotIdentifier]

    /// The update for `change`: its visible rows. O(n) in the rows.
    public init(_ change: RoomChange) {
        let snapshot = change.visibleSnapshot
        sections = snapshot.sections.map { section in (section.id, snapshot.itemIdentifiers(inSection: section.id) ?? []) }
        reloadedSections = change.updates.reloadedSectionIdentifiers.filter { snapshot.contains(section: $0) }
        reloadedItems = change.updates.reloadedItemIdentifiers.filter { snapshot.contains(item: $0) }
        // An item both reloaded and reconfigured (a catch-up can do both) gets the fresh cell.
        let reloaded = Set(reloadedItems)
        reconfiguredItems = change.updates.reconfiguredItemIdentifiers.filter { snapshot.contains(item: $0) && !reloaded.contains($0) }
    }

    public static func == (lhs: DiffableUpdate, rhs: DiffableUpdate) -> Bool {
        lhs.sections.elementsEqual(rhs.sections) { $0.section == $1.section && $0.items == $1.items }
            && lhs.reloadedSections == rhs.reloadedSections && lhs.reloadedItems == rhs.reloadedItems
            && lhs.reconfiguredItems == rhs.reconfiguredItems
    }

    public func hash(into hasher: inout Hasher) {
        for (section, items) in sections {
            hasher.combine(section)
            hasher.combine(items)
        }
        hasher.combine(reloadedSections)
        hasher.combine(reloadedItems)
        hasher.combine(reconfiguredItems)
    }
}
