// Diffing: the batch of operations that turns one snapshot into another.
//
// The daemon answers a REPLACE with a DIFF that every replica applies, so the batch must be
// small (it goes to every member of the room) and cheap to compute on rooms of 100k items.
//
// Shape of the result, in this order (each part only when non-empty):
//  1. one `deleteSections` for every section of `a` that is gone, with all its items: an item of
//     a deleted section that reappears elsewhere in `b` is inserted there, not moved (as staged
//     changesets and UIKit's batch updates do: nothing moves out of a deleted section);
//  2. one `deleteItems` for gone items of surviving sections;
//  3. `updateSections` and `updateItems(.reload)` for payload changes that do not grow the
//     payload, then the same for those that do;
//  4. sections in `b`'s order: new ones inserted (consecutive ones in one `insertSections`, or
//     `appendSections` when no section of `a` survives), common ones outside the longest
//     increasing subsequence (LIS) of their `a` positions moved;
//  5. items, section by section in `b`'s order: an item stays put when it is in the same section
//     in `a` and `b` and in that section's LIS; the others are inserted (consecutive new items in
//     one operation) or moved.
//
// Why this order: every prefix of the batch stays within the limits `a` and `b` both meet, so a
// replica applying the DIFF op by op under the room's limits (PROTOCOL.md §5) never refuses it.
// Deletes and shrinking updates only shrink; after them the sections and items present are a
// subset of `b`'s, each with at most `b`'s payload from step 3 on, so counts never exceed `b`'s
// and the size never exceeds `b`'s except by item-count varints: a section can hold items on
// their way out while it already holds its own (at most |a's kept items| + |b's items| of it).
// `difference(to:limits:)` bounds that excess from the counts, and in the rare case where it could
// cross `maxSnapshotBytes` it checks the batch by applying it, falling back to a rebuild
// (`deleteAllItems`, then `b` appended in order, whose every prefix is a prefix of `b`).
//
// Why LIS: a move relocates one element and keeps the relative order of all others, so the
// elements that never move must already be in `b`'s relative order. The largest such set is a
// longest increasing subsequence of their `a` positions; everything outside it must move once.
// So the number of moves is minimal for a batch that deletes gone sections first:
// (common sections − section LIS) for sections, and, for items, (items that change from one
// surviving section to another) + Σ over sections (items staying in it − its LIS).
//
// Why anchors on the previous element of `b`: processing `b` in order, each placed element goes
// right after its predecessor, which is already in place, so the elements handled so far plus the
// stable ones are always in `b`'s order. Elements that still have to leave can sit anywhere in
// between; they are gone by the end. That needs no positions or indexes, only identifiers.
//
// Cost: O(|a| + |b| + Σ k log k) over the per-section LIS inputs, with one hash lookup per element
// of `b` into `a`'s existing index at most (usually far fewer: see `matchAndEmitItems`), and flat arrays
// indexed by `a`'s slots for everything else.

extension RoomSnapshot {
    /// The batch that turns `a` into `b`: `a.apply(RoomSnapshot.diff(a, b)) == b`.
    /// See `difference(to:)`.
    /// - Complexity: O(|a| + |b| + Σ k log k), k the items kept in each section.
    public static func diff(_ a: RoomSnapshot, _ b: RoomSnapshot) -> [SnapshotOperation] { a.difference(to: b) }

    /// The batch that turns `self` into `other` when applied in order:
    /// `self.apply(self.difference(to: other)) == other`, and it is empty when they are equal.
    ///
    /// Every element keeps its identity (a payload change is an update, never a delete and
    /// insert), except the items of a deleted section, which are inserted where they reappear;
    /// the number of moves is the minimum (see the file comment). SnapshotPayload changes are reported
    /// as `updateItems(_, .reload)`.
    ///
    /// Every intermediate state holds at most `max(|self|, |other|)` sections and items; its
    /// encoding is at most the larger of the two ends' except by a few item-count varint bytes
    /// (see the file comment). `difference(to:limits:)` removes that exception.
    ///
    /// - Complexity: O(|a| + |b| + Σ k log k), k the items that stay in each section; one hash
    ///   lookup per section and per item of `other`.
    public func difference(to other: RoomSnapshot) -> [SnapshotOperation] {
        difference(to: other, limits: .unlimited)
    }

    /// `difference(to:)` whose every prefix applies under `limits`: when both `self` and `other`
    /// are within `limits`, `apply` accepts the batch op by op and every state it passes through
    /// is within `limits` too, which is what a replica applying the DIFF checks (PROTOCOL.md §5).
    ///
    /// - Complexity: that of `difference(to:)`; plus, only when the varint bound of the file
    ///   comment could reach `limits.maxSnapshotBytes`, one `apply` of the batch to a copy
    ///   (O(|a|) to copy, O(batch) to apply).
    public func difference(to other: RoomSnapshot, limits: SnapshotLimits) -> [SnapshotOperation] {
        if other.isEmpty { return isEmpty ? [] : [.deleteAllItems] }
        // The pointers live only as long as these closures, and so does the Differ.
        // Outlines take their own item pass (`RoomSnapshot+ForestDiffing.swift`); flat rooms, the
        // common case, keep this one, which needs no parent lookups.
        let forest = isOutline || other.isOutline
        let (ops, sizeBound, deepest) = withItems { aItems in
            other.withItems { bItems in
                var differ = Differ(a: self, b: other, aItems: aItems, bItems: bItems)
                let ops = forest ? differ.runForest() : differ.run()
                return (ops, other.canonicalByteCount + differ.varintExcess + differ.levelsExcess, differ.deepestLevelBound)
            }
        }
        if sizeBound <= limits.maxSnapshotBytes, deepest < limits.maxOutlineDepth { return ops }
        var check = self
        if (try? check.apply(ops, limits: limits)) != nil { return ops }
        // An outline near the depth limit: flatten first, which keeps every identity.
        if forest, let flat = flattenedDifference(to: other) {
            check = self
            if (try? check.apply(flat, limits: limits)) != nil { return flat }
        }
        return other.rebuild()
    }

    /// `deleteAllItems`, then every section appended with its items, in order: each prefix's
    /// result is a prefix of `self`, so no count or size ever exceeds `self`'s. O(|self|).
    func rebuild() -> [SnapshotOperation] {
        if isOutline { return rebuildOutline() }
        var ops: [SnapshotOperation] = [.deleteAllItems]
        for section in sections {
            ops.append(.appendSections([section]))
            let items = Array(items(inSection: section.id))
            // The section just appended is the last one: no need to repeat its identifier.
            if !items.isEmpty { ops.append(.appendItems(items, toSection: nil)) }
        }
        return ops
    }
}

/// The working state of one `difference(to:)` call. Arrays named `a…` are indexed by slots of
/// `a`; arrays named `b…` by position in a walk of `b` (sections or items in order).
struct Differ {
    typealias Slot = RoomSnapshot.Slot
    static var none: Slot { RoomSnapshot.none }

    let a: RoomSnapshot
    let b: RoomSnapshot
    /// The item slots and bytes of `a` and `b`, read through pointers in the hot loops: array
    /// access through `self` in a mutating method retains the buffer and re-checks it every time.
    /// Identifiers and payloads are compared in place; they are copied out only into operations.
    let aItems: RoomSnapshot.ItemsView
    let bItems: RoomSnapshot.ItemsView

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

    init(a: RoomSnapshot, b: RoomSnapshot, aItems: RoomSnapshot.ItemsView, bItems: RoomSnapshot.ItemsView) {
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
        var sectionUpdates = Updates()
        var itemUpdates = Updates()
        matchSections(updates: &sectionUpdates)
        emitSections()
        matchAndEmitItems(updates: &itemUpdates)
        // Deletes and updates come first in the batch but are known only now (they need every
        // item matched). Inserting them in front moves the other operations bitwise, with no
        // retain or release: O(ops) memmove.
        var prefix: [SnapshotOperation] = []
        emitDeletes(into: &prefix)
        Updates.append(sections: sectionUpdates, items: itemUpdates, to: &prefix)
        ops.insert(contentsOf: prefix, at: 0)
        return ops
    }

    /// SnapshotPayload changes, split so that the ones that shrink (or keep) the encoding come first.
    struct Updates {
        var shrinking: [SnapshotElement] = []
        var growing: [SnapshotElement] = []
        /// SnapshotPayload sizes only: an element's encoded size grows exactly when its payload does.
        mutating func append(_ element: SnapshotElement, from oldCount: Int) {
            if element.payload.count > oldCount { growing.append(element) } else { shrinking.append(element) }
        }

        /// The payload updates of a diff in the order that keeps every prefix within the limits:
        /// those that shrink (or keep) the encoding, sections then items, then those that grow it.
        static func append(sections: Updates, items: Updates, to ops: inout [SnapshotOperation]) {
            if !sections.shrinking.isEmpty { ops.append(.updateSections(sections.shrinking)) }
            if !items.shrinking.isEmpty { ops.append(.updateItems(items.shrinking, .reload)) }
            if !sections.growing.isEmpty { ops.append(.updateSections(sections.growing)) }
            if !items.growing.isEmpty { ops.append(.updateItems(items.growing, .reload)) }
        }
    }

    /// Bytes by which an intermediate state's encoding can exceed `b`'s (file comment): for
    /// each surviving section, the varint of its largest possible item count (its kept items of
    /// `a` plus its items of `b`) over the varint of its count in `b`. Set by `emitDeletes`.
    var varintExcess = 0
    /// Outlines only: bytes by which an intermediate state's `levels` part can exceed `b`'s, and
    /// the deepest level an intermediate state can hold (`RoomSnapshot+ForestDiffing.swift`).
    var levelsExcess = 0
    var deepestLevelBound = 0

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
    mutating func matchSections(updates: inout Updates) {
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
                let old = a.sectionNodes[Int(s)].payload
                if old != node.payload { updates.append(SnapshotElement(node.id, payload: node.payload), from: old.count) }
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
    mutating func matchAndEmitItems(updates: inout Updates) {
        let aItems = self.aItems, bItems = self.bItems
        let kept = ScratchBuffer<Bool>(repeating: false, count: aItems.count)
        let sectionInB = aSectionInB, position = aItemPos
        var lis = LIS()
        // Per section, reused: the status of each item, and the LIS input (a positions) with
        // the section-relative positions and slots it came from. No section holds more items
        // than the largest, so nothing is appended past these capacities.
        let largest = bSectionSlot.reduce(0) { Swift.max($0, b.sectionNodes[Int($1)].itemCount) }
        var status = ScratchBuffer<UInt8>(capacity: largest)
        var values = ScratchBuffer<Int32>(capacity: largest)
        var positions = ScratchBuffer<Int32>(capacity: largest)
        var slots = ScratchBuffer<Slot>(capacity: largest)
        // Guesses: `expected` follows the last match; `resume` keeps the run that a match found
        // by hash (a moved-in item) interrupted, so the item after it is found again.
        var expected = Self.none, resume = Self.none
        for t in bSectionSlot {
            status.reset(capacity: largest)
            values.reset(capacity: largest)
            positions.reset(capacity: largest)
            slots.reset(capacity: largest)
            var j = b.sectionNodes[Int(t)].firstItem
            while j != Self.none {
                let (id, record) = bItems.idAndRecord(j)
                var i = Self.none
                // Whether `i`'s record is `j`'s: the same identifier and the same payload.
                var sameRecord = false
                if expected != Self.none {
                    // Most items keep their neighbours and their payloads: one comparison of the
                    // whole records finds both.
                    if RoomSnapshot.bytesEqual(aItems.recordBytes(expected), record) {
                        i = expected
                        sameRecord = true
                    } else if RoomSnapshot.bytesEqual(aItems.idBytes(expected), id) {
                        i = expected
                    } else {
                        // One item of `a` skipped: deleted, or moved away from here.
                        let skip = aItems[Int(expected)].next
                        if skip != Self.none, RoomSnapshot.bytesEqual(aItems.idBytes(skip), id) { i = skip }
                    }
                }
                if i == Self.none, resume != Self.none, RoomSnapshot.bytesEqual(aItems.idBytes(resume), id) { i = resume }
                if i != Self.none {
                    resume = Self.none
                } else {
                    i = a.itemIndex.find(id, tag: SlotIndex.tag(of: id), in: aItems) ?? Self.none
                    if i != Self.none, expected != Self.none { resume = expected }
                }
                if i != Self.none {
                    // A new item (no match) leaves the guesses alone: the next one may be it.
                    expected = aItems[Int(i)].next
                }
                let fromSection = i == Self.none ? Self.none : sectionInB[Int(aItems[Int(i)].section)]
                if fromSection != Self.none {
                    kept[Int(i)] = true
                    if !sameRecord && !RoomSnapshot.bytesEqual(aItems.recordBytes(i), record) {  // same id: payloads differ
                        updates.append(SnapshotElement(bItems.id(j), payload: bItems.payload(j)), from: aItems.payloadBytes(i).count)
                    }
                    if fromSection == t {
                        values.append(position[Int(i)])
                        positions.append(Int32(status.count))
                        slots.append(j)
                    }
                    status.append(Self.moved)
                } else {
                    // New, or in a section that is deleted (it goes with it): inserted.
                    status.append(Self.new)
                }
                j = bItems[Int(j)].next
            }
            var firstStable = Self.none
            lis.mark(values.elements) { k in
                status[Int(positions[k])] = Self.stable
                firstStable = slots[k]  // marked back to front: the last call is the first item
            }
            emitItems(ofSection: t, status: status.elements, firstStable: firstStable)
        }
        aKept = Array(kept.elements)
    }

    /// Step 5 for one section: every non-stable item placed after its predecessor in `b`.
    /// O(items of the section).
    mutating func emitItems(ofSection t: Slot, status: UnsafeBufferPointer<UInt8>, firstStable: Slot) {
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
                var group: [SnapshotElement] = []
                var last = j
                while j != Self.none, status[g] == Self.new {
                    group.append(SnapshotElement(bItems.id(j), payload: bItems.payload(j)))
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

    /// Steps 1 and 2: gone sections, then gone items of surviving sections; and `varintExcess`.
    /// O(|a|).
    mutating func emitDeletes(into prefix: inout [SnapshotOperation]) {
        var keptCount = [Int](repeating: 0, count: a.sectionNodes.count)
        var goneItems: [SnapshotIdentifier] = []
        for i in aOrder {
            let s = aItems[Int(i)].section
            if aKept[Int(i)] {
                keptCount[Int(s)] += 1
            } else if aSectionInB[Int(s)] != Self.none {
                goneItems.append(aItems.id(i))
            }
        }
        var goneSections: [SnapshotIdentifier] = []
        var s = a.firstSection
        while s != Self.none {
            let t = aSectionInB[Int(s)]
            if t == Self.none {
                goneSections.append(a.sectionNodes[Int(s)].id)
            } else {
                let final = b.sectionNodes[Int(t)].itemCount
                varintExcess += RoomSnapshot.varintSize(keptCount[Int(s)] + final) - RoomSnapshot.varintSize(final)
            }
            s = a.sectionNodes[Int(s)].next
        }
        if !goneSections.isEmpty { prefix.append(.deleteSections(goneSections)) }
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
                var group: [SnapshotElement] = []
                var q = p
                while q < count, bSectionA[q] == Self.none {
                    let node = b.sectionNodes[Int(bSectionSlot[q])]
                    group.append(SnapshotElement(node.id, payload: node.payload))
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
                let placement: SnapshotOperation.Placement = p > 0 ? .after(b.sectionNodes[Int(bSectionSlot[p - 1])].id) : .before(firstStable!)
                ops.append(.moveSection(id, placement))
                p += 1
            }
        }
    }
}

/// Longest strictly increasing subsequence by patience sorting: O(k log k), O(k) when the input
/// is already mostly increasing (the common case: most elements stay), thanks to the check
/// against the last pile before the binary search. Buffers are kept across calls.
struct LIS: ~Copyable {
    /// `tails[l]`: index of the smallest value ending an increasing run of length l + 1, and
    /// `tailValues[l]` that value: the binary search reads one contiguous array instead of
    /// chasing indexes. `predecessor[k]`: the index before k in the best run ending at k, or -1.
    /// Kept across calls, grown to the largest input.
    private var tails = ScratchBuffer<Int32>(capacity: 0)
    private var tailValues = ScratchBuffer<Int32>(capacity: 0)
    private var predecessor = ScratchBuffer<Int32>(capacity: 0)

    /// Calls `body` with the index of every element of one longest increasing subsequence of
    /// `values` (distinct), from the last to the first.
    mutating func mark(_ values: UnsafeBufferPointer<Int32>, _ body: (Int) -> Void) {
        tails.reset(capacity: values.count)
        tailValues.reset(capacity: values.count)
        predecessor.reset(capacity: values.count)
        for k in values.indices {
            let v = values[k]
            let piles = tailValues.count
            if piles > 0, tailValues[piles - 1] > v {
                // Lowest pile whose tail is above v (values are distinct).
                var low = 0, high = piles - 1
                while low < high {
                    let mid = (low + high) / 2
                    if tailValues[mid] < v { low = mid + 1 } else { high = mid }
                }
                predecessor.append(low > 0 ? tails[low - 1] : -1)
                tails[low] = Int32(k)
                tailValues[low] = v
            } else {
                predecessor.append(piles > 0 ? tails[piles - 1] : -1)
                tails.append(Int32(k))
                tailValues.append(v)
            }
        }
        var k = tails.count > 0 ? tails[tails.count - 1] : -1
        while k >= 0 {
            body(Int(k))
            k = predecessor[Int(k)]
        }
    }

    mutating func mark(_ values: [Int32], _ body: (Int) -> Void) {
        values.withUnsafeBufferPointer { mark($0, body) }
    }
}
