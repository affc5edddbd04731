/// One change of a room, resolved to the positions a `UICollectionView` / `UITableView` batch
/// update takes, with UIKit's conventions:
///
/// - `deletedSections`, `deletedItems`, `reloadedSections`, `reloadedItems`, `reconfiguredItems`
///   and every move's `from` are positions in the **old** snapshot;
/// - `insertedSections`, `insertedItems`, `reconfiguredItemsAfterUpdate` and every move's `to`
///   are positions in the **new** snapshot.
///
/// So an app can hand them to `performBatchUpdates` as they are:
///
/// ```swift
/// collectionView.performBatchUpdates {
///     dataSource.snapshot = change.snapshot          // the model the data source answers from
///     collectionView.deleteSections(IndexSet(u.deletedSections))
///     collectionView.insertSections(IndexSet(u.insertedSections))
///     for m in u.movedSections { collectionView.moveSection(m.from, toSection: m.to) }
///     collectionView.reloadSections(IndexSet(u.reloadedSections))
///     collectionView.deleteItems(at: u.deletedItems.map(\.indexPath))
///     collectionView.insertItems(at: u.insertedItems.map(\.indexPath))
///     for m in u.movedItems { collectionView.moveItem(at: m.from.indexPath, to: m.to.indexPath) }
///     collectionView.reloadItems(at: u.reloadedItems.map(\.indexPath))
/// }
/// collectionView.reconfigureItems(at: u.reconfiguredItemsAfterUpdate.map(\.indexPath))
/// ```
///
/// Or, with a diffable data source, build its snapshot from `change.snapshot` and mark
/// `reloadedItemIdentifiers` / `reconfiguredItemIdentifiers` / `reloadedSectionIdentifiers`.
///
/// The lists never contain what UIKit refuses in one batch (IGListKit and DifferenceKit clean up
/// the same cases):
/// - no item changes inside a deleted, inserted or reloaded section: its items go and come with
///   it (an item that moves into such a section from elsewhere is a delete at its old position; one
///   that moves out of one is an insert at its new position);
/// - a section or item that both moves and changes content is a delete plus an insert, never a
///   move plus a reload;
/// - no position appears twice in the old-side lists, nor twice in the new-side lists.
///
/// Moves are minimal: the items (and sections) that stay are a longest run that kept its order,
/// so moving one item to the front is one move, not n. Every list is sorted ascending (moves by
/// `to`).
public struct BatchUpdates: Hashable, Sendable {
    /// Old section indexes of sections removed (with their items).
    public var deletedSections: [Int] = []
    /// New section indexes of sections added (with their items).
    public var insertedSections: [Int] = []
    /// Sections that kept their identity and content but changed place; their items travel with them.
    public var movedSections: [Move<Int>] = []
    /// Old section indexes of sections whose payload changed (`reloadSections`).
    public var reloadedSections: [Int] = []
    /// Old index paths of items removed from surviving sections.
    public var deletedItems: [ItemIndexPath] = []
    /// New index paths of items added to surviving sections.
    public var insertedItems: [ItemIndexPath] = []
    /// Items that changed place (possibly across sections): old → new index path.
    public var movedItems: [Move<ItemIndexPath>] = []
    /// Old index paths of items whose content changed and whose cells should be replaced.
    public var reloadedItems: [ItemIndexPath] = []
    /// Old index paths of items whose content changed and whose cells should be kept.
    public var reconfiguredItems: [ItemIndexPath] = []
    /// The same items as `reconfiguredItems`, at their new index paths: for calling
    /// `reconfigureItems(at:)` after the batch update has run.
    public var reconfiguredItemsAfterUpdate: [ItemIndexPath] = []

    /// Every item present before and after whose content changed and should be reloaded, wherever
    /// it went (also those reported above as a delete plus an insert): for
    /// `NSDiffableDataSourceSnapshot.reloadItems(_:)`. Sorted by identifier.
    public var reloadedItemIdentifiers: [Identifier] = []
    /// Likewise for items to reconfigure (`reconfigureItems(_:)`).
    public var reconfiguredItemIdentifiers: [Identifier] = []
    /// Every section present before and after whose payload changed (`reloadSections(_:)`).
    public var reloadedSectionIdentifiers: [Identifier] = []

    public init() {}

    /// True when the change moves, adds, removes and updates nothing.
    public var isEmpty: Bool {
        deletedSections.isEmpty && insertedSections.isEmpty && movedSections.isEmpty && reloadedSections.isEmpty
            && deletedItems.isEmpty && insertedItems.isEmpty && movedItems.isEmpty && reloadedItems.isEmpty
            && reconfiguredItems.isEmpty
    }
}

extension BatchUpdates: CustomStringConvertible {
    public var description: String {
        var parts: [String] = []
        func add<T>(_ name: String, _ list: [T]) {
            if !list.isEmpty { parts.append("\(name) \(list.map { "\($0)" }.joined(separator: " "))") }
        }
        add("-sections", deletedSections)
        add("+sections", insertedSections)
        add("~sections", movedSections)
        add("*sections", reloadedSections)
        add("-items", deletedItems)
        add("+items", insertedItems)
        add("~items", movedItems)
        add("*items", reloadedItems)
        add("°items", reconfiguredItems)
        return parts.isEmpty ? "no changes" : parts.joined(separator: "; ")
    }
}
