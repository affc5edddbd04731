/// One change of a room, resolved to the positions a `UICollectionView` / `UITableView` batch
/// update takes, with UIKit's conventions:
///
/// - `deletedSections`, `deletedItems`, `reloadedSections`, `reloadedItems`, `reconfiguredItems`
///   and every move's `from` are positions in the **old** snapshot;
/// - `insertedSections`, `insertedItems`, `reconfiguredItemsAfterUpdate` and every move's `to`
///   are positions in the **new** snapshot.
///
/// The lists are safe to hand to one `performBatchUpdates` as they are:
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
/// ## Reloads and moves
///
/// UIKit performs a reload inside a batch as a delete at the old position plus an insert at that
/// position shifted by the batch's deletes and inserts, **ignoring its moves**; where a move
/// shifts the item, that insert collides with a move or an insert, falls past the end of the
/// section, or refreshes another cell, and UIKit throws or misdraws. So the rule is:
/// - `reloadedSections` is empty whenever a section moves: a changed section is then a delete
///   plus an insert;
/// - an item stays in `reloadedItems` only when no section moves and no item moves into, out of
///   or within its section; otherwise it is a delete plus an insert (its cell is replaced, as a
///   reload would);
/// - a section or item that both moves and is reloaded is a delete plus an insert;
/// - a reconfigure is not part of the batch: a reconfigured item may move (its cell travels and
///   is kept), and `reconfigureItems(at:)` is called after the batch, at
///   `reconfiguredItemsAfterUpdate`. `reconfiguredItems` names the same items at their old paths,
///   for information only.
///
/// The lists never contain what else UIKit refuses in one batch (IGListKit and DifferenceKit clean
/// up the same cases):
/// - no item changes inside a deleted, inserted or reloaded section: its items go and come with
///   it (an item that moves into such a section from elsewhere is a delete at its old position; one
///   that moves out of one is an insert at its new position);
/// - no section moves onto its own index (UIKit crashes when an item also leaves that section):
///   such a section is a delete plus an insert;
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
    public var movedSections: [BatchUpdates.Move<Int>] = []
    /// Old section indexes of sections whose payload changed (`reloadSections`); empty when a
    /// section moves (see "Reloads and moves").
    public var reloadedSections: [Int] = []
    /// Old index paths of items removed from surviving sections.
    public var deletedItems: [ItemIndexPath] = []
    /// New index paths of items added to surviving sections.
    public var insertedItems: [ItemIndexPath] = []
    /// Items that changed place (possibly across sections): old → new index path.
    public var movedItems: [BatchUpdates.Move<ItemIndexPath>] = []
    /// Old index paths of items whose content changed and whose cells should be replaced, for
    /// `reloadItems(at:)` inside the batch. Only items UIKit places where they end up (see
    /// "Reloads and moves"); other changed items are a delete plus an insert.
    public var reloadedItems: [ItemIndexPath] = []
    /// Old index paths of items whose content changed and whose cells should be kept. Such an
    /// item may also move; reconfigure it after the batch, at `reconfiguredItemsAfterUpdate`.
    public var reconfiguredItems: [ItemIndexPath] = []
    /// The same items as `reconfiguredItems`, at their new index paths: for calling
    /// `reconfigureItems(at:)` after the batch update has run.
    public var reconfiguredItemsAfterUpdate: [ItemIndexPath] = []

    /// Every item present before and after whose content changed and should be reloaded, wherever
    /// it went (also those reported above as a delete plus an insert): for
    /// `NSDiffableDataSourceSnapshot.reloadItems(_:)`. Sorted by identifier.
    public var reloadedItemIdentifiers: [SnapshotIdentifier] = []
    /// Likewise for items to reconfigure (`reconfigureItems(_:)`).
    public var reconfiguredItemIdentifiers: [SnapshotIdentifier] = []
    /// Every section present before and after whose payload changed (`reloadSections(_:)`).
    public var reloadedSectionIdentifiers: [SnapshotIdentifier] = []

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
