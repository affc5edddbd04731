#if canImport(Foundation)
    public import Foundation

    extension ItemIndexPath {
        /// The same position as Foundation's (and UIKit's) two-element `IndexPath`.
        public var indexPath: IndexPath { IndexPath(indexes: [section, item]) }

        /// - Precondition: `indexPath` has two elements (section, item), as UIKit's item paths do.
        public init(_ indexPath: IndexPath) {
            precondition(indexPath.count == 2, "an item index path has two elements (section, item), not \(indexPath.count)")
            self.init(item: indexPath[1], section: indexPath[0])
        }
    }

    extension SnapshotPositions {
        /// `itemIdentifier(for:)` with UIKit's `IndexPath`. O(log n)
        public func itemIdentifier(for indexPath: IndexPath) -> SnapshotIdentifier? { itemIdentifier(for: ItemIndexPath(indexPath)) }
    }

    extension RoomReplica {
        /// `itemIdentifier(for:)` with UIKit's `IndexPath`. O(log n)
        public func itemIdentifier(for indexPath: IndexPath) -> SnapshotIdentifier? { itemIdentifier(for: ItemIndexPath(indexPath)) }
    }

    #if canImport(Observation)
        @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
        extension ObservableReplica {
            /// `itemIdentifier(for:)` with UIKit's `IndexPath`: the visible row's item. O(log n)
            public func itemIdentifier(for indexPath: IndexPath) -> SnapshotIdentifier? { itemIdentifier(for: ItemIndexPath(indexPath)) }
        }
    #endif
#endif
