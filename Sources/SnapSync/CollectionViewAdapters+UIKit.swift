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

    extension UICollectionViewDiffableDataSource where SectionIdentifierType == SnapshotIdentifier, ItemIdentifierType == SnapshotIdentifier {
        /// Shows `change`: its snapshot, with its reloads and reconfigures.
        @MainActor
        public func apply(_ change: RoomChange, animatingDifferences: Bool = true, completion: (() -> Void)? = nil) {
            let update = DiffableUpdate(change)
            var snapshot = NSDiffableDataSourceSnapshot<SnapshotIdentifier, SnapshotIdentifier>()
            for (section, items) in update.sections {
                snapshot.appendSections([section])
                snapshot.appendItems(items, toSection: section)
            }
            snapshot.reloadSections(update.reloadedSections)
            snapshot.reloadItems(update.reloadedItems)
            snapshot.reconfigureItems(update.reconfiguredItems)
            apply(snapshot, animatingDifferences: animatingDifferences && change.kind != .initial, completion: completion)
        }

        /// Shows one section of an outline room's `change` through a section snapshot: every
        /// item of the section with its hierarchy, this viewer's expanded items
        /// (`RoomReplica.expansion`), then its reloads and reconfigures. UIKit shows the rows
        /// under expanded items and draws the disclosure; they are the rows the replica's
        /// lookups count. Does nothing when the change has no such section.
        @MainActor
        public func apply(_ change: RoomChange, to section: SnapshotIdentifier, animatingDifferences: Bool = true, completion: (() -> Void)? = nil) {
            guard let update = DiffableSectionUpdate(change, section: section) else {
                completion?()
                return
            }
            var sectionSnapshot = NSDiffableDataSourceSectionSnapshot<SnapshotIdentifier>()
            for run in update.runs { sectionSnapshot.append(run.items, to: run.parent) }
            sectionSnapshot.expand(update.expandedItems)
            let animated = animatingDifferences && change.kind != .initial
            guard !update.reloadedItems.isEmpty || !update.reconfiguredItems.isEmpty else {
                apply(sectionSnapshot, to: section, animatingDifferences: animated, completion: completion)
                return
            }
            // A section snapshot carries no reloads: they go in a second apply, of the data
            // source's snapshot, which already holds the section's new items (an apply on the
            // main queue updates it before it returns).
            apply(sectionSnapshot, to: section, animatingDifferences: animated)
            var refreshed = self.snapshot()
            refreshed.reloadItems(update.reloadedItems)
            refreshed.reconfigureItems(update.reconfiguredItems)
            apply(refreshed, animatingDifferences: animated, completion: completion)
        }
    }

    extension NSDiffableDataSourceSectionSnapshot where ItemIdentifierType == SnapshotIdentifier {
        /// The section snapshot of `section` (its items and hierarchy) with the items of
        /// `expansion` expanded: what UIKit shows of it.
        public init(_ section: SectionSnapshot, expansion: OutlineExpansion = OutlineExpansion()) {
            self.init()
            for item in section.items {
                append([item], to: section.parent(of: item))
                if expansion.isExpanded(item) { expand([item]) }
            }
        }
    }

    /// A list's prefetching data source that extends a windowed replica's window as the list
    /// scrolls towards its ends: set it as the collection (or table) view's
    /// `prefetchDataSource`, and keep a reference (UIKit holds it weakly). What it decides is
    /// `WindowPrefetcher`'s; call `prefetcher.displaying(_:)` from `willDisplay` too, since UIKit
    /// does not prefetch when it scrolls slowly or the window holds few rows.
    @MainActor
    public final class WindowPrefetchingDataSource: NSObject, UICollectionViewDataSourcePrefetching, UITableViewDataSourcePrefetching {
        public let prefetcher: WindowPrefetcher

        public init(_ prefetcher: WindowPrefetcher) {
            self.prefetcher = prefetcher
            super.init()
        }

        public func collectionView(_ collectionView: UICollectionView, prefetchItemsAt indexPaths: [IndexPath]) {
            prefetcher.prefetch(indexPaths.map { ItemIndexPath($0) })
        }

        public func tableView(_ tableView: UITableView, prefetchRowsAt indexPaths: [IndexPath]) {
            prefetcher.prefetch(indexPaths.map { ItemIndexPath($0) })
        }
    }

    extension SectionSnapshot {
        /// The items and hierarchy of a UIKit section snapshot, each item's payload from
        /// `payload` (a section snapshot holds identifiers only), and its expanded items.
        /// - Throws: `BatchError` as `append(_:to:)` does (an identifier too long, a payload too
        ///   large for the default limits).
        public static func from(
            _ sectionSnapshot: NSDiffableDataSourceSectionSnapshot<SnapshotIdentifier>, payload: (SnapshotIdentifier) -> SnapshotPayload = { _ in .empty }
        ) throws(BatchError) -> (section: SectionSnapshot, expansion: OutlineExpansion) {
            var section = SectionSnapshot()
            var expansion = OutlineExpansion()
            // `items` is depth-first: a parent comes before its children.
            for item in sectionSnapshot.items {
                try section.append([SnapshotElement(item, payload: payload(item))], to: sectionSnapshot.parent(of: item))
                if sectionSnapshot.isExpanded(item) { expansion.expand(item) }
            }
            return (section, expansion)
        }
    }
#endif
