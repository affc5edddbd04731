// Outlines: items with a parent item in the same section (`NSDiffableDataSourceSectionSnapshot`).
//
// Each section stays one linked list, in depth-first order, which is what
// `itemIdentifiers(inSection:)` returns (as UIKit) and what the canonical encoding lists. An
// item's subtree is therefore a contiguous run of the list: the item, then every following item
// of a greater level. Each item's parent slot and level live in `outline`, indexed by slot, which
// is allocated the first time an item gets a parent and dropped once a batch leaves none: a flat
// room (every existing room) keeps its 32-byte nodes and O(1) operations, and its canonical
// encoding has no `levels` part, byte for byte as in protocol version 1.
//
// Costs: parent and level are O(1); finding the end of a subtree walks it, so inserting after an
// item or moving an item is O(its subtree); ancestor checks walk up, O(depth) ≤ maxOutlineDepth.

extension RoomSnapshot {
    /// The item's parent slot (`none`: a root). O(1)
    @inlinable func parentSlot(_ slot: Slot) -> Slot { outline.isEmpty ? Self.none : outline[Int(slot)].parent }
    /// The item's level (0: a root). O(1)
    @inlinable func levelOfSlot(_ slot: Slot) -> Int { outline.isEmpty ? 0 : Int(outline[Int(slot)].level) }

    /// Bytes of the canonical `levels` part: one varint per item when some item is nested, else
    /// none (Protocol/PROTOCOL.md §4). O(1)
    @inlinable var levelsPartBytes: Int { nestedItemCount > 0 ? numberOfItems + levelExtraBytes : 0 }

    /// Sets an item's parent and level, allocating `outline` (O(n), once) when the first item
    /// gets a parent. Keeps `nestedItemCount` and `levelExtraBytes` exact. O(1) otherwise.
    mutating func setPlace(_ slot: Slot, parent: Slot, level: Int) {
        if outline.isEmpty {
            if level == 0 { return }
            outline = [OutlineNode](repeating: .root, count: itemNodes.count)
        }
        let old = Int(outline[Int(slot)].level)
        if old > 0 { nestedItemCount -= 1 }
        if level > 0 { nestedItemCount += 1 }
        levelExtraBytes += Self.varintSize(level) - Self.varintSize(old)
        outline[Int(slot)] = OutlineNode(parent: parent, level: Int32(level))
    }

    /// Drops `outline` once no item has a parent, so that a room that was an outline for a while
    /// goes back to the flat layout. Called between batches only: an undo log may still need it.
    mutating func dropOutlineIfFlat() {
        if nestedItemCount == 0, !outline.isEmpty {
            outline = []
            levelExtraBytes = 0
        }
    }

    /// The last item of the subtree rooted at `slot`, in list order (`slot` itself for a leaf).
    /// O(subtree)
    func subtreeEnd(_ slot: Slot) -> Slot {
        guard !outline.isEmpty else { return slot }
        let level = outline[Int(slot)].level
        var last = slot
        var next = itemNodes[Int(slot)].next
        while next != Self.none, outline[Int(next)].level > level {
            last = next
            next = itemNodes[Int(next)].next
        }
        return last
    }

    /// Whether `slot` is `ancestor` or one of its descendants. O(depth)
    func isInSubtree(_ slot: Slot, of ancestor: Slot) -> Bool {
        var s = slot
        while s != Self.none {
            if s == ancestor { return true }
            s = parentSlot(s)
        }
        return false
    }

    /// The subtree rooted at `slot`, unlinked from its section, in list order; levels untouched.
    /// O(subtree)
    mutating func detachSubtree(_ slot: Slot) -> [Slot] {
        let last = subtreeEnd(slot)
        var slots: [Slot] = [slot]
        var s = slot
        while s != last {
            s = itemNodes[Int(s)].next
            slots.append(s)
        }
        for s in slots { unlinkItem(s) }
        return slots
    }

    /// Links a detached subtree into `section` after `after` (`none`: at the front), its root
    /// under `parent` at `level`, every descendant shifted by the same number of levels.
    /// O(subtree)
    mutating func attachSubtree(_ slots: [Slot], section: Slot, after: Slot, parent: Slot, level: Int) {
        let shift = level - levelOfSlot(slots[0])
        var previous = after
        for s in slots {
            linkItem(s, section: section, after: previous)
            previous = s
        }
        setPlace(slots[0], parent: parent, level: level)
        if shift != 0 {
            for s in slots.dropFirst() { setPlace(s, parent: outline[Int(s)].parent, level: Int(outline[Int(s)].level) + shift) }
        }
    }

    /// Levels below the subtree root's that its deepest item sits (0 for a leaf). O(subtree)
    func subtreeHeight(_ slot: Slot) -> Int {
        guard !outline.isEmpty else { return 0 }
        let level = outline[Int(slot)].level
        var height: Int32 = 0
        var next = itemNodes[Int(slot)].next
        while next != Self.none, outline[Int(next)].level > level {
            height = max(height, outline[Int(next)].level - level)
            next = itemNodes[Int(next)].next
        }
        return Int(height)
    }
}

// MARK: - Queries (NSDiffableDataSourceSectionSnapshot names)

extension RoomSnapshot {
    /// Whether some item has a parent.
    /// - Complexity: O(1)
    @inlinable public var isOutline: Bool { nestedItemCount > 0 }

    /// The item's parent, or `nil` for a root or an unknown item.
    /// - Complexity: O(1) expected, plus O(length) to copy the identifier.
    public func parent(of item: SnapshotIdentifier) -> SnapshotIdentifier? {
        guard let slot = itemSlot(item) else { return nil }
        let parent = parentSlot(slot)
        return parent == Self.none ? nil : itemIdentifier(at: parent)
    }

    /// The item's level: 0 for a root, 1 for its children, and so on; `nil` for an unknown item.
    /// - Complexity: O(1) expected.
    public func level(of item: SnapshotIdentifier) -> Int? {
        itemSlot(item).map { levelOfSlot($0) }
    }

    /// The item's children in order, or `nil` for an unknown item.
    /// - Complexity: O(the item's subtree).
    public func children(of item: SnapshotIdentifier) -> [SnapshotIdentifier]? {
        guard let slot = itemSlot(item) else { return nil }
        var result: [SnapshotIdentifier] = []
        let childLevel = levelOfSlot(slot) + 1
        let last = subtreeEnd(slot)
        var s = slot
        while s != last {
            s = itemNodes[Int(s)].next
            if levelOfSlot(s) == childLevel { result.append(itemIdentifier(at: s)) }
        }
        return result
    }

    /// The section's root items in order, or `nil` when there is no such section.
    /// - Complexity: O(items in the section).
    public func rootItems(inSection section: SnapshotIdentifier) -> [SnapshotIdentifier]? {
        guard let s = sectionIndex[section] else { return nil }
        var result: [SnapshotIdentifier] = []
        var i = sectionNodes[Int(s)].firstItem
        while i != Self.none {
            if levelOfSlot(i) == 0 { result.append(itemIdentifier(at: i)) }
            i = itemNodes[Int(i)].next
        }
        return result
    }

    /// How many root items the section has, or `nil` when there is no such section.
    /// - Complexity: O(1) while the snapshot is flat, else O(items in the section); allocates
    ///   nothing.
    public func numberOfRootItems(inSection section: SnapshotIdentifier) -> Int? {
        guard let s = sectionIndex[section] else { return nil }
        guard !outline.isEmpty else { return sectionNodes[Int(s)].itemCount }
        var count = 0
        var i = sectionNodes[Int(s)].firstItem
        while i != Self.none {
            if outline[Int(i)].level == 0 { count += 1 }
            i = itemNodes[Int(i)].next
        }
        return count
    }

    /// Every item's level, in the order of `itemIdentifiers` (the canonical `levels` part
    /// whenever some level is not 0).
    /// - Complexity: O(n)
    public var itemLevels: [Int] {
        var result: [Int] = []
        result.reserveCapacity(numberOfItems)
        var s = firstSection
        while s != Self.none {
            var i = sectionNodes[Int(s)].firstItem
            while i != Self.none {
                result.append(levelOfSlot(i))
                i = itemNodes[Int(i)].next
            }
            s = sectionNodes[Int(s)].next
        }
        return result
    }
}

// MARK: - Building from levels

/// A `levels` list (Protocol/PROTOCOL.md §4) that does not describe a forest of this snapshot's
/// items. A decoder reports it as a malformed frame.
public struct OutlineLevelsError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
}

extension RoomSnapshot {
    /// Gives the items of a flat snapshot the parents that `levels` describes: one level per item,
    /// in the order of `itemIdentifiers`; an item's parent is the nearest earlier item of the same
    /// section whose level is one less. This is how a decoder turns a canonical encoding with a
    /// `levels` part back into a snapshot (build the flat snapshot, then this).
    ///
    /// - Throws: `OutlineLevelsError` when the snapshot already has parents, `levels` does not
    ///   hold one level per item, the first item of a section is not at level 0, a level exceeds
    ///   the previous item's level in its section by more than one, or a level is
    ///   `maxOutlineDepth` or more; the snapshot is then unchanged. A list of zeros is accepted
    ///   (it changes nothing): refusing it, where a protocol demands, is the decoder's rule.
    /// - Complexity: O(n)
    public mutating func setOutlineLevels(_ levels: [Int], maxOutlineDepth: Int) throws(OutlineLevelsError) {
        guard nestedItemCount == 0 else { throw OutlineLevelsError(description: "the snapshot already has parents") }
        guard levels.count == numberOfItems else {
            throw OutlineLevelsError(description: "\(levels.count) levels for \(numberOfItems) items")
        }
        // Checked in full before anything changes, so that a failure leaves the snapshot as it was.
        var k = 0
        var s = firstSection
        while s != Self.none {
            var previous = -1
            var i = sectionNodes[Int(s)].firstItem
            while i != Self.none {
                let level = levels[k]
                guard level >= 0, level <= previous + 1 else {
                    throw OutlineLevelsError(
                        description:
                            "item \(itemIdentifier(at: i)) is at level \(level) after an item at level \(max(previous, 0)) of section \(sectionNodes[Int(s)].id)"
                            + (previous < 0 ? " (the first item of a section is at level 0)" : ""))
                }
                guard level < maxOutlineDepth else {
                    throw OutlineLevelsError(
                        description: "item \(itemIdentifier(at: i)) is at level \(level), over the outline limit of \(maxOutlineDepth) levels")
                }
                previous = level
                k += 1
                i = itemNodes[Int(i)].next
            }
            s = sectionNodes[Int(s)].next
        }
        guard levels.contains(where: { $0 > 0 }) else { return }
        // The path from the section's root to the current item: path[l] is its ancestor at level l.
        var path: [Slot] = []
        k = 0
        s = firstSection
        while s != Self.none {
            var i = sectionNodes[Int(s)].firstItem
            while i != Self.none {
                let level = levels[k]
                path.removeSubrange(level...)
                setPlace(i, parent: path.last ?? Self.none, level: level)
                path.append(i)
                k += 1
                i = itemNodes[Int(i)].next
            }
            path.removeAll(keepingCapacity: true)
            s = sectionNodes[Int(s)].next
        }
    }
}
