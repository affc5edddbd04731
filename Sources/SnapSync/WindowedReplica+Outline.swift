// Outlines in a windowed replica: a window's rows are its sections' roots, each with its whole
// subtree, and which of those items are expanded is this viewer's, as in a `RoomReplica`
// (RoomReplica+Outline.swift): the lookups and every change's index paths count the visible
// rows (by default, collapsed: the roots, the window's rows). Expanding or collapsing is a
// change of its own (`.expansion`). A flat room takes none of this.

extension WindowedReplica {
    /// Expands items: their children become visible rows. Delivers an `.expansion` change when
    /// the window snapshot is an outline.
    public func expand(_ items: [SnapshotIdentifier]) {
        changeExpansion { expansion in for item in items { expansion.expand(item) } }
    }

    public func expand(_ item: SnapshotIdentifier) { expand([item]) }

    /// Collapses items: their descendants' rows go. Delivers an `.expansion` change when the
    /// window snapshot is an outline.
    public func collapse(_ items: [SnapshotIdentifier]) {
        changeExpansion { expansion in for item in items { expansion.collapse(item) } }
    }

    public func collapse(_ item: SnapshotIdentifier) { collapse([item]) }

    /// This viewer's expansion state; setting it delivers the rows that change.
    public var expansion: OutlineExpansion {
        get { broadcast.read { $0.rows.expansion } }
        set { changeExpansion { $0 = newValue } }
    }

    /// O(1)
    public func isExpanded(_ item: SnapshotIdentifier) -> Bool { broadcast.read { $0.rows.expansion.isExpanded(item) } }

    /// The window snapshot without the items under collapsed items: the rows, with their levels.
    public var visibleSnapshot: RoomSnapshot { broadcast.read { $0.rows.visible } }

    private func changeExpansion(_ body: (inout OutlineExpansion) -> Void) {
        let room = room
        broadcast.publish { state -> WindowChange? in
            let old = state.rows
            body(&state.rows.expansion)
            guard state.rows.snapshot.isOutline else { return nil }
            state.rows.visible = state.rows.expansion.visibleSnapshot(of: state.rows.snapshot)
            var rows = RoomChange(
                kind: .expansion, room: room, previousPosition: state.rows.position, position: state.rows.position, operations: [],
                snapshot: state.rows.snapshot,
                updates: BatchUpdates(from: old.visible, to: state.rows.visible, operations: RoomReplica.rowReconfigures(old: old, new: state.rows)))
            rows.visibleSnapshot = state.rows.visible
            rows.expansion = state.rows.expansion
            state.rows.positions.apply(rows)
            return WindowChange(
                kind: .expansion, rows: rows, previousWindow: state.window, window: state.window, counts: state.counts, changedCounts: [])
        }
    }
}
