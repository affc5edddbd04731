// Diffing outlines: the item pass of `difference(to:)` when either end has parents.
//
// The batch has the flat diff's shape (RoomSnapshot+Diffing.swift: deletes, updates, sections, then
// items section by section in `b`'s order), with a sibling group (the children of one parent, or
// the roots of one section) in the role a section's items play in the flat pass:
//
// - Deletes: an item of `a` survives when it is in `b` and its section survives. `deleteItems`
//   lists the gone items whose parent survives (or roots); each takes its subtree. A survivor
//   whose parent is gone is first rescued: moved right after its topmost gone ancestor (those
//   after one ancestor in `a`'s order), before the deletes, so that it keeps its identity as
//   UIKit's `apply(_:to:)` keeps it; it then counts as a member of that ancestor's sibling
//   group, between the ancestor's subtree and the next sibling, and is placed like any other
//   (one move when that is its place in `b`, two otherwise). Only the items of a deleted section
//   are inserted again where they reappear: nothing moves out of a deleted section.
// - An item stays put when it survives, has the same parent in `a` and `b` (for a root: is a
//   root of the same section in both), and is in its group's longest increasing subsequence of
//   `a` positions. A child whose parent moves travels with it, even to another section. Moves
//   are therefore minimal for a batch that deletes first and rescues as above: the rescues +
//   (survivors whose parent, or root section, changes after them) + Σ over groups (survivors
//   staying in it − its LIS).
// - The others are placed in `b`'s depth-first order: after their previous sibling in `b`
//   (`moveItem`/`insertItems .after`, which lands after that sibling's whole subtree), else
//   before the group's first stable item, else as the parent's last child (`moveItemToParent`,
//   `appendChildren`) or the section's last root. Consecutive new siblings share one operation.
//   A moved item takes its current subtree along; its children that belong elsewhere move later.
//
// Why it is valid: in depth-first order an item's parent and previous sibling come first, so
// when an item is placed every one of its ancestors in `b` is already under its final parent
// (placed, or stable, whose parent never changed). The anchor's ancestors are then final, and
// none of them is the item being moved: no move lands in its own subtree.
//
// SnapshotLimits of intermediate states (PROTOCOL.md §5): counts and payload bytes are bounded as in the
// flat diff; the rescues only make items shallower, before anything is added. Two things are new. (1) An item that is not placed yet hangs under its `a` parent;
// going up from it, the first placed ancestor is at its final level, so its level is at most
// maxLevel(a) + maxLevel(b): `deepestLevelBound`. (2) The `levels` part is one varint per item
// once any item is nested; after the deletes at most |b| items exist, each at a level under that
// bound: `levelsExcess` over `b`'s own part. When either bound could cross a limit,
// `difference(to:limits:)` checks the batch by applying it; when it does cross one, it tries
// `flattenedDifference(to:)` (every item that changes parent first moved up to its section's
// roots: no state deeper than an end, every identity kept), and only then a rebuild.
//
// Cost: O(|a| + |b| + Σ k log k) over the groups' LIS inputs, one hash lookup per item of `b`
// (no neighbour guesses here: outlines are the rarer case). Applying the batch walks, for each
// `.after` anchor and each `toParent`, that item's current subtree.

extension Differ {
    mutating func runForest() -> [SnapshotOperation] {
        indexA()
        var sectionUpdates = Updates()
        var itemUpdates = Updates()
        matchSections(updates: &sectionUpdates)
        emitSections()
        let aItems = self.aItems, bItems = self.bItems
        let none = Self.none

        // b in order: slot, section (position in bSectionSlot), parent position, match in a.
        var bOrder: [Slot] = []
        var bSection: [Int32] = []
        var bParent: [Int32] = []
        var bMatch: [Slot] = []
        bOrder.reserveCapacity(b.numberOfItems)
        var bPosition = [Int32](repeating: -1, count: bItems.count)
        var maxLevelB = 0
        for (k, t) in bSectionSlot.enumerated() {
            var j = b.sectionNodes[Int(t)].firstItem
            while j != none {
                bPosition[Int(j)] = Int32(bOrder.count)
                let parent = b.parentSlot(j)
                bParent.append(parent == none ? -1 : bPosition[Int(parent)])
                bSection.append(Int32(k))
                bOrder.append(j)
                maxLevelB = max(maxLevelB, b.levelOfSlot(j))
                let id = bItems.idBytes(j)
                bMatch.append(a.itemIndex.find(id, tag: SlotIndex.tag(of: id), in: aItems) ?? none)
                j = bItems[Int(j)].next
            }
        }
        var kept = [Bool](repeating: false, count: aItems.count)
        for i in bMatch where i != none { kept[Int(i)] = true }
        // Survivors of a: in b, in a section that stays. In a's depth-first order (a parent
        // before its children): a gone item's topmost gone ancestor (itself when its parent
        // survives), and for a survivor under a gone parent, that ancestor, after which it is
        // rescued.
        var alive = [Bool](repeating: false, count: aItems.count)
        var topGone = [Slot](repeating: none, count: aItems.count)
        var rescuedAfter = [Slot](repeating: none, count: aItems.count)
        var rescued: [Slot] = []
        var maxLevelA = 0
        for i in aOrder {
            let parent = a.parentSlot(i)
            let parentGone = parent != none && !alive[Int(parent)]
            if kept[Int(i)] && aSectionInB[Int(aItems[Int(i)].section)] != none {
                alive[Int(i)] = true
                if parentGone {
                    rescuedAfter[Int(i)] = topGone[Int(parent)]
                    rescued.append(i)
                }
            } else {
                topGone[Int(i)] = parentGone ? topGone[Int(parent)] : i
            }
            maxLevelA = max(maxLevelA, a.levelOfSlot(i))
        }
        aKept = alive
        // Where a rescued survivor lands: right after its topmost gone ancestor's subtree, in
        // a's order among those rescued after the same one. Its key orders it with its new
        // siblings: `a` positions scaled, so that it falls between that subtree's last item and
        // the next one. O(|a|) for the subtrees' ends, only when something is rescued.
        var subtreeEnd: [Int32] = []
        if !rescued.isEmpty {
            subtreeEnd = aItemPos
            for i in aOrder.reversed() {
                let parent = a.parentSlot(i)
                if parent != none { subtreeEnd[Int(parent)] = max(subtreeEnd[Int(parent)], subtreeEnd[Int(i)]) }
            }
        }
        func key(_ i: Slot) -> Int64 {
            let after = rescuedAfter[Int(i)]
            guard after != none else { return Int64(aItemPos[Int(i)]) << 32 }
            return Int64(subtreeEnd[Int(after)]) << 32 | Int64(1 + aItemPos[Int(i)])
        }
        // Its parent once rescued: that of the ancestor it follows.
        func currentParent(_ i: Slot) -> Slot {
            let after = rescuedAfter[Int(i)]
            return a.parentSlot(after != none ? after : i)
        }

        // Groups: the roots of b's section k are group k; the children of position p are group
        // sectionCount + p.
        let sectionCount = bSectionSlot.count
        func group(_ p: Int) -> Int { bParent[p] >= 0 ? sectionCount + Int(bParent[p]) : Int(bSection[p]) }
        var status = [UInt8](repeating: Self.new, count: bOrder.count)
        var candidates = [[Int32]](repeating: [], count: sectionCount + bOrder.count)
        for p in bOrder.indices {
            let i = bMatch[p]
            guard i != none, alive[Int(i)] else { continue }
            let j = bOrder[p]
            if !RoomSnapshot.bytesEqual(aItems.recordBytes(i), bItems.recordBytes(j)) {  // same id: payloads differ
                itemUpdates.append(SnapshotElement(bItems.id(j), payload: bItems.payload(j)), from: aItems.payloadBytes(i).count)
            }
            status[p] = Self.moved
            // A child with the same parent stays in its group even when the parent changes
            // section: it travels with it. A root stays in the roots of the same section. A
            // rescued item is in the group of the ancestor it follows.
            let aParent = currentParent(i)
            let staysInGroup =
                bParent[p] >= 0
                ? aParent != none && aParent == bMatch[Int(bParent[p])]
                : aParent == none && aSectionInB[Int(aItems[Int(i)].section)] == bSectionSlot[Int(bSection[p])]
            if staysInGroup { candidates[group(p)].append(Int32(p)) }
        }
        var firstStable = [Int32](repeating: -1, count: candidates.count)
        var lis = LIS()
        var values: [Int32] = []
        var keys: [Int64] = []
        for g in candidates.indices where !candidates[g].isEmpty {
            let members = candidates[g]
            values.removeAll(keepingCapacity: true)
            if members.contains(where: { rescuedAfter[Int(bMatch[Int($0)])] != none }) {
                // A group a rescued item joined: its members' keys, ranked. O(k log k).
                keys = members.map { key(bMatch[Int($0)]) }
                var rank = [Int32](repeating: 0, count: members.count)
                for (r, k) in keys.indices.sorted(by: { keys[$0] < keys[$1] }).enumerated() { rank[k] = Int32(r) }
                values.append(contentsOf: rank)
            } else {
                for p in members { values.append(aItemPos[Int(bMatch[Int(p)])]) }
            }
            lis.mark(values) { k in
                status[Int(members[k])] = Self.stable
                firstStable[g] = members[k]  // marked back to front: the last call is the first
            }
        }

        // SnapshotOperation.Placement, in b's depth-first order.
        var lastPlaced = [Int32](repeating: -1, count: candidates.count)
        var p = 0
        while p < bOrder.count {
            let g = group(p)
            if status[p] == Self.stable {
                lastPlaced[g] = Int32(p)
                p += 1
                continue
            }
            let previous = lastPlaced[g]
            if status[p] == Self.new {
                // A run of new siblings: each next one directly follows (no children between).
                var run = [SnapshotElement(bItems.id(bOrder[p]), payload: bItems.payload(bOrder[p]))]
                var last = p
                while last + 1 < bOrder.count, status[last + 1] == Self.new, group(last + 1) == g {
                    last += 1
                    run.append(SnapshotElement(bItems.id(bOrder[last]), payload: bItems.payload(bOrder[last])))
                }
                if previous >= 0 {
                    ops.append(.insertItems(run, .after(bItems.id(bOrder[Int(previous)]))))
                } else if firstStable[g] >= 0 {
                    ops.append(.insertItems(run, .before(bItems.id(bOrder[Int(firstStable[g])]))))
                } else if bParent[p] >= 0 {
                    ops.append(.appendChildren(run, toParent: bItems.id(bOrder[Int(bParent[p])])))
                } else {
                    ops.append(.appendItems(run, toSection: b.sectionNodes[Int(bSectionSlot[Int(bSection[p])])].id))
                }
                lastPlaced[g] = Int32(last)
                p = last + 1
            } else {
                let id = bItems.id(bOrder[p])
                if previous >= 0 {
                    ops.append(.moveItem(id, .after(bItems.id(bOrder[Int(previous)]))))
                } else if firstStable[g] >= 0 {
                    ops.append(.moveItem(id, .before(bItems.id(bOrder[Int(firstStable[g])]))))
                } else if bParent[p] >= 0 {
                    ops.append(.moveItemToParent(id, parent: bItems.id(bOrder[Int(bParent[p])])))
                } else {
                    ops.append(.moveItemToSection(id, section: b.sectionNodes[Int(bSectionSlot[Int(bSection[p])])].id))
                }
                lastPlaced[g] = Int32(p)
                p += 1
            }
        }

        // Rescues: each survivor under a gone ancestor moved right after that ancestor, those
        // after one ancestor in reverse order (each lands right after the ancestor's subtree),
        // so that they end in a's order. Before the deletes, which would take them along.
        var rescues: [SnapshotOperation] = []
        for i in rescued.reversed() {
            rescues.append(.moveItem(aItems.id(i), .after(aItems.id(rescuedAfter[Int(i)]))))
        }
        // Deletes: gone items whose parent survives (each takes its subtree), then the prefix.
        var keptCount = [Int](repeating: 0, count: a.sectionNodes.count)
        var goneItems: [SnapshotIdentifier] = []
        for i in aOrder {
            let s = aItems[Int(i)].section
            guard aSectionInB[Int(s)] != none else { continue }
            let parent = a.parentSlot(i)
            if alive[Int(i)] {
                keptCount[Int(s)] += 1
            } else if parent == none || alive[Int(parent)] {
                goneItems.append(aItems.id(i))
            }
        }
        var goneSections: [SnapshotIdentifier] = []
        var s = a.firstSection
        while s != none {
            let t = aSectionInB[Int(s)]
            if t == none {
                goneSections.append(a.sectionNodes[Int(s)].id)
            } else {
                let final = b.sectionNodes[Int(t)].itemCount
                varintExcess += RoomSnapshot.varintSize(keptCount[Int(s)] + final) - RoomSnapshot.varintSize(final)
            }
            s = a.sectionNodes[Int(s)].next
        }
        deepestLevelBound = maxLevelA + maxLevelB
        levelsExcess = b.numberOfItems * RoomSnapshot.varintSize(deepestLevelBound) - b.levelsPartBytes

        var prefix: [SnapshotOperation] = []
        if !goneSections.isEmpty { prefix.append(.deleteSections(goneSections)) }
        prefix.append(contentsOf: rescues)
        if !goneItems.isEmpty { prefix.append(.deleteItems(goneItems)) }
        Updates.append(sections: sectionUpdates, items: itemUpdates, to: &prefix)
        ops.insert(contentsOf: prefix, at: 0)
        return ops
    }
}

extension RoomSnapshot {
    /// The batch to `target` that first moves every item that changes parent up to its
    /// section's roots, then applies the diff from there: the fallback, before a rebuild, when
    /// the minimal batch passes the depth limit. The minimal batch can hang a subtree deeper
    /// than either end while it moves it; here every move makes the room shallower, or leaves
    /// each item at a level it has at one end, so no state is deeper than the deeper end. More
    /// moves (an item that changes parent may move twice); the same identities kept. Nil if the
    /// flattening does not apply (a bug).
    /// - Complexity: O(n) lookups and one `apply` of the flattening to a copy, plus the diff.
    func flattenedDifference(to target: RoomSnapshot) -> [SnapshotOperation]? {
        var flattening: [SnapshotOperation] = []
        for id in itemIdentifiers {
            guard let parent = parent(of: id), target.contains(item: id), target.parent(of: id) != parent,
                let section = sectionIdentifier(containingItem: id)
            else { continue }
            flattening.append(.moveItemToSection(id, section: section))
        }
        guard !flattening.isEmpty else { return nil }
        var flat = self
        guard (try? flat.apply(flattening, limits: .unlimited)) != nil else { return nil }
        return flattening + flat.difference(to: target, limits: .unlimited)
    }

    /// `rebuild()` of an outline: `deleteAllItems`, then each section appended with its items in
    /// depth-first order, roots by `appendItems` and children by `appendChildren`, consecutive
    /// siblings in one operation. Each prefix's result is a prefix of `self`. O(|self|) to build;
    /// applying it walks each parent's subtree once per run of its children.
    func rebuildOutline() -> [SnapshotOperation] {
        var ops: [SnapshotOperation] = [.deleteAllItems]
        withItems { items in
            var s = firstSection
            while s != Self.none {
                let section = sectionNodes[Int(s)]
                ops.append(.appendSections([SnapshotElement(section.id, payload: section.payload)]))
                var i = section.firstItem
                while i != Self.none {
                    let parent = parentSlot(i)
                    var run: [SnapshotElement] = []
                    // Siblings directly following each other: the next one has the same parent.
                    repeat {
                        run.append(SnapshotElement(items.id(i), payload: items.payload(i)))
                        i = items[Int(i)].next
                    } while i != Self.none && parentSlot(i) == parent
                    // The section just appended is the last one.
                    ops.append(parent == Self.none ? .appendItems(run, toSection: nil) : .appendChildren(run, toParent: items.id(parent)))
                }
                s = section.next
            }
        }
        return ops
    }
}
