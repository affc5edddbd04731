/// What a diffable data source needs for one change: the new snapshot's layout by identifier,
/// and which sections and items to reload or reconfigure. The UIKit and AppKit adapters build an
/// `NSDiffableDataSourceSnapshot` from it and apply it; this, their logic, compiles and is
/// tested everywhere.
///
/// The diffable data source computes its own batch from the two layouts, so it needs no index
/// paths; it does refuse to reload or reconfigure an identifier that is not in the new
/// snapshot, so every list here names only identifiers that are (an item that changed and then
/// left is simply gone).
public struct DiffableUpdate: Hashable, Sendable {
    /// The sections in order, each with its items in order.
    public var sections: [(section: Identifier, items: [Identifier])]
    /// Sections present before and after whose payload changed (`reloadSections`).
    public var reloadedSections: [Identifier]
    /// Items present before and after whose content changed, to show with a fresh cell.
    public var reloadedItems: [Identifier]
    /// Items present before and after whose content changed, to show in the same cell.
    public var reconfiguredItems: [Identifier]

    /// The update for `change`. O(n) in the new snapshot.
    public init(_ change: RoomChange) {
        let snapshot = change.snapshot
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
