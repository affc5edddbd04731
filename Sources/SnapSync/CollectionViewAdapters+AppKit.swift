// Thin AppKit adapters: each replays what `BatchUpdates.steps` or `DiffableUpdate` computed (both
// compiled and tested on every platform); nothing here decides anything.
#if canImport(AppKit) && !targetEnvironment(macCatalyst)
    public import AppKit

    extension NSCollectionView {
        /// Shows `change` with one `performBatchUpdates`, then reloads the items whose content
        /// changed in place (AppKit has no reconfigure). `updateModel` runs inside the batch,
        /// before the updates: make the data source answer from `change.snapshot` there.
        @MainActor
        public func apply(_ change: RoomChange, updateModel: @escaping @MainActor () -> Void, completion: ((Bool) -> Void)? = nil) {
            func paths(_ list: [ItemIndexPath]) -> Set<IndexPath> { Set(list.map(\.indexPath)) }
            performBatchUpdates(
                {
                    updateModel()
                    for step in change.updates.steps {
                        switch step {
                        case .deleteSections(let sections): deleteSections(IndexSet(sections))
                        case .insertSections(let sections): insertSections(IndexSet(sections))
                        case .moveSection(let from, let to): moveSection(from, toSection: to)
                        case .reloadSections(let sections): reloadSections(IndexSet(sections))
                        case .deleteItems(let list): deleteItems(at: paths(list))
                        case .insertItems(let list): insertItems(at: paths(list))
                        case .moveItem(let from, let to): moveItem(at: from.indexPath, to: to.indexPath)
                        case .reloadItems(let list): reloadItems(at: paths(list))
                        }
                    }
                }, completionHandler: completion)
            let reconfigured = change.updates.reconfiguredItemsAfterUpdate
            if !reconfigured.isEmpty { reloadItems(at: paths(reconfigured)) }
        }
    }

    extension NSCollectionViewDiffableDataSource where SectionIdentifierType == SnapshotIdentifier, ItemIdentifierType == SnapshotIdentifier {
        /// Shows `change`: its snapshot, with its reloads and reconfigures.
        @MainActor
        public func apply(_ change: RoomChange, animatingDifferences: Bool = true) {
            let update = DiffableUpdate(change)
            var snapshot = NSDiffableDataSourceSnapshot<SnapshotIdentifier, SnapshotIdentifier>()
            for (section, items) in update.sections {
                snapshot.appendSections([section])
                snapshot.appendItems(items, toSection: section)
            }
            snapshot.reloadSections(update.reloadedSections)
            snapshot.reloadItems(update.reloadedItems)
            snapshot.reconfigureItems(update.reconfiguredItems)
            apply(snapshot, animatingDifferences: animatingDifferences && change.kind != .initial)
        }
    }
#endif
