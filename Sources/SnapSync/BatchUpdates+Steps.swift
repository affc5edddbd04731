/// The calls a collection or table view's batch update makes for one change, in order: what the
/// UIKit and AppKit adapters (`CollectionViewAdapters+*.swift`) replay one by one. They compile
/// only on Apple platforms; this, their logic, compiles and is tested everywhere.
extension BatchUpdates {
    /// One call inside `performBatchUpdates`.
    public enum Step: Hashable, Sendable {
        case deleteSections([Int])
        case insertSections([Int])
        case moveSection(from: Int, to: Int)
        case reloadSections([Int])
        case deleteItems([ItemIndexPath])
        case insertItems([ItemIndexPath])
        case moveItem(from: ItemIndexPath, to: ItemIndexPath)
        case reloadItems([ItemIndexPath])
    }

    /// The calls to make inside one `performBatchUpdates`, empty lists left out. UIKit reads
    /// every call of a batch as one set (old positions for deletes, reloads and move sources, new
    /// ones for inserts and move destinations), so the order only has to be UIKit's usual one.
    /// After the batch, reconfigure `reconfiguredItemsAfterUpdate`. O(size of the lists)
    public var steps: [Step] {
        var steps: [Step] = []
        if !deletedSections.isEmpty { steps.append(.deleteSections(deletedSections)) }
        if !insertedSections.isEmpty { steps.append(.insertSections(insertedSections)) }
        for move in movedSections { steps.append(.moveSection(from: move.from, to: move.to)) }
        if !reloadedSections.isEmpty { steps.append(.reloadSections(reloadedSections)) }
        if !deletedItems.isEmpty { steps.append(.deleteItems(deletedItems)) }
        if !insertedItems.isEmpty { steps.append(.insertItems(insertedItems)) }
        for move in movedItems { steps.append(.moveItem(from: move.from, to: move.to)) }
        if !reloadedItems.isEmpty { steps.append(.reloadItems(reloadedItems)) }
        return steps
    }
}
