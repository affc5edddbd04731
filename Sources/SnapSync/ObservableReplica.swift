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
        /// The snapshot the views show.
        public private(set) var snapshot: Snapshot
        /// The snapshot's position.
        public private(set) var position: RoomPosition
        /// The rows the lookups count: `snapshot` without an outline's items under collapsed
        /// items (the replica's expansion); `snapshot` itself for a flat room.
        public private(set) var visibleSnapshot: Snapshot
        /// The change that made `snapshot` current (nil until the first one arrives), for views
        /// that animate by its `updates`.
        public private(set) var lastChange: RoomChange?
        /// The replica's stream finished: the room was left or lost, or the client closed.
        public private(set) var isFinished = false

        @ObservationIgnored private var positions: SnapshotPositions
        @ObservationIgnored private var follower: Task<Void, Never>?

        /// Follows `replica` from its current snapshot on. O(n) to start.
        public init(_ replica: RoomReplica) {
            room = replica.room
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
        public func sectionIdentifier(for section: Int) -> Identifier? { positions.sectionIdentifier(for: section) }
        /// The identifier of the visible row at `indexPath`, or nil: rows are `visibleSnapshot`'s
        /// (an outline's items under a collapsed item are not rows; a flat room's rows are `snapshot`). O(log n)
        public func itemIdentifier(for indexPath: ItemIndexPath) -> Identifier? { positions.itemIdentifier(for: indexPath) }
        /// The index path of `item`'s visible row, or nil (also when it is hidden under a collapsed item). O(log n)
        public func indexPath(for item: Identifier) -> ItemIndexPath? { positions.indexPath(for: item) }
        /// The index of `section`, or nil. O(log n)
        public func index(ofSection section: Identifier) -> Int? { positions.index(ofSection: section) }

        /// Visible rows in the section at `section`, or nil. O(log n)
        public func numberOfItems(inSection section: Int) -> Int? { positions.numberOfItems(inSection: section) }

        private func apply(_ change: RoomChange) {
            // Every change, the stream's first `.initial` one included: it carries the visible
            // rows, which `init` could not read with the snapshot (an outline's lookups count
            // them). O(n) once for `.initial`.
            positions.apply(change)
            snapshot = change.snapshot
            visibleSnapshot = change.visibleSnapshot
            position = change.position
            lastChange = change
        }
    }
#endif
