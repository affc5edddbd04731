// Outlines in a replica: this viewer's expansion state, and the change stream over visible rows.
//
// The room holds the hierarchy; which items are expanded is per viewer (`OutlineExpansion`). A
// list shows only the rows under expanded items, so every change a replica delivers counts those
// rows: its `updates` go from the rows shown before to the rows shown after
// (`RoomChange.visibleSnapshot`), and the lookups (`itemIdentifier(for:)`, ...) count them too.
// Expanding or collapsing is a change of its own (`.expansion`) whose updates are the rows that
// appear or go; a remote change under a collapsed item moves no row.
//
// A row is also reconfigured, when it stays, if what a list draws beside its payload changes:
// its level (indentation), whether it has children (the disclosure control), and whether it is
// expanded. A flat room takes none of this: its changes are delivered exactly as before.
//
// Cost: for an outline room, O(n) per change (the visible rows are rebuilt and compared, as a
// resync's are); for a flat room, nothing.

extension RoomReplica {
    /// Expands items: their children become visible rows (those under collapsed children stay
    /// hidden). Delivers an `.expansion` change when the room is an outline.
    public func expand(_ items: [SnapshotIdentifier]) {
        changeExpansion { expansion in for item in items { expansion.expand(item) } }
    }

    public func expand(_ item: SnapshotIdentifier) { expand([item]) }

    /// Collapses items: their descendants' rows go. Delivers an `.expansion` change when the
    /// room is an outline.
    public func collapse(_ items: [SnapshotIdentifier]) {
        changeExpansion { expansion in for item in items { expansion.collapse(item) } }
    }

    public func collapse(_ item: SnapshotIdentifier) { collapse([item]) }

    /// This viewer's expansion state; setting it (for example to
    /// `OutlineExpansion(expandsByDefault: true)`, to start expanded) delivers the rows that change.
    public var expansion: OutlineExpansion {
        get { broadcast.read { $0.expansion } }
        set { changeExpansion { $0 = newValue } }
    }

    /// O(1)
    public func isExpanded(_ item: SnapshotIdentifier) -> Bool { broadcast.read { $0.expansion.isExpanded(item) } }

    /// Whether the item is a row now: in the snapshot, every ancestor expanded. O(depth)
    public func isVisible(_ item: SnapshotIdentifier) -> Bool { broadcast.read { $0.expansion.isVisible(item, in: $0.snapshot) } }

    /// The visible rows' items, section by section: what the lookups count. O(rows)
    public var visibleItems: [SnapshotIdentifier] { broadcast.read { $0.visible.itemIdentifiers } }

    /// The visible rows' items of one section, or nil when there is no such section. O(rows)
    public func visibleItems(inSection section: SnapshotIdentifier) -> [SnapshotIdentifier]? {
        broadcast.read { $0.visible.itemIdentifiers(inSection: section) }
    }

    /// `snapshot` without the items under collapsed items: the rows, with their levels.
    public var visibleSnapshot: RoomSnapshot { broadcast.read { $0.visible } }

    /// One section's items with their hierarchy (`NSDiffableDataSourceSectionSnapshot`), or nil
    /// when there is no such section. O(items in the section)
    public func sectionSnapshot(for section: SnapshotIdentifier) -> SectionSnapshot? {
        broadcast.read { $0.snapshot.sectionSnapshot(of: section) }
    }

    private func changeExpansion(_ body: (inout OutlineExpansion) -> Void) {
        let room = room
        broadcast.publish { state -> RoomChange? in
            let old = state
            body(&state.expansion)
            guard state.snapshot.isOutline else { return nil }
            state.visible = state.expansion.visibleSnapshot(of: state.snapshot)
            var change = RoomChange(
                kind: .expansion, room: room, previousPosition: state.position, position: state.position, operations: [],
                snapshot: state.snapshot, updates: BatchUpdates())
            change.updates = BatchUpdates(
                from: old.visible, to: state.visible,
                operations: Self.rowReconfigures(old: old, new: state))
            change.visibleSnapshot = state.visible
            change.expansion = state.expansion
            state.positions.apply(change)
            return change
        }
    }

    /// `updateItems(.reconfigure)` for the rows shown before and after whose level, children or
    /// expansion changed (what a list draws beside the payload). O(n)
    static func rowReconfigures(old: State, new: State) -> [SnapshotOperation] {
        let before = RowTraits.of(old.snapshot, old.expansion), after = RowTraits.of(new.snapshot, new.expansion)
        var changed: [SnapshotElement] = []
        for (id, traits) in after where before[id].map({ $0 != traits }) == true { changed.append(SnapshotElement(id)) }
        return changed.isEmpty ? [] : [.updateItems(changed, .reconfigure)]
    }
}

extension RoomReplica.State {
    /// Makes `change` current and returns it as delivered: for an outline room (before or after),
    /// its updates and visible snapshot recomputed over the rows this viewer sees.
    mutating func follow(_ change: RoomChange) -> RoomChange {
        var change = change
        let old = self
        snapshot = change.snapshot
        position = change.position
        if old.snapshot.isOutline || change.snapshot.isOutline {
            expansion.prune(keeping: change.snapshot)
            visible = expansion.visibleSnapshot(of: change.snapshot)
            // Item updates name rows only where they are shown; the hierarchy's own marks follow.
            var operations: [SnapshotOperation] = []
            for operation in change.operations {
                switch operation {
                case .updateItems(let elements, let kind):
                    let shown = elements.filter { visible.contains(item: $0.id) }
                    if !shown.isEmpty { operations.append(.updateItems(shown, kind)) }
                case .updateSections:
                    operations.append(operation)
                default:
                    break
                }
            }
            operations += RoomReplica.rowReconfigures(old: old, new: self)
            change.updates = BatchUpdates(from: old.visible, to: visible, operations: operations)
        } else {
            visible = change.snapshot
        }
        change.visibleSnapshot = visible
        change.expansion = expansion
        positions.apply(change)
        return change
    }
}

/// What a list draws for a row beside its payload.
struct RowTraits: Equatable {
    var level: Int
    var hasChildren: Bool
    /// Expanded, and has children to show.
    var showsChildren: Bool

    /// The traits of every visible row of `snapshot` (flat or not: the other end of a change may
    /// be an outline). O(n)
    static func of(_ snapshot: RoomSnapshot, _ expansion: OutlineExpansion) -> [SnapshotIdentifier: RowTraits] {
        var result: [SnapshotIdentifier: RowTraits] = [:]
        for section in snapshot.sectionIdentifiers {
            let ids = snapshot.itemIdentifiers(inSection: section)!
            let levels = ids.map { snapshot.level(of: $0)! }
            var hiddenBelow = Int.max
            for k in ids.indices where levels[k] <= hiddenBelow {
                let hasChildren = k + 1 < ids.count && levels[k + 1] > levels[k]
                let expanded = expansion.isExpanded(ids[k])
                hiddenBelow = expanded ? Int.max : levels[k]
                result[ids[k]] = RowTraits(level: levels[k], hasChildren: hasChildren, showsChildren: hasChildren && expanded)
            }
        }
        return result
    }
}
