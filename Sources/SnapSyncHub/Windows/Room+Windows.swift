import SnapSyncModel

// Which windowed members of a room a write may reach, found from what the write touched rather
// than by asking every member: each item of a window snapshot maps to the members holding it,
// and each section to the members whose window of it is not full. Kept in step with every
// member's window snapshot (`setWindow`); `checkWindowIndex` proves it.

extension Room {
    /// Makes `member` hold `snapshot` (and `window`, set first), keeping the index. O(items of
    /// the old and new window snapshots).
    func setWindowSnapshot(_ member: MemberWindow, _ snapshot: RoomSnapshot) {
        unindex(member)
        member.snapshot = snapshot
        index(member)
    }

    /// Adds a new windowed member (its snapshot set) to the index.
    func index(_ member: MemberWindow) {
        let id = member.session.id
        for item in member.snapshot.itemIdentifiers { windowMembersByItem[item, default: []].insert(id) }
        for section in member.unfilledSections { unfilledWindowMembers[section, default: []].insert(id) }
    }

    /// Takes `member` out of the index (it leaves, or its snapshot is about to change).
    func unindex(_ member: MemberWindow) {
        let id = member.session.id
        for item in member.snapshot.itemIdentifiers {
            windowMembersByItem[item]?.remove(id)
            if windowMembersByItem[item]?.isEmpty == true { windowMembersByItem[item] = nil }
        }
        for section in member.unfilledSections {
            unfilledWindowMembers[section]?.remove(id)
            if unfilledWindowMembers[section]?.isEmpty == true { unfilledWindowMembers[section] = nil }
        }
    }

    /// The windowed members a batch that touched `touched` items and placed items into
    /// `filledSections` may reach. Conservative (a member found may get no frame), never wrong
    /// the other way: a batch outside a window moves no row in or out of it unless it places an
    /// item next to one of its items (`touched` holds every placed item's neighbours), or it
    /// places an item in a section whose window is not full.
    /// - Complexity: O(touched + filled sections + the members found), expected.
    func windowMembers(touching touched: Set<SnapshotIdentifier>, filling filledSections: Set<SnapshotIdentifier>) -> Set<UInt64> {
        var found = Set<UInt64>()
        for item in touched { if let members = windowMembersByItem[item] { found.formUnion(members) } }
        for section in filledSections { if let members = unfilledWindowMembers[section] { found.formUnion(members) } }
        return found
    }

    /// The index says exactly what the members' window snapshots hold.
    func checkWindowIndex() throws(InvariantViolation) {
        var items: [SnapshotIdentifier: Set<UInt64>] = [:]
        var unfilled: [SnapshotIdentifier: Set<UInt64>] = [:]
        for (id, member) in windows {
            for item in member.snapshot.itemIdentifiers { items[item, default: []].insert(id) }
            for section in member.unfilledSections { unfilled[section, default: []].insert(id) }
        }
        guard items == windowMembersByItem, unfilled == unfilledWindowMembers else {
            throw InvariantViolation(description: "room \(name): the window index does not match its windowed members' snapshots")
        }
    }
}
