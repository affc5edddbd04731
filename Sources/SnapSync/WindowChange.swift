import SnapSyncWire

/// One change of a `WindowedReplica`, as delivered by `WindowedReplica.changes`: how its rows
/// changed (`rows`, a `RoomChange` of the window snapshot, which the collection view adapters
/// take as they are), the effective window, and the sections' item counts.
///
/// `rows.updates` are index paths in the window snapshot's rows, before and after the change
/// (the rows a list shows: a windowed list has as many rows as the window holds, not as the room
/// has): show them with `UICollectionView.apply(change.rows, updateModel:)` or
/// `UICollectionViewDiffableDataSource.apply(change.rows)`, as a `RoomReplica`'s changes.
public struct WindowChange: Sendable {
    public enum Kind: Hashable, Sendable {
        /// The first change of every `changes` stream: the replica's window snapshot when the
        /// stream was made; everything is an insert.
        case initial
        /// The room changed within the window, or in the counts (a live WINDOW_DIFF): another
        /// client's write, or this one's, or a re-anchoring after the anchor left its section.
        case diff
        /// The window moved or grew, as `move(to:)` or `extend(section:by:at:)` asked (the
        /// WINDOW_DIFF that answers it).
        case moved
        /// After a reconnect, the window's state asked for again (windows have no resume): the
        /// updates are the difference between the two window snapshots.
        case reloaded
        /// The replica could not follow a WINDOW_DIFF (see `ResyncReason`) and asked for the
        /// window's state afresh: the updates are the difference between the two snapshots.
        case resync(ResyncReason)
        /// This viewer expanded or collapsed items of an outline (`WindowedReplica.expand(_:)`):
        /// the window snapshot did not change, the visible rows did.
        case expansion
    }

    public var kind: Kind
    /// The change of the window snapshot, resolved to index paths in its visible rows (an
    /// outline's items under collapsed items are not rows: `WindowedReplica.expansion`). Its
    /// kind is `.initial` for an initial change, `.resync` for a reload or a resync,
    /// `.expansion` for an expansion, `.diff` otherwise.
    public var rows: RoomChange
    /// The effective window before the change; nil for `.initial`.
    public var previousWindow: [SectionWindow]?
    /// The effective window after the change: what was asked for, with an `around` window
    /// re-anchored by the server when its anchor left its section.
    public var window: [SectionWindow]
    /// Every section's item count in the room (children included), after the change.
    public var counts: [SnapshotIdentifier: UInt64]
    /// The sections whose count changed or that are new, with their count after the change, in
    /// the order of the snapshot's sections (every section for `.initial`).
    public var changedCounts: [SectionCount]

    public init(
        kind: Kind, rows: RoomChange, previousWindow: [SectionWindow]?, window: [SectionWindow], counts: [SnapshotIdentifier: UInt64],
        changedCounts: [SectionCount]
    ) {
        self.kind = kind
        self.rows = rows
        self.previousWindow = previousWindow
        self.window = window
        self.counts = counts
        self.changedCounts = changedCounts
    }

    public var room: String { rows.room }
    /// The window snapshot after the change.
    public var snapshot: RoomSnapshot { rows.snapshot }
    /// The rows' index paths (`rows.updates`).
    public var updates: BatchUpdates { rows.updates }
    /// The room's position the window snapshot is at after the change.
    public var position: RoomPosition { rows.position }
    /// Whether the effective window changed (always for `.moved`, also after a re-anchoring).
    public var windowChanged: Bool { previousWindow != window }
}

extension WindowChange.Kind {
    /// The kind of the `RoomChange` of the rows.
    var rowsKind: RoomChange.Kind {
        switch self {
        case .initial: .initial
        case .diff, .moved: .diff
        case .reloaded: .resync(.historyUnavailable)
        case .resync(let reason): .resync(reason)
        case .expansion: .expansion
        }
    }
}
