import SnapSyncWire

/// A room followed through a window of its rows (`SnapSyncClient.joinWindow(_:_:)`, protocol
/// version 4): the window snapshot (every section of the room, with the rows of the sections the
/// window names, each with its subtree), every section's item count, the effective window and
/// the room's position.
///
/// The client keeps it up to date from the server's WINDOW_DIFFs; it is read from anywhere,
/// synchronously, like a `RoomReplica`, and the lookups count the window snapshot's rows: a list
/// backed by a windowed replica shows the rows the window holds (`numberOfItems(inSection:)`),
/// and `count(ofSection:)` says how many the room has (for a scroll indicator, or to know there
/// is more to fetch: `extend(section:by:at:)`, `WindowPrefetcher`).
///
/// `changes` works as `RoomReplica.changes`: each access makes a new stream that starts with an
/// `.initial` change and then gets every later change. Each change's `rows` is a `RoomChange`
/// of the window snapshot, for the same adapters. Streams finish when the window is left, lost,
/// or the client closes.
///
/// Moving the window (`move(to:)`, `extend(section:by:at:)`) asks the server and returns once its
/// answer is applied (a `.moved` change). After a reconnect the client asks for the window again
/// (a `.reloaded` change: windows have no resume); a WINDOW_DIFF the replica cannot follow makes
/// it ask afresh too (a `.resync` change).
public final class WindowedReplica: Sendable {
    public let room: String

    struct State: Sendable {
        /// The window snapshot, its position, this viewer's expansion (WindowedReplica+Outline.swift:
        /// by default an outline's rows are its roots, the window's rows) and the lookups.
        var rows = RoomReplica.State()
        var window: [SectionWindow] = []
        var counts: [SnapshotIdentifier: UInt64] = [:]
    }
    let broadcast = Broadcast<State, WindowChange>(State())
    /// The client that made the replica, for moving and leaving.
    let owner: ClientReference

    init(room: String, client: SnapSyncClient? = nil) {
        self.room = room
        owner = ClientReference(client)
    }

    /// A new stream of this replica's changes: `.initial` (the window snapshot now), then every
    /// change.
    public var changes: AsyncStream<WindowChange> {
        let room = room
        return broadcast.subscribe { state in
            var rows = RoomChange(
                kind: .initial, room: room, previousPosition: nil, position: state.rows.position, operations: [],
                snapshot: state.rows.snapshot, updates: BatchUpdates(from: RoomSnapshot(), to: state.rows.visible))
            rows.visibleSnapshot = state.rows.visible
            rows.expansion = state.rows.expansion
            return WindowChange(
                kind: .initial, rows: rows, previousWindow: nil, window: state.window, counts: state.counts,
                changedCounts: Self.orderedCounts(of: state.rows.snapshot, state.counts))
        }
    }

    /// The window snapshot: every section of the room, and the window's rows with their subtrees.
    public var snapshot: RoomSnapshot { broadcast.read { $0.rows.snapshot } }
    /// The room's epoch and the version the window snapshot is at (versions may skip: a windowed
    /// replica hears only of the versions that change its window or counts).
    public var position: RoomPosition { broadcast.read { $0.rows.position } }
    /// The effective window: the one asked for, with `around` windows re-anchored by the server.
    public var window: [SectionWindow] { broadcast.read { $0.window } }
    /// Every section's item count in the room (children included), by section.
    public var counts: [SnapshotIdentifier: UInt64] { broadcast.read { $0.counts } }
    /// The snapshot, position, window and counts, read together.
    public var current: (snapshot: RoomSnapshot, position: RoomPosition, window: [SectionWindow], counts: [SnapshotIdentifier: UInt64]) {
        broadcast.read { ($0.rows.snapshot, $0.rows.position, $0.window, $0.counts) }
    }

    /// The room's item count of `section` (children included), or nil when there is no such
    /// section. O(1) expected
    public func count(ofSection section: SnapshotIdentifier) -> UInt64? { broadcast.read { $0.counts[section] } }

    /// The identifier of the section at `section`, or nil. O(log n)
    public func sectionIdentifier(for section: Int) -> SnapshotIdentifier? { broadcast.read { $0.rows.positions.sectionIdentifier(for: section) } }
    /// The identifier of the window row at `indexPath`, or nil. O(log n)
    public func itemIdentifier(for indexPath: ItemIndexPath) -> SnapshotIdentifier? { broadcast.read { $0.rows.positions.itemIdentifier(for: indexPath) } }
    /// The index path of `item`'s row in the window, or nil (not in the window). O(log n)
    public func indexPath(for item: SnapshotIdentifier) -> ItemIndexPath? { broadcast.read { $0.rows.positions.indexPath(for: item) } }
    /// The index of `section`, or nil. O(log n)
    public func index(ofSection section: SnapshotIdentifier) -> Int? { broadcast.read { $0.rows.positions.index(ofSection: section) } }
    /// The window's rows in the section at `section` (not the room's: `count(ofSection:)`), or
    /// nil. O(log n)
    public func numberOfItems(inSection section: Int) -> Int? { broadcast.read { $0.rows.positions.numberOfItems(inSection: section) } }

    /// The window's rows of the section at `section` and where they stand in the room's section,
    /// or nil when there is no such section. O(rows of that section)
    public func rows(inSection section: Int) -> WindowSectionRows? {
        broadcast.read { state in
            guard let id = state.rows.positions.sectionIdentifier(for: section) else { return nil }
            return WindowSectionRows(state, section: id, index: section)
        }
    }

    /// Moves the window: WINDOW with `window`, which replaces the whole window (sections it does
    /// not name have no rows any more). Returns once the server's answer is applied (a `.moved`
    /// change, delivered before this returns); while the connection is down, once the window is
    /// asked for again on the next one.
    /// - Throws: `.rejected` with `window_too_large` (more rows than `max_window_rows`),
    ///   `duplicate_section`, `anchor_item_not_found` (the window is unchanged); `.notJoined`
    ///   when the window was left; `.unsupportedByServer`; `.timedOut`; `.closed`.
    public func move(to window: [SectionWindow]) async throws(SnapSyncError) {
        guard let client = owner.value else { throw .closed }
        try await client.moveWindow(room, to: window)
    }

    /// Adds `rows` rows to the window of `section`, after its last row (`.end`, "100 more
    /// rows") or before its first (`.start`): `first(n)` becomes `first(n + rows)`, `last(n)`
    /// `last(n + rows)`, an `around` window gets `rows` more after (or before) its anchor; a
    /// section the window does not name gets `first(rows)` (or `last(rows)`). When that would
    /// pass the server's `max_window_rows` (all sections together), the section's window slides
    /// instead: it keeps as many of its rows on the other side as fit, dropping the farthest,
    /// around its last (or first) row. Nothing is sent when the window already reaches that end
    /// of the section (`first` at the start, `last` at the end) or has no room to grow.
    /// - Returns: whether a WINDOW was sent (and its answer applied).
    /// - Throws: as `move(to:)`.
    @discardableResult
    public func extend(section: SnapshotIdentifier, by rows: Int, at edge: WindowEdge = .end) async throws(SnapSyncError) -> Bool {
        guard let client = owner.value else { throw .closed }
        return try await client.extendWindow(room, section: section, by: rows, at: edge)
    }

    /// Stops following the room (LEAVE): `changes` finish.
    public func leave() async throws(SnapSyncError) {
        guard let client = owner.value else { return }
        try await client.leaveWindow(room, replica: self)
    }

    /// Makes `change` current, then delivers it. Only the client calls this, from its actor.
    func publish(_ change: WindowChange) {
        broadcast.publish { state in state.follow(change) }
    }

    func finish() {
        broadcast.finish()
    }

    /// `counts` in the order of `snapshot`'s sections.
    static func orderedCounts(of snapshot: RoomSnapshot, _ counts: [SnapshotIdentifier: UInt64]) -> [SectionCount] {
        snapshot.sectionIdentifiers.compactMap { id in counts[id].map { SectionCount(section: id, items: $0) } }
    }
}

extension WindowedReplica.State {
    /// Makes `change` current and returns it as delivered (its rows' updates recomputed over
    /// the visible rows, as a room replica's).
    mutating func follow(_ change: WindowChange) -> WindowChange {
        var change = change
        change.rows = rows.follow(change.rows)
        window = change.window
        counts = change.counts
        return change
    }
}

/// Which end of a section's window: before its first row, or after its last.
public enum WindowEdge: Hashable, Sendable {
    case start
    case end
}

/// A section's rows in a windowed replica, and whether the window reaches the ends of the
/// room's section (`WindowedReplica.rows(inSection:)`): what decides whether there is more to
/// fetch on either side (`WindowPrefetchPolicy`).
public struct WindowSectionRows: Hashable, Sendable {
    public var section: SnapshotIdentifier
    /// The section's index.
    public var index: Int
    /// The rows a list shows for the section: what index paths count.
    public var rows: Int
    /// The section's items the window holds (rows and their descendants).
    public var items: Int
    /// The section's items in the room (children included).
    public var count: UInt64
    /// The section's window, or nil when the window does not name it (it has no rows).
    public var window: SectionWindow?
    /// The window's first row is the section's first (or the section has no rows): nothing
    /// before it to fetch.
    public var reachesStart: Bool
    /// The window's last row is the section's last: nothing after it to fetch.
    public var reachesEnd: Bool

    public init(
        section: SnapshotIdentifier, index: Int, rows: Int, items: Int, count: UInt64, window: SectionWindow?, reachesStart: Bool,
        reachesEnd: Bool
    ) {
        self.section = section
        self.index = index
        self.rows = rows
        self.items = items
        self.count = count
        self.window = window
        self.reachesStart = reachesStart
        self.reachesEnd = reachesEnd
    }

    /// Whether the room's section holds items the window does not.
    public var hasMore: Bool { count > UInt64(items) }

    /// Read from a replica's state. The window says exactly whether it reaches an end: it holds
    /// fewer rows on a side than it asks for only when the section has no more there.
    init(_ state: WindowedReplica.State, section: SnapshotIdentifier, index: Int) {
        let snapshot = state.rows.snapshot
        let roots = snapshot.windowRoots(inSection: section)
        let window = state.window.first { $0.section == section }
        let count = state.counts[section] ?? 0
        let items = snapshot.numberOfItems(inSection: section) ?? 0
        var reachesStart = true, reachesEnd = true
        switch window?.range {
        case nil:
            break
        case .first(let n)?:
            reachesEnd = UInt64(roots.count) < n || UInt64(items) >= count
        case .last(let n)?:
            reachesStart = UInt64(roots.count) < n || UInt64(items) >= count
        case .around(let anchor, let before, let after)?:
            if let at = roots.firstIndex(of: anchor) {
                reachesStart = UInt64(at) < before
                reachesEnd = UInt64(roots.count - at - 1) < after
            }
        }
        self.init(
            section: section, index: index, rows: state.rows.positions.numberOfItems(inSection: index) ?? 0, items: items, count: count,
            window: window, reachesStart: reachesStart, reachesEnd: reachesEnd)
    }
}

extension RoomSnapshot {
    /// The roots (level-0 items) of `section`, in order: a window snapshot's rows of it.
    /// O(items of the section)
    func windowRoots(inSection section: SnapshotIdentifier) -> [SnapshotIdentifier] {
        let items = itemIdentifiers(inSection: section) ?? []
        guard isOutline else { return items }
        return items.filter { level(of: $0) == 0 }
    }
}
