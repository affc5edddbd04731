#if canImport(Observation)
    public import Observation

    /// A windowed replica for SwiftUI: an `@Observable` object on the main actor that follows a
    /// `WindowedReplica`'s changes, so a view that reads `snapshot`, `counts` or a lookup redraws
    /// when the window or the room changes.
    ///
    /// ```swift
    /// @State var feed = ObservableWindowedReplica(try await client.joinWindow("feed", [.init(section: "posts", range: .first(100))]))
    /// ...
    /// List(feed.snapshot.itemIdentifiers(inSection: "posts") ?? [], id: \.self) { post in
    ///     Row(post).onAppear { if let path = feed.indexPath(for: post) { prefetcher.displaying(path) } }
    /// }
    /// ```
    ///
    /// As `ObservableReplica`, it consumes a `changes` stream of its own and applies each change
    /// on the main actor, in order: `snapshot`, `position`, `window`, `counts`, `lastChange` and
    /// the lookups always describe the same version. It stops following when the replica's
    /// streams finish (`isFinished`) or when it is deallocated.
    @available(macOS 14, iOS 17, tvOS 17, watchOS 10, *)
    @MainActor @Observable
    public final class ObservableWindowedReplica {
        public let room: String
        /// The replica followed: moves, extensions and the expansion calls go through it.
        @ObservationIgnored public let replica: WindowedReplica
        /// The window snapshot the views show.
        public private(set) var snapshot: RoomSnapshot
        /// The snapshot's position.
        public private(set) var position: RoomPosition
        /// The effective window.
        public private(set) var window: [SectionWindow]
        /// Every section's item count in the room.
        public private(set) var counts: [SnapshotIdentifier: UInt64]
        /// The rows the lookups count: `snapshot` without an outline's items under collapsed items.
        public private(set) var visibleSnapshot: RoomSnapshot
        /// The change that made `snapshot` current (nil until the first one arrives).
        public private(set) var lastChange: WindowChange?
        /// The replica's stream finished: the window was left or lost, or the client closed.
        public private(set) var isFinished = false

        @ObservationIgnored private var positions: SnapshotPositions
        @ObservationIgnored private var follower: Task<Void, Never>?

        /// Follows `replica` from its current state on.
        public init(_ replica: WindowedReplica) {
            room = replica.room
            self.replica = replica
            let changes = replica.changes  // subscribed now: no change after `current` is missed
            let current = replica.current
            snapshot = current.snapshot
            position = current.position
            window = current.window
            counts = current.counts
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

        /// The room's item count of `section`, or nil. O(1) expected
        public func count(ofSection section: SnapshotIdentifier) -> UInt64? { counts[section] }
        /// The identifier of the section at `section`, or nil. O(log n)
        public func sectionIdentifier(for section: Int) -> SnapshotIdentifier? { positions.sectionIdentifier(for: section) }
        /// The identifier of the window row at `indexPath`, or nil. O(log n)
        public func itemIdentifier(for indexPath: ItemIndexPath) -> SnapshotIdentifier? { positions.itemIdentifier(for: indexPath) }
        /// The index path of `item`'s row in the window, or nil. O(log n)
        public func indexPath(for item: SnapshotIdentifier) -> ItemIndexPath? { positions.indexPath(for: item) }
        /// The index of `section`, or nil. O(log n)
        public func index(ofSection section: SnapshotIdentifier) -> Int? { positions.index(ofSection: section) }
        /// The window's rows in the section at `section`, or nil. O(log n)
        public func numberOfItems(inSection section: Int) -> Int? { positions.numberOfItems(inSection: section) }

        /// `WindowedReplica.move(to:)`.
        public func move(to window: [SectionWindow]) async throws(SnapSyncError) {
            try await replica.move(to: window)
        }

        /// `WindowedReplica.extend(section:by:at:)`.
        @discardableResult
        public func extend(section: SnapshotIdentifier, by rows: Int, at edge: WindowEdge = .end) async throws(SnapSyncError) -> Bool {
            try await replica.extend(section: section, by: rows, at: edge)
        }

        private func apply(_ change: WindowChange) {
            positions.apply(change.rows)
            snapshot = change.snapshot
            visibleSnapshot = change.rows.visibleSnapshot
            position = change.position
            window = change.window
            counts = change.counts
            lastChange = change
        }
    }
#endif
