// Windows (Protocol/PROTOCOL.md §9, "Windows"): which rows of a section a windowed member holds,
// the snapshot it holds, and where an `around` window goes when its anchor leaves.
//
// Rows are roots. Walking from one root to the next skips its subtree (O(subtree)); from one root
// to the previous walks up from the item before it (O(depth)). On a flat section both are O(1),
// so a window of w rows costs O(w) to find, wherever it is in a section of a million items: no
// position is ever computed.

extension RoomSnapshot {
    /// The root after `root`'s subtree in its section, or `none`.
    func nextRoot(_ root: Slot) -> Slot { itemNodes[Int(subtreeEnd(root))].next }

    /// The root before `root` in its section, or `none`: the root of the item just before it.
    func previousRoot(_ root: Slot) -> Slot {
        let previous = itemNodes[Int(root)].prev
        return previous == Self.none ? Self.none : rootOfSlot(previous)
    }

    /// The root whose subtree holds `slot`. O(depth)
    func rootOfSlot(_ slot: Slot) -> Slot {
        var root = slot
        while case let parent = parentSlot(root), parent != Self.none { root = parent }
        return root
    }

    /// The root slots of the window's rows, in order (empty when the section does not exist, or
    /// an `around` window's anchor is not one of its roots). O(rows + their subtrees)
    func windowRowSlots(_ window: SectionWindow) -> [Slot] {
        guard let s = sectionIndex[window.section] else { return [] }
        let section = sectionNodes[Int(s)]
        // Never more rows than items: the counts on the wire may be anything up to 2^64 − 1.
        let limit = { (count: UInt64) in Int(min(count, UInt64(section.itemCount))) }
        var rows: [Slot] = []
        switch window.range {
        case .first(let count):
            var row = section.firstItem
            while row != Self.none, rows.count < limit(count) {
                rows.append(row)
                row = nextRoot(row)
            }
        case .last(let count):
            var row = section.lastItem == Self.none ? Self.none : rootOfSlot(section.lastItem)
            while row != Self.none, rows.count < limit(count) {
                rows.append(row)
                row = previousRoot(row)
            }
            rows.reverse()
        case .around(let anchor, let before, let after):
            guard let a = itemSlot(anchor), itemNodes[Int(a)].section == s, parentSlot(a) == Self.none else { return [] }
            var row = previousRoot(a)
            while row != Self.none, rows.count < limit(before) {
                rows.append(row)
                row = previousRoot(row)
            }
            rows.reverse()
            rows.append(a)
            row = nextRoot(a)
            var added = 0
            while row != Self.none, added < limit(after) {
                rows.append(row)
                added += 1
                row = nextRoot(row)
            }
        }
        return rows
    }

    /// The identifiers of the window's rows, in order.
    /// - Complexity: O(rows + their subtrees)
    public func windowRows(_ window: SectionWindow) -> [SnapshotIdentifier] {
        let slots = windowRowSlots(window)
        return withItems { items in slots.map { items.id($0) } }
    }

    /// Whether `item` is a root of `section`: what an `around` window's anchor must be.
    /// - Complexity: O(1) expected.
    public func isRoot(_ item: SnapshotIdentifier, inSection section: SnapshotIdentifier) -> Bool {
        guard let slot = itemSlot(item), let s = sectionIndex[section] else { return false }
        return itemNodes[Int(slot)].section == s && parentSlot(slot) == Self.none
    }

    /// What a windowed member holds: every section in order with its payload, and for each
    /// section the window names, its rows' whole subtrees with their levels.
    /// - Complexity: O(sections + the window's items)
    public func windowSnapshot(_ window: [SectionWindow]) -> RoomSnapshot {
        var bySection: [SnapshotIdentifier: SectionWindow] = [:]
        for sectionWindow in window where bySection[sectionWindow.section] == nil { bySection[sectionWindow.section] = sectionWindow }
        var ops: [SnapshotOperation] = []
        ops.reserveCapacity(numberOfSections)
        withItems { items in
            var s = firstSection
            while s != Self.none {
                let node = sectionNodes[Int(s)]
                ops.append(.appendSections([SnapshotElement(node.id, payload: node.payload)]))
                if let sectionWindow = bySection[node.id] {
                    var roots: [SnapshotElement] = []
                    for row in windowRowSlots(sectionWindow) {
                        roots.append(SnapshotElement(items.id(row), payload: items.payload(row)))
                        let end = subtreeEnd(row)
                        guard end != row else { continue }
                        // A root with children: it goes in before them.
                        ops.append(.appendItems(roots, toSection: node.id))
                        roots = []
                        var child = row
                        repeat {
                            child = itemNodes[Int(child)].next
                            ops.append(
                                .appendChildren([SnapshotElement(items.id(child), payload: items.payload(child))], toParent: items.id(parentSlot(child))))
                        } while child != end
                    }
                    if !roots.isEmpty { ops.append(.appendItems(roots, toSection: node.id)) }
                }
                s = node.next
            }
        }
        var result = RoomSnapshot()
        do {
            try result.apply(ops, limits: .unlimited)
        } catch {
            // A window is part of a valid snapshot, built in its own order: it always applies.
            preconditionFailure("a window snapshot did not build: \(error)")
        }
        return result
    }

    /// Every section's item count (children included), in section order: a windowed member's
    /// counts.
    /// - Complexity: O(sections)
    public var sectionItemCounts: [UInt64] {
        var counts: [UInt64] = []
        counts.reserveCapacity(numberOfSections)
        var s = firstSection
        while s != Self.none {
            counts.append(UInt64(sectionNodes[Int(s)].itemCount))
            s = sectionNodes[Int(s)].next
        }
        return counts
    }

    /// What an item just placed touches: the items just before and after it in its section's
    /// order, and its parent. An item placed inside a window has the window's item before it
    /// (a row, or a child of one); one placed at a full window's edge, outside, changes nothing
    /// the window holds; a window that is not full is the caller's to check.
    /// Empty for an unknown item.
    /// - Complexity: O(1) expected.
    public func adjacentItems(of item: SnapshotIdentifier) -> [SnapshotIdentifier] {
        guard let slot = itemSlot(item) else { return [] }
        let node = itemNodes[Int(slot)]
        return withItems { items in
            [node.prev, node.next, parentSlot(slot)].filter { $0 != Self.none }.map { items.id($0) }
        }
    }

    /// `window` after a change of the room: itself, unless it is an `around` window whose anchor
    /// is no longer a root of its section. Then the anchor becomes the first of
    /// `previousRows` (the rows it held before the change) after the old anchor that still is
    /// one, else the last before it that still is, else the window becomes the section's first
    /// `before + 1 + after` rows.
    /// - Complexity: O(previous rows)
    public func reanchored(_ window: SectionWindow, previousRows: [SnapshotIdentifier]) -> SectionWindow {
        guard case .around(let anchor, let before, let after) = window.range, !isRoot(anchor, inSection: window.section) else {
            return window
        }
        let at = previousRows.firstIndex(of: anchor) ?? -1
        let later = previousRows[(at + 1)...].first { isRoot($0, inSection: window.section) }
        let earlier = previousRows[..<max(at, 0)].last { isRoot($0, inSection: window.section) }
        if let next = later ?? earlier {
            return SectionWindow(section: window.section, range: .around(anchor: next, before: before, after: after))
        }
        return SectionWindow(section: window.section, range: .first(window.size))
    }
}
