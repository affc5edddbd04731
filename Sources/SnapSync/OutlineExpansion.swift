/// Which items of an outline one viewer has expanded: the part of UIKit's section snapshot that is
/// not room state. Two people looking at one shared outline expand different items, so the room
/// (and every DIFF) holds the hierarchy, and each replica holds its own `OutlineExpansion`
/// (`RoomReplica.expand(_:)`). A room that wants shared expansion keeps it in the items' payloads.
///
/// An item's rows are shown when every ancestor is expanded (`isVisible`); roots always are.
/// Stored as the default plus the items that differ from it, so "everything collapsed" and
/// "everything expanded" both cost nothing, and items that leave the room are forgotten
/// (`RoomReplica` prunes them on every change).
public struct OutlineExpansion: Hashable, Sendable {
    /// Whether an item nobody expanded or collapsed is expanded.
    public var expandsByDefault: Bool
    /// The items whose state is not the default.
    var exceptions: Set<SnapshotIdentifier>

    /// Every item collapsed (UIKit's section snapshot starts so), or every item expanded; then
    /// `expanded` items expanded (over a collapsed default).
    public init(expandsByDefault: Bool = false, expanded: some Sequence<SnapshotIdentifier> = [SnapshotIdentifier]()) {
        self.expandsByDefault = expandsByDefault
        exceptions = expandsByDefault ? [] : Set(expanded)
    }

    /// O(1)
    public func isExpanded(_ item: SnapshotIdentifier) -> Bool { expandsByDefault != exceptions.contains(item) }

    /// O(1)
    public mutating func expand(_ item: SnapshotIdentifier) {
        if expandsByDefault { exceptions.remove(item) } else { exceptions.insert(item) }
    }

    /// O(1)
    public mutating func collapse(_ item: SnapshotIdentifier) {
        if expandsByDefault { exceptions.insert(item) } else { exceptions.remove(item) }
    }

    /// Whether `item` is shown: it is in `snapshot` and each of its ancestors is expanded.
    /// - Complexity: O(depth)
    public func isVisible(_ item: SnapshotIdentifier, in snapshot: RoomSnapshot) -> Bool {
        guard snapshot.contains(item: item) else { return false }
        var ancestor = snapshot.parent(of: item)
        while let parent = ancestor {
            if !isExpanded(parent) { return false }
            ancestor = snapshot.parent(of: parent)
        }
        return true
    }

    /// `snapshot` without the items under a collapsed item: the rows a list shows, with their
    /// levels (a shown item's ancestors are shown). A flat snapshot is returned as it is.
    /// - Complexity: O(n) for an outline (a new snapshot); O(1) for a flat one.
    public func visibleSnapshot(of snapshot: RoomSnapshot) -> RoomSnapshot {
        guard snapshot.isOutline else { return snapshot }
        var sections: [(section: SnapshotElement, items: [SnapshotElement])] = []
        var levels: [Int] = []
        for section in snapshot.sections {
            var items: [SnapshotElement] = []
            // Items deeper than this are under a collapsed item.
            var hiddenBelow = Int.max
            for item in snapshot.items(inSection: section.id) {
                let level = snapshot.level(of: item.id)!
                if level > hiddenBelow { continue }
                hiddenBelow = isExpanded(item.id) ? Int.max : level
                items.append(item)
                levels.append(level)
            }
            sections.append((section, items))
        }
        // A subset of a valid snapshot, closed under parents: neither step can fail.
        var visible = try! RoomSnapshot(sections, limits: .unlimited)
        try! visible.setOutlineLevels(levels, maxOutlineDepth: .max)
        return visible
    }

    /// Forgets the items `snapshot` no longer holds. O(items that differ from the default)
    mutating func prune(keeping snapshot: RoomSnapshot) {
        exceptions = exceptions.filter { snapshot.contains(item: $0) }
    }
}
