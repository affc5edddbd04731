#if canImport(Observation)
    public import Observation

    /// A typed replica for SwiftUI: an `@Observable` model whose `sections` are the rows to show,
    /// decoded, so that a list binds to it without touching raw identifiers or bytes.
    ///
    /// ```swift
    /// @State var board = ObservableTypedReplica(try await client.join("board", coding: RoomCoding<String, String, Card>()))
    /// ...
    /// List(board.sections) { section in
    ///     Section(section.id) {
    ///         ForEach(section.rows) { row in CardView(card: row.item).padding(.leading, CGFloat(row.level) * 16) }
    ///     }
    /// }
    /// ```
    ///
    /// It follows the replica's changes on the main actor, in order, as `ObservableReplica` does:
    /// `sections`, `position` and `lastChange` always describe the same version. A section's rows
    /// are its visible rows (an outline's items under collapsed items are not rows), each with its
    /// level and whether it has children and is expanded, for the disclosure control.
    ///
    /// Cost: every change decodes every row again, O(rows) on the main actor: right for the lists a
    /// SwiftUI view shows at once. A room of many thousands of items is better shown through
    /// `UICollectionView` and the lookups (`TypedReplica`, `TypedChange`), which decode only the
    /// cells drawn.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor @Observable
    public final class ObservableTypedReplica<SectionID: Hashable & Sendable, ItemID: Hashable & Sendable, Item: Sendable> {
        /// A section and its rows.
        public struct Section: Identifiable, Sendable {
            public let id: SectionID
            public let rows: [Row]
        }

        /// A visible row: the item, decoded, and what a list draws beside it.
        public struct Row: Identifiable, Sendable {
            public let id: ItemID
            public let item: Item
            /// 0 for a section's top-level items, 1 for their children, ...
            public let level: Int
            /// Whether the item has children (shown or not): a disclosure control.
            public let hasChildren: Bool
            /// Whether the item is expanded (its children are rows).
            public let isExpanded: Bool
        }

        @ObservationIgnored public let replica: TypedReplica<SectionID, ItemID, Item>
        public var room: String { replica.room }
        /// The rows to show, section by section.
        public private(set) var sections: [Section] = []
        /// The position of the version `sections` shows.
        public private(set) var position: RoomPosition
        /// The change that made `sections` current (nil until the first one arrives).
        public private(set) var lastChange: TypedChange<SectionID, ItemID, Item>?
        /// Set when the version's bytes did not decode (`sections` then keeps the last version
        /// that did); cleared by the next change that decodes.
        public private(set) var decodingError: ElementCodingError?
        /// The replica's stream finished: the room was left or lost, or the client closed.
        public private(set) var isFinished = false

        @ObservationIgnored private var follower: Task<Void, Never>?

        /// Follows `replica` from its current snapshot on; `sections` fill in with the stream's
        /// first (`.initial`) change.
        public init(_ replica: TypedReplica<SectionID, ItemID, Item>) {
            self.replica = replica
            let changes = replica.changes  // subscribed now: no change after `current` is missed
            position = replica.replica.current.position
            follower = Task { [weak self] in
                for await change in changes {
                    guard let self else { return }
                    self.apply(change)
                }
                self?.isFinished = true
            }
        }

        deinit {
            follower?.cancel()
        }

        /// Expands an item through the replica; its children become rows when the `.expansion`
        /// change arrives here.
        public func expand(_ item: ItemID) throws(ElementCodingError) {
            replica.replica.expand(try replica.coding.identifier(forItem: item))
        }

        /// Collapses an item through the replica.
        public func collapse(_ item: ItemID) throws(ElementCodingError) {
            replica.replica.collapse(try replica.coding.identifier(forItem: item))
        }

        /// Expands a collapsed item, collapses an expanded one: a disclosure control's tap.
        public func toggle(_ row: Row) throws(ElementCodingError) {
            if row.isExpanded { try collapse(row.id) } else { try expand(row.id) }
        }

        private func apply(_ change: TypedChange<SectionID, ItemID, Item>) {
            do {
                sections = try Self.sections(of: change.change, coding: change.coding)
                decodingError = nil
            } catch {
                decodingError = error
            }
            position = change.position
            lastChange = change
        }

        /// Every visible row of `change`, decoded. O(items), hidden ones included (for `hasChildren`).
        static func sections(of change: RoomChange, coding: RoomCoding<SectionID, ItemID, Item>) throws(ElementCodingError) -> [Section] {
            let snapshot = change.snapshot
            let visible = change.visibleSnapshot
            var sections: [Section] = []
            sections.reserveCapacity(visible.numberOfSections)
            for sectionIdentifier in visible.sectionIdentifiers {
                // In depth-first order an item has children exactly when the next item is deeper.
                var parents = Set<SnapshotIdentifier>()
                if snapshot.isOutline, let all = snapshot.itemIdentifiers(inSection: sectionIdentifier) {
                    for (index, item) in all.enumerated().dropLast()
                    where snapshot.level(of: all[index + 1])! > snapshot.level(of: item)! {
                        parents.insert(item)
                    }
                }
                var rows: [Row] = []
                for identifier in visible.itemIdentifiers(inSection: sectionIdentifier) ?? [] {
                    rows.append(
                        Row(
                            id: try coding.itemID(identifier),
                            item: try coding.item(from: snapshot.payload(ofItem: identifier) ?? .empty, of: identifier),
                            level: snapshot.level(of: identifier) ?? 0,
                            hasChildren: parents.contains(identifier),
                            isExpanded: change.expansion.isExpanded(identifier)))
                }
                sections.append(Section(id: try coding.sectionID(sectionIdentifier), rows: rows))
            }
            return sections
        }
    }
#endif
