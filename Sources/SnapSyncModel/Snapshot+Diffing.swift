// Diffing: the batch of operations that turns one snapshot into another.
//
// The daemon answers a REPLACE with a DIFF that every replica applies, so the batch must be
// small (it goes to every member of the room) and cheap to compute on rooms of 100k items.
//
// Shape of the result, in this order (each part only when non-empty):
//  1. `deleteSections` for sections of `a` that are gone and keep none of their items: deleting
//     them first keeps every later state small;
//  2. one `deleteItems` for gone items of surviving sections (the items of deleted sections go
//     with their section);
//  3. `updateSections` and `updateItems(.reload)` for payload changes of elements in both;
//  4. sections in `b`'s order: new ones inserted (consecutive ones in one `insertSections`, or
//     `appendSections` when no section of `a` survives), common ones outside the longest
//     increasing subsequence (LIS) of their `a` positions moved;
//  5. items, section by section in `b`'s order: an item stays put when it is in the same section
//     in `a` and `b` and in that section's LIS; the others are inserted (consecutive new items in
//     one operation) or moved;
//  6. `deleteSections` for the gone sections that still had items to hand over in step 5.
//
// Why LIS: a move relocates one element and keeps the relative order of all others, so the
// elements that never move must already be in `b`'s relative order. The largest such set is a
// longest increasing subsequence of their `a` positions; everything outside it must move once.
// So the number of moves is minimal: (common sections − section LIS) for sections, and, for
// items, (items that change section) + Σ over sections (items staying in it − its LIS).
//
// Why anchors on the previous element of `b`: processing `b` in order, each placed element goes
// right after its predecessor, which is already in place, so the elements handled so far plus the
// stable ones are always in `b`'s order. Elements that still have to leave can sit anywhere in
// between; they are gone by the end. That needs no positions or indexes, only identifiers.
//
// Cost: O(|a| + |b| + Σ k log k) over the per-section LIS inputs, with one hash lookup per element
// of `b` into `a`'s existing index at most (usually far fewer: see `matchAndEmitItems`), and flat arrays
// indexed by `a`'s slots for everything else.

extension Snapshot {
    /// The batch that turns `a` into `b`: `a.apply(Snapshot.diff(a, b)) == b`.
    /// See `difference(to:)`.
    /// - Complexity: O(|a| + |b| + Σ k log k), k the items kept in each section.
    public static func diff(_ a: Snapshot, _ b: Snapshot) -> [SnapshotOperation] { a.difference(to: b) }

    /// The batch that turns `self` into `other` when applied in order:
    /// `self.apply(self.difference(to: other)) == other`, and it is empty when they are equal.
    ///
    /// Every element that can keep its identity does (a payload change is an update, never a
    /// delete and insert), and the number of moves is the minimum (see the file comment).
    /// Payload changes are reported as `updateItems(_, .reload)`.
    ///
    /// Intermediate states hold up to |a ∪ b| sections and |b| items plus the gone items of
    /// deleted sections that hand items over, so apply the result with limits that admit that
    /// (for example `Limits.unlimited`, once `other` itself has been checked against the real
    /// limits).
    ///
    /// - Complexity: O(|a| + |b| + Σ k log k), k the items that stay in each section; one hash
    ///   lookup per section and per item of `other`.
    public func difference(to other: Snapshot) -> [SnapshotOperation] {
        if other.isEmpty { return isEmpty ? [] : [.deleteAllItems] }
        // The pointers live only as long as these closures, and so does the Differ.
        return withItems { aItems in
            other.withItems { bItems in
                var differ = Differ(a: self, b: other, aItems: aItems, bItems: bItems)
                return differ.run()
            }
        }
    }
}

/// The working state of one `difference(to:)` call. Arrays named `a…` are indexed by slots of
/// `a`; arrays named `b…` by position in a walk of `b` (sections or items in order).
private struct Differ {
    typealias Slot = Snapshot.Slot
    static var none: Slot { Snapshot.none }

    let a: Snapshot
    let b: Snapshot
    /// The item slots and bytes of `a` and `b`, read through pointers in the hot loops: array
    /// access through `self` in a mutating method retains the buffer and re-checks it every time.
    /// Identifiers and payloads are compared in place; they are copied out only into operations.
    let aItems: Snapshot.ItemsView
    let bItems: Snapshot.ItemsView

    /// Item status in `b` order.
    static let new: UInt8 = 0, stable: UInt8 = 1, moved: UInt8 = 2

    // Sections.
    /// b section position → slot in `b`, and slot in `a` (`none`: new).
    var bSectionSlot: [Slot] = []
    var bSectionA: [Slot] = []
    var bSectionStable: [Bool] = []
    /// a section slot → slot in `b` (`none`: the section is gone).
    var aSectionInB: [Slot]
    /// a section slot → its position in `a`.
    var aSectionPos: [Int32]

    // Items.
    /// a item slot → its position within its section of `a`.
    var aItemPos: [Int32]
    /// a item slot → it is also in `b`.
    var aKept: [Bool] = []
    /// a item slots in `a`'s order: the walk for gone items, without a second list traversal.
    var aOrder: [Slot] = []

    var ops: [SnapshotOperation] = []

    init(a: Snapshot, b: Snapshot, aItems: Snapshot.ItemsView, bItems: Snapshot.ItemsView) {
        self.a = a
        self.b = b
        self.aItems = aItems
        self.bItems = bItems
        aSectionInB = [Slot](repeating: Self.none, count: a.sectionNodes.count)
        aSectionPos = [Int32](repeating: -1, count: a.sectionNodes.count)
        aItemPos = [Int32](repeating: -1, count: a.itemNodes.count)
    }

    mutating func run() -> [SnapshotOperation] {
        indexA()
        var sectionUpdates: [Element] = []
        var itemUpdates: [Element] = []
        matchSections(updates: &sectionUpdates)
        emitSections()
        matchAndEmitItems(updates: &itemUpdates)
        // Deletes and updates come first in the batch but are known only now (they need every
        // item matched). Inserting them in front moves the other operations bitwise, with no
        // retain or release: O(ops) memmove.
        var prefix: [SnapshotOperation] = []
        emitDeletes(into: &prefix)
        if !sectionUpdates.isEmpty { prefix.append(.updateSections(sectionUpdates)) }
        if !itemUpdates.isEmpty { prefix.append(.updateItems(itemUpdates, .reload)) }
        ops.insert(contentsOf: prefix, at: 0)
        if !lateSectionDeletes.isEmpty { ops.append(.deleteSections(lateSectionDeletes)) }
        return ops
    }

    /// Positions in `a`: one walk of its lists. O(|a|).
    mutating func indexA() {
        aOrder.reserveCapacity(a.numberOfItems)
        var position: Int32 = 0
        var s = a.firstSection
        while s != Self.none {
            aSectionPos[Int(s)] = position
            position += 1
            var itemPosition: Int32 = 0
            var i = a.sectionNodes[Int(s)].firstItem
            while i != Self.none {
                aItemPos[Int(i)] = itemPosition
                itemPosition += 1
                aOrder.append(i)
                i = aItems[Int(i)].next
            }
            s = a.sectionNodes[Int(s)].next
        }
    }

    /// Pairs `b`'s sections with `a`'s and finds the ones that stay put. O(sections · log).
    mutating func matchSections(updates: inout [Element]) {
        let count = b.numberOfSections
        bSectionSlot.reserveCapacity(count)
        bSectionA.reserveCapacity(count)
        var values: [Int32] = []
        var positions: [Int32] = []
        var t = b.firstSection
        while t != Self.none {
            let node = b.sectionNodes[Int(t)]
            let s = a.sectionIndex[node.id] ?? Self.none
            if s != Self.none {
                aSectionInB[Int(s)] = t
                if a.sectionNodes[Int(s)].payload != node.payload { updates.append(Element(node.id, payload: node.payload)) }
                values.append(aSectionPos[Int(s)])
                positions.append(Int32(bSectionSlot.count))
            }
            bSectionSlot.append(t)
            bSectionA.append(s)
            t = node.next
        }
        bSectionStable = [Bool](repeating: false, count: count)
        var lis = LIS()
        lis.mark(values) { k in bSectionStable[Int(positions[k])] = true }
    }

    /// Pairs `b`'s items with `a`'s, classifies them and emits their operations, section by
    /// section. O(|b| + Σ k log k).
    ///
    /// Finding an item of `b` in `a` costs at most one hash lookup, but usually none: most items
    /// keep their neighbours, so the next item of `b` is checked first against a few guesses
    /// next to the previous match. A guess costs one identifier comparison with a node that is
    /// likely in cache; a lookup is a cache miss or two on a 100k-item room.
    ///
    /// Each section's operations are emitted right after its LIS, while its nodes are still in
    /// cache.
    mutating func matchAndEmitItems(updates: inout [Element]) {
        let aItems = self.aItems, bItems = self.bItems
        var kept = [Bool](repeating: false, count: aItems.count)
        let sectionInB = aSectionInB, position = aItemPos
        var lis = LIS()
        // Per section, reused: the status of each item, and the LIS input (a positions) with
        // the section-relative positions and slots it came from.
        var status: [UInt8] = []
        var values: [Int32] = []
        var positions: [Int32] = []
        var slots: [Slot] = []
        // Guesses: `expected` follows the last match; `resume` keeps the run that a match found
        // by hash (a moved-in item) interrupted, so the item after it is found again.
        var expected = Self.none, resume = Self.none
        for t in bSectionSlot {
            status.removeAll(keepingCapacity: true)
            values.removeAll(keepingCapacity: true)
            positions.removeAll(keepingCapacity: true)
            slots.removeAll(keepingCapacity: true)
            var j = b.sectionNodes[Int(t)].firstItem
            while j != Self.none {
                let id = bItems.idBytes(j)
                var i = Self.none
                if expected != Self.none {
                    if Snapshot.bytesEqual(aItems.idBytes(expected), id) {
                        i = expected
                    } else {
                        // One item of `a` skipped: deleted, or moved away from here.
                        let skip = aItems[Int(expected)].next
                        if skip != Self.none, Snapshot.bytesEqual(aItems.idBytes(skip), id) { i = skip }
                    }
                }
                if i == Self.none, resume != Self.none, Snapshot.bytesEqual(aItems.idBytes(resume), id) { i = resume }
                if i != Self.none {
                    resume = Self.none
                } else {
                    i = a.itemIndex.find(id, tag: SlotIndex.tag(of: id), in: aItems) ?? Self.none
                    if i != Self.none, expected != Self.none { resume = expected }
                }
                if i != Self.none {
                    // A new item (no match) leaves the guesses alone: the next one may be it.
                    expected = aItems[Int(i)].next
                    kept[Int(i)] = true
                    if !Snapshot.bytesEqual(aItems.payloadBytes(i), bItems.payloadBytes(j)) {
                        updates.append(Element(bItems.id(j), payload: bItems.payload(j)))
                    }
                    if sectionInB[Int(aItems[Int(i)].section)] == t {
                        values.append(position[Int(i)])
                        positions.append(Int32(status.count))
                        slots.append(j)
                    }
                    status.append(Self.moved)
                } else {
                    status.append(Self.new)
                }
                j = bItems[Int(j)].next
            }
            var firstStable = Self.none
            lis.mark(values) { k in
                status[Int(positions[k])] = Self.stable
                firstStable = slots[k]  // marked back to front: the last call is the first item
            }
            emitItems(ofSection: t, status: status, firstStable: firstStable)
        }
        aKept = kept
    }

    /// Step 5 for one section: every non-stable item placed after its predecessor in `b`.
    /// O(items of the section).
    mutating func emitItems(ofSection t: Slot, status: [UInt8], firstStable: Slot) {
        let bItems = self.bItems
        let sectionID = b.sectionNodes[Int(t)].id
        let firstStableID = firstStable == Self.none ? nil : bItems.id(firstStable)
        var previous = Self.none
        var g = 0
        var j = b.sectionNodes[Int(t)].firstItem
        while j != Self.none {
            switch status[g] {
            case Self.stable:
                previous = j
                g += 1
                j = bItems[Int(j)].next
            case Self.new:
                var group: [Element] = []
                var last = j
                while j != Self.none, status[g] == Self.new {
                    group.append(Element(bItems.id(j), payload: bItems.payload(j)))
                    last = j
                    g += 1
                    j = bItems[Int(j)].next
                }
                if previous != Self.none {
                    ops.append(.insertItems(group, .after(bItems.id(previous))))
                } else if let anchor = firstStableID {
                    ops.append(.insertItems(group, .before(anchor)))
                } else {
                    ops.append(.appendItems(group, toSection: sectionID))
                }
                previous = last
            default:
                let id = bItems.id(j)
                if previous != Self.none {
                    ops.append(.moveItem(id, .after(bItems.id(previous))))
                } else if let anchor = firstStableID {
                    ops.append(.moveItem(id, .before(anchor)))
                } else {
                    ops.append(.moveItemToSection(id, section: sectionID))
                }
                previous = j
                g += 1
                j = bItems[Int(j)].next
            }
        }
    }

    /// Gone sections that hand items over to other sections: deleted last.
    var lateSectionDeletes: [Identifier] = []

    /// Steps 1 and 2: gone sections with nothing to hand over, then gone items. O(|a|).
    mutating func emitDeletes(into prefix: inout [SnapshotOperation]) {
        var late = [Bool](repeating: false, count: a.sectionNodes.count)
        var goneItems: [Identifier] = []
        for i in aOrder {
            let s = aItems[Int(i)].section
            if aKept[Int(i)] {
                if aSectionInB[Int(s)] == Self.none { late[Int(s)] = true }
            } else if aSectionInB[Int(s)] != Self.none {
                goneItems.append(aItems.id(i))
            }
        }
        var early: [Identifier] = []
        var s = a.firstSection
        while s != Self.none {
            if aSectionInB[Int(s)] == Self.none {
                if late[Int(s)] { lateSectionDeletes.append(a.sectionNodes[Int(s)].id) }
                else { early.append(a.sectionNodes[Int(s)].id) }
            }
            s = a.sectionNodes[Int(s)].next
        }
        if !early.isEmpty { prefix.append(.deleteSections(early)) }
        if !goneItems.isEmpty { prefix.append(.deleteItems(goneItems)) }
    }

    /// Step 4: every section of `b` placed after its predecessor in `b`. O(sections of b).
    mutating func emitSections() {
        let count = bSectionSlot.count
        let firstStable = bSectionStable.firstIndex(of: true).map { b.sectionNodes[Int(bSectionSlot[$0])].id }
        var p = 0
        while p < count {
            if bSectionStable[p] { p += 1; continue }
            let id = b.sectionNodes[Int(bSectionSlot[p])].id
            if bSectionA[p] == Self.none {
                var group: [Element] = []
                var q = p
                while q < count, bSectionA[q] == Self.none {
                    let node = b.sectionNodes[Int(bSectionSlot[q])]
                    group.append(Element(node.id, payload: node.payload))
                    q += 1
                }
                if p > 0 {
                    ops.append(.insertSections(group, .after(b.sectionNodes[Int(bSectionSlot[p - 1])].id)))
                } else if let firstStable {
                    ops.append(.insertSections(group, .before(firstStable)))
                } else {
                    // No stable section means no section of `a` survives: whatever is there
                    // now gets deleted, so the end is as good a place as the front.
                    ops.append(.appendSections(group))
                }
                p = q
            } else {
                // A common section outside the LIS: there is a stable one, so `firstStable` is set.
                let placement: Placement = p > 0 ? .after(b.sectionNodes[Int(bSectionSlot[p - 1])].id) : .before(firstStable!)
                ops.append(.moveSection(id, placement))
                p += 1
            }
        }
    }
}

/// Longest strictly increasing subsequence by patience sorting: O(k log k), O(k) when the input
/// is already mostly increasing (the common case: most elements stay), thanks to the check
/// against the last pile before the binary search. Buffers are kept across calls.
private struct LIS {
    /// `tails[l]`: index of the smallest value ending an increasing run of length l + 1, and
    /// `tailValues[l]` that value: the binary search reads one contiguous array instead of
    /// chasing indexes.
    var tails: [Int32] = []
    var tailValues: [Int32] = []
    /// `predecessor[k]`: the index before k in the best run ending at k, or -1.
    var predecessor: [Int32] = []

    /// Calls `body` with the index of every element of one longest increasing subsequence of
    /// `values` (distinct), from the last to the first.
    mutating func mark(_ values: [Int32], _ body: (Int) -> Void) {
        tails.removeAll(keepingCapacity: true)
        tailValues.removeAll(keepingCapacity: true)
        predecessor.removeAll(keepingCapacity: true)
        for k in values.indices {
            let v = values[k]
            if let last = tailValues.last, last > v {
                // Lowest pile whose tail is above v (values are distinct).
                var low = 0, high = tailValues.count - 1
                while low < high {
                    let mid = (low + high) / 2
                    if tailValues[mid] < v { low = mid + 1 } else { high = mid }
                }
                predecessor.append(low > 0 ? tails[low - 1] : -1)
                tails[low] = Int32(k)
                tailValues[low] = v
            } else {
                predecessor.append(tails.last ?? -1)
                tails.append(Int32(k))
                tailValues.append(v)
            }
        }
        var k = tails.last ?? -1
        while k >= 0 {
            body(Int(k))
            k = predecessor[Int(k)]
        }
    }
}
