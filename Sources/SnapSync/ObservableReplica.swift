#if canImport(Observation)
    public import Observation

    /// A replica for SwiftUI: an `@Observable` object on the main actor that follows a
    /// `RoomReplica`'s changes, so a view that reads `snapshot` (or a lookup) redraws when the
    /// room changes.
    ///
    /// ```swift
    /// @State var board = ObservableReplica(try await client.join("board"))
    /// ...
    /// List(board.snapshot.sections.map(\.id), id: \.self) { section in ... }
    /// ```
    ///
    /// It consumes a `changes` stream of its own (other consumers of the replica are not
    /// affected), and applies each change on the main actor, in order: `snapshot`, `position`,
    /// `lastChange` and the lookups always describe the same version, the one the views were
    /// last told about, which may be a little behind the `RoomReplica` itself. It stops following
    /// when the replica's streams finish (`isFinished`) or when it is deallocated.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor @Observable
    public final class ObservableReplica {
        public let room: String
        /// The replica followed: writes, and the expansion calls below, go through it.
        @ObservationIgnored public let replica: RoomReplica
        /// The snapshot the views show.
        public private(set) var snapshot: RoomSnapshot
        /// The snapshot's position.
        public private(set) var position: RoomPosition
        /// The rows the lookups count: `snapshot` without an outline's items under collapsed
        /// items (the replica's expansion); `snapshot` itself for a flat room.
        public private(set) var visibleSnapshot: RoomSnapshot
        /// The change that made `snapshot` current (nil until the first one arrives), for views
        /// that animate by its `updates`.
        public private(set) var lastChange: RoomChange?
        /// This viewer's expansion state (an outline's expanded items), as of `lastChange`.
        public private(set) var expansion: OutlineExpansion
        /// The replica's stream finished: the room was left or lost, or the client closed.
        public private(set) var isFinished = false

        @ObservationIgnored private var positions: SnapshotPositions
        @ObservationIgnored private var follower: Task<Void, Never>?

        /// Follows `replica` from its current snapshot on. O(n) to start.
        public init(_ replica: RoomReplica) {
            room = replica.room
            self.replica = replica
            expansion = replica.expansion
            let changes = replica.changes  // subscribed now: no change after `current` is missed
            let current = replica.current
            snapshot = current.snapshot
            position = current.position
            // Replaced by the stream's `.initial` change, which reads the rows with the snapshot.
            visibleSnapshot = current.snapshot
            positions = SnapshotPositions(current.snapshot)
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

        /// The identifier of the section at `section`, or nil (sections are never hidden). O(log n)
        public func sectionIdentifier(for section: Int) -> SnapshotIdentifier? { positions.sectionIdentifier(for: section) }
        /// The identifier of the visible row at `indexPath`, or nil: rows are `visibleSnapshot`'s
        /// (an outline's items under a collapsed item are not rows; a flat room's rows are `snapshot`). O(log n)
        public func itemIdentifier(for indexPath: ItemIndexPath) -> SnapshotIdentifier? { positions.itemIdentifier(for: indexPath) }
        /// The index path of `item`'s visible row, or nil (also when it is hidden under a collapsed item). O(log n)
        public func indexPath(for item: SnapshotIdentifier) -> ItemIndexPath? { positions.indexPath(for: item) }
        /// The index of `section`, or nil. O(log n)
        public func index(ofSection section: SnapshotIdentifier) -> Int? { positions.index(ofSection: section) }

        /// Visible rows in the section at `section`, or nil. O(log n)
        public func numberOfItems(inSection section: Int) -> Int? { positions.numberOfItems(inSection: section) }

        // Outlines: expanding or collapsing goes through the replica, which delivers an
        // `.expansion` change; the reads below answer from that change once it is applied, so they
        // agree with `visibleSnapshot` and the lookups.

        /// Expands items (their children become rows) through the replica. The rows change when
        /// its `.expansion` change arrives here, on the main actor.
        public func expand(_ items: [SnapshotIdentifier]) { replica.expand(items) }
        public func expand(_ item: SnapshotIdentifier) { replica.expand(item) }
        /// Collapses items (their descendants' rows go) through the replica.
        public func collapse(_ items: [SnapshotIdentifier]) { replica.collapse(items) }
        public func collapse(_ item: SnapshotIdentifier) { replica.collapse(item) }
        /// Whether `item` is expanded, as the views were last told. O(1)
        public func isExpanded(_ item: SnapshotIdentifier) -> Bool { expansion.isExpanded(item) }
        /// Whether `item` is a row: in `snapshot`, every ancestor expanded. O(depth)
        public func isVisible(_ item: SnapshotIdentifier) -> Bool { expansion.isVisible(item, in: snapshot) }
        /// The children of `item` (hidden or not), or nil when there is no such item. O(its subtree)
        public func children(of item: SnapshotIdentifier) -> [SnapshotIdentifier]? { snapshot.children(of: item) }
        /// `item`'s level (0 for a section's top-level items), or nil. O(1)
        public func level(of item: SnapshotIdentifier) -> Int? { snapshot.level(of: item) }
        /// One section's items with their hierarchy, or nil when there is no such section. O(items in the section)
        public func sectionSnapshot(for section: SnapshotIdentifier) -> SectionSnapshot? { snapshot.sectionSnapshot(of: section) }

        private func apply(_ change: RoomChange) {
            // Every change, the stream's first `.initial` one included: it carries the visible
            // rows, which `init` could not read with the snapshot (an outline's lookups count
            // them). O(n) once for `.initial`.
            positions.apply(change)
            snapshot = change.snapshot
            visibleSnapshot = change.visibleSnapshot
            position = change.position
            expansion = change.expansion
            lastChange = change
        }
    }
#endif
