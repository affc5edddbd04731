// Thin UIKit adapters: each replays what `BatchUpdates.steps` or `DiffableUpdate` computed (both
// compiled and tested on every platform); nothing here decides anything.
#if canImport(UIKit) && !os(watchOS)
    public import UIKit

    extension UICollectionView {
        /// Shows `change` with one `performBatchUpdates`, then reconfigures the items whose
        /// content changed in place. `updateModel` runs inside the batch, before the updates:
        /// make the data source answer from `change.snapshot` there.
        @MainActor
        public func apply(_ change: RoomChange, updateModel: @escaping @MainActor () -> Void, completion: ((Bool) -> Void)? = nil) {
            performBatchUpdates(
                {
                    updateModel()
                    for step in change.updates.steps {
                        switch step {
                        case .deleteSections(let sections): deleteSections(IndexSet(sections))
                        case .insertSections(let sections): insertSections(IndexSet(sections))
                        case .moveSection(let from, let to): moveSection(from, toSection: to)
                        case .reloadSections(let sections): reloadSections(IndexSet(sections))
                        case .deleteItems(let paths): deleteItems(at: paths.map(\.indexPath))
                        case .insertItems(let paths): insertItems(at: paths.map(\.indexPath))
                        case .moveItem(let from, let to): moveItem(at: from.indexPath, to: to.indexPath)
                        case .reloadItems(let paths): reloadItems(at: paths.map(\.indexPath))
                        }
                    }
                }, completion: completion)
            let reconfigured = change.updates.reconfiguredItemsAfterUpdate
            if !reconfigured.isEmpty { reconfigureItems(at: reconfigured.map(\.indexPath)) }
        }
    }

    extension UICollectionViewDiffableDataSource where SectionIdentifierType == Identifier, ItemIdentifierType == Identifier {
        /// Shows `change`: its snapshot, with its reloads and reconfigures.
        @MainActor
        public func apply(_ change: RoomChange, animatingDifferences: Bool = true, completion: (() -> Void)? = nil) {
            let update = DiffableUpdate(change)
            var snapshot = NSDiffableDataSourceSnapshot<Identifier, Identifier>()
            for (section, items) in update.sections {
                snapshot.appendSections([section])
                snapshot.appendItems(items, toSection: section)
            }
            snapshot.reloadSections(update.reloadedSections)
            snapshot.reloadItems(update.reloadedItems)
            snapshot.reconfigureItems(update.reconfiguredItems)
            apply(snapshot, animatingDifferences: animatingDifferences && change.kind != .initial, completion: completion)
        }
    }
#endif
