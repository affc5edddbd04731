/// A joined room's local copy: its current snapshot and position, index-path lookups, and the
/// stream of its changes.
///
/// The client updates it from its DIFFs, catch-ups and resyncs; it is read from anywhere,
/// synchronously (a UI thread can read `snapshot` inside a data source callback). `snapshot`,
/// `position` and the lookups always belong to the same version: read snapshot and position at
/// once with `current`.
///
/// `changes` may be consumed by any number of tasks: each access makes a new stream, which
/// starts with an `.initial` change holding the replica's snapshot at that moment and then gets
/// every later change, so a consumer never misses nor doubles one. A stream buffers without
/// bound, and each buffered change holds its snapshot: consume it (or end the loop, or `leave`
/// the room) rather than let it pile up. Streams finish when the room is left, the join is
/// refused on a reconnect, or the client closes.
///
/// With a server of protocol version 4, `presence` streams who else is in the room and
/// `setPresence(_:)` sets this client's state there (RoomReplica+Presence.swift).
public final class RoomReplica: Sendable {
    public let room: String

    struct State: Sendable {
        var snapshot = RoomSnapshot()
        var position = RoomPosition(epoch: 0, version: 0)
        var positions = SnapshotPositions()
        /// This viewer's expanded items, and `snapshot` without what they hide: the rows the
        /// lookups and the changes' index paths count (`RoomReplica+Outline.swift`).
        var expansion = OutlineExpansion()
        var visible = RoomSnapshot()
    }
    let broadcast = Broadcast<State, RoomChange>(State())
    /// The room's presence, once watched (RoomReplica+Presence.swift).
    let presenceBroadcast = Broadcast<PresenceState, PresenceEvent>(PresenceState())
    /// The client that made the replica, for the presence calls.
    let owner: ClientReference

    init(room: String, client: SnapSyncClient? = nil) {
        self.room = room
        owner = ClientReference(client)
    }

    /// A new stream of this replica's changes: `.initial` (the snapshot now), then every change.
    public var changes: AsyncStream<RoomChange> {
        let room = room
        return broadcast.subscribe { state in
            var change = RoomChange(
                kind: .initial, room: room, previousPosition: nil, position: state.position, operations: [],
                snapshot: state.snapshot, updates: BatchUpdates(from: RoomSnapshot(), to: state.visible))
            change.visibleSnapshot = state.visible
            change.expansion = state.expansion
            return change
        }
    }

    /// The snapshot at `position`.
    public var snapshot: RoomSnapshot { broadcast.read { $0.snapshot } }
    /// The room's epoch and the version the snapshot is at.
    public var position: RoomPosition { broadcast.read { $0.position } }
    /// Both, read together.
    public var current: (snapshot: RoomSnapshot, position: RoomPosition) { broadcast.read { ($0.snapshot, $0.position) } }

    /// The identifier of the section at `section`, or nil (sections are never hidden). O(log n) (`SnapshotPositions`).
    public func sectionIdentifier(for section: Int) -> SnapshotIdentifier? { broadcast.read { $0.positions.sectionIdentifier(for: section) } }
    /// The identifier of the visible row at `indexPath`, or nil: rows are `visibleSnapshot`'s
    /// (an outline's items under a collapsed item are not rows; a flat room's rows are `snapshot`). O(log n)
    public func itemIdentifier(for indexPath: ItemIndexPath) -> SnapshotIdentifier? { broadcast.read { $0.positions.itemIdentifier(for: indexPath) } }
    /// The index path of `item`'s visible row, or nil (also when it is hidden under a collapsed item). O(log n)
    public func indexPath(for item: SnapshotIdentifier) -> ItemIndexPath? { broadcast.read { $0.positions.indexPath(for: item) } }
    /// The index of `section`, or nil. O(log n)
    public func index(ofSection section: SnapshotIdentifier) -> Int? { broadcast.read { $0.positions.index(ofSection: section) } }
    /// Visible rows in the section at `section`, or nil. O(log n)
    public func numberOfItems(inSection section: Int) -> Int? { broadcast.read { $0.positions.numberOfItems(inSection: section) } }

    /// Makes `change` current, then delivers it. Only the client calls this, from its actor, so
    /// changes are delivered in the order they were made current.
    func publish(_ change: RoomChange) {
        broadcast.publish { state in state.follow(change) }
    }

    func finish() {
        broadcast.finish()
        presenceBroadcast.finish()
    }
}
