// Diffing outlines: the item pass of `difference(to:)` when either end has parents.
//
// The batch has the flat diff's shape (Snapshot+Diffing.swift: deletes, updates, sections, then
// items section by section in `b`'s order), with a sibling group (the children of one parent, or
// the roots of one section) in the role a section's items play in the flat pass:
//
// - Deletes: an item of `a` survives when it is in `b`, its section survives, and its parent
//   survives. `deleteItems` lists the gone items whose parent survives (or roots); each takes its
//   subtree. An item of `b` whose ancestor in `a` is gone is inserted where it reappears, not
//   moved, as the items of a deleted section are: nothing moves out of something deleted.
// - An item stays put when it survives, has the same parent in `a` and `b` (for a root: is a
//   root of the same section in both), and is in its group's longest increasing subsequence of
//   `a` positions. A child whose parent moves travels with it, even to another section. Moves
//   are therefore minimal for a batch that deletes first: (survivors whose parent, or root
//   section, changes) + Σ over groups (survivors staying in it − its LIS).
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
// Limits of intermediate states (PROTOCOL.md §5): counts and payload bytes are bounded as in the
// flat diff. Two things are new. (1) An item that is not placed yet hangs under its `a` parent;
// going up from it, the first placed ancestor is at its final level, so its level is at most
// maxLevel(a) + maxLevel(b): `deepestLevelBound`. (2) The `levels` part is one varint per item
// once any item is nested; after the deletes at most |b| items exist, each at a level under that
// bound: `levelsExcess` over `b`'s own part. When either bound could cross a limit,
// `difference(to:limits:)` checks the batch by applying it and falls back to a rebuild.
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
        // Survivors of a, in a's depth-first order (a parent before its children).
        var alive = [Bool](repeating: false, count: aItems.count)
        var maxLevelA = 0
        for i in aOrder {
            let parent = a.parentSlot(i)
            alive[Int(i)] = kept[Int(i)] && aSectionInB[Int(aItems[Int(i)].section)] != none && (parent == none || alive[Int(parent)])
            maxLevelA = max(maxLevelA, a.levelOfSlot(i))
        }
        aKept = alive

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
            if !Snapshot.bytesEqual(aItems.payloadBytes(i), bItems.payloadBytes(j)) {
                itemUpdates.append(SnapshotElement(bItems.id(j), payload: bItems.payload(j)), from: aItems.payloadBytes(i).count)
            }
            status[p] = Self.moved
            // A child with the same parent stays in its group even when the parent changes
            // section: it travels with it. A root stays in the roots of the same section.
            let aParent = a.parentSlot(i)
            let staysInGroup =
                bParent[p] >= 0
                ? aParent != none && aParent == bMatch[Int(bParent[p])]
                : aParent == none && aSectionInB[Int(aItems[Int(i)].section)] == bSectionSlot[Int(bSection[p])]
            if staysInGroup { candidates[group(p)].append(Int32(p)) }
        }
        var firstStable = [Int32](repeating: -1, count: candidates.count)
        var lis = LIS()
        var values: [Int32] = []
        for g in candidates.indices where !candidates[g].isEmpty {
            let members = candidates[g]
            values.removeAll(keepingCapacity: true)
            for p in members { values.append(aItemPos[Int(bMatch[Int(p)])]) }
            lis.mark(values) { k in
                status[Int(members[k])] = Self.stable
                firstStable[g] = members[k]  // marked back to front: the last call is the first
            }
        }

        // Placement, in b's depth-first order.
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

        // Deletes: gone items whose parent survives (each takes its subtree), then the prefix.
        var keptCount = [Int](repeating: 0, count: a.sectionNodes.count)
        var goneItems: [Identifier] = []
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
        var goneSections: [Identifier] = []
        var s = a.firstSection
        while s != none {
            let t = aSectionInB[Int(s)]
            if t == none {
                goneSections.append(a.sectionNodes[Int(s)].id)
            } else {
                let final = b.sectionNodes[Int(t)].itemCount
                varintExcess += Snapshot.varintSize(keptCount[Int(s)] + final) - Snapshot.varintSize(final)
            }
            s = a.sectionNodes[Int(s)].next
        }
        deepestLevelBound = maxLevelA + maxLevelB
        levelsExcess = b.numberOfItems * Snapshot.varintSize(deepestLevelBound) - b.levelsPartBytes

        var prefix: [SnapshotOperation] = []
        if !goneSections.isEmpty { prefix.append(.deleteSections(goneSections)) }
        if !goneItems.isEmpty { prefix.append(.deleteItems(goneItems)) }
        Updates.append(sections: sectionUpdates, items: itemUpdates, to: &prefix)
        ops.insert(contentsOf: prefix, at: 0)
        return ops
    }
}

extension Snapshot {
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
