/// The identifier → slot hash index of `RoomSnapshot`'s items.
///
/// Why not `[SnapshotIdentifier: Slot]`: a Swift dictionary keeps no hash values, so every probe
/// compares keys, and an `SnapshotIdentifier` key is a pointer to its bytes on the heap. On a 100k-item
/// room at the dictionary's 3/4 load, a lookup of an absent identifier (every insert checks for
/// duplicates; the differ asks for every new item) compared ~8 keys, each a cache miss. This
/// index stores, per bucket, 32 bits of the hash next to the slot, so probes compare integers in
/// one contiguous array and dereference an identifier only when those 32 bits match.
///
/// Layout: open addressing with linear probing in Robin Hood order, power-of-two capacity,
/// load at most 7/8, and backward-shift deletion (no tombstones, so probe lengths do not degrade
/// under churn). A bucket is `UInt64`: 0 when empty, else `tag << 32 | (slot + 1)`, where `tag`
/// is the low 32 bits of the identifier's hash. The home bucket is `tag & mask`, so growing and
/// deleting never re-hash an identifier: the tag holds every bit they need (capacities stay far
/// below 2^32), and so does an entry's distance from its home.
///
/// Why Robin Hood: an insert takes the bucket of any entry nearer its home than the new one is
/// to its own, so along a run the distances never grow by more than one a bucket, and a lookup
/// of an absent identifier (every insert checks for duplicates; the differ asks for every new
/// item) stops at the first entry nearer its home than the probe: a few buckets at 7/8 full,
/// where plain linear probing walks ~32. That is what lets the index be 7/8 full, 9–18 bytes
/// per item, instead of 3/4 (11–21; at 1/2, 16–32): a large room's item is its record, its
/// 20-byte node and this (docs/benchmarks.md, Memory).
///
/// The index does not store identifiers; lookups compare against the item bytes they are given.
/// - Complexity: expected O(1) per operation (amortized for insertion), plus O(identifier
///   length) to hash.
@usableFromInline struct SlotIndex: Sendable {
    @usableFromInline typealias Slot = RoomSnapshot.Slot

    @usableFromInline var buckets: [UInt64] = []
    @usableFromInline var count = 0

    @usableFromInline init() {}

    @inlinable var isEmpty: Bool { count == 0 }

    /// The low 32 bits of the bytes' keyed hash (`SipHash`), computed from the bytes alone, so
    /// one identifier has one tag whether it is read from a value or from the arena.
    @inlinable static func tag(of bytes: UnsafeRawBufferPointer) -> UInt32 {
        UInt32(truncatingIfNeeded: SipHash.hash13(bytes))
    }

    @inlinable static func tag(of id: SnapshotIdentifier) -> UInt32 {
        id.bytes.withUnsafeBytes { tag(of: $0) }
    }

    /// How far bucket `b` is from the home of `entry`, cyclically. O(1)
    @inlinable static func distance(of entry: UInt64, at b: Int, mask: Int) -> Int {
        (b &- Int(truncatingIfNeeded: entry >> 32)) & mask
    }

    /// The slot whose identifier bytes are `id`, or nil.
    @usableFromInline func find(_ id: UnsafeRawBufferPointer, tag: UInt32, in items: RoomSnapshot.ItemsView) -> Slot? {
        guard count > 0 else { return nil }
        let mask = buckets.count - 1
        return buckets.withUnsafeBufferPointer { buckets in
            var b = Int(tag) & mask
            var distance = 0
            while true {
                let entry = buckets[b]
                // Robin Hood order: past an entry nearer its home than we are to ours, the
                // identifier would have taken that bucket, so it is not here.
                if entry == 0 || Self.distance(of: entry, at: b, mask: mask) < distance { return nil }
                if UInt32(truncatingIfNeeded: entry >> 32) == tag {
                    let slot = Slot(truncatingIfNeeded: entry & 0xFFFF_FFFF) - 1
                    if RoomSnapshot.bytesEqual(items.idBytes(slot), id) { return slot }
                }
                b = (b + 1) & mask
                distance += 1
            }
        }
    }

    /// The slot of identifier `id`, or nil.
    @usableFromInline func find(_ id: SnapshotIdentifier, in items: RoomSnapshot.ItemsView) -> Slot? {
        guard count > 0 else { return nil }
        return id.bytes.withUnsafeBytes { find($0, tag: Self.tag(of: $0), in: items) }
    }

    /// Adds an identifier with hash tag `tag` → `slot`. The identifier must not be in the index
    /// (callers have checked).
    @usableFromInline mutating func insert(tag: UInt32, slot: Slot) {
        if (count + 1) * 8 > buckets.count * 7 { grow() }
        place(UInt64(tag) << 32 | UInt64(UInt32(slot) + 1))
        count += 1
    }

    /// Removes the entry of `slot`, whose identifier has hash tag `tag`.
    @usableFromInline mutating func remove(tag: UInt32, slot: Slot) {
        let wanted = UInt64(tag) << 32 | UInt64(UInt32(slot) + 1)
        let mask = buckets.count - 1
        buckets.withUnsafeMutableBufferPointer { buckets in
            var hole = Int(tag) & mask
            while buckets[hole] != wanted {
                precondition(buckets[hole] != 0, "SlotIndex: removing an identifier that is not indexed")
                hole = (hole + 1) & mask
            }
            // Backward shift: every later entry of the run that is not in its home moves one
            // bucket back, which keeps the Robin Hood order.
            var next = (hole + 1) & mask
            while buckets[next] != 0 && Self.distance(of: buckets[next], at: next, mask: mask) > 0 {
                buckets[hole] = buckets[next]
                hole = next
                next = (next + 1) & mask
            }
            buckets[hole] = 0
        }
        count -= 1
    }

    /// Every (tag, slot) pair, for the invariant check.
    func forEachEntry(_ body: (UInt32, Slot) -> Void) {
        for entry in buckets where entry != 0 {
            body(UInt32(truncatingIfNeeded: entry >> 32), Slot(truncatingIfNeeded: entry & 0xFFFF_FFFF) - 1)
        }
    }

    /// Puts `entry` at the first bucket of its run whose entry is nearer its home, moving that
    /// one on the same way (an empty bucket ends it).
    private mutating func place(_ entry: UInt64) {
        let mask = buckets.count - 1
        buckets.withUnsafeMutableBufferPointer { buckets in
            var carried = entry
            var b = Int(truncatingIfNeeded: carried >> 32) & mask
            var distance = 0
            while buckets[b] != 0 {
                let theirs = Self.distance(of: buckets[b], at: b, mask: mask)
                if theirs < distance {
                    swap(&carried, &buckets[b])
                    distance = theirs
                }
                b = (b + 1) & mask
                distance += 1
            }
            buckets[b] = carried
        }
    }

    /// Doubles the capacity (16 at first), re-placing entries by their stored tags.
    private mutating func grow() {
        let old = buckets
        buckets = [UInt64](repeating: 0, count: Swift.max(16, old.count * 2))
        for entry in old where entry != 0 { place(entry) }
    }

    /// Whether the buckets keep Robin Hood order: an entry is at most one bucket further from
    /// its home than the entry before it, and one right after an empty bucket is in its home.
    /// For `RoomSnapshot.checkInvariants`. O(capacity)
    func isInRobinHoodOrder() -> Bool {
        let mask = buckets.count - 1
        for b in buckets.indices where buckets[b] != 0 {
            let before = buckets[(b - 1) & mask]
            let limit = before == 0 ? 0 : Self.distance(of: before, at: (b - 1) & mask, mask: mask) + 1
            if Self.distance(of: buckets[b], at: b, mask: mask) > limit { return false }
        }
        return true
    }
}

extension RoomSnapshot {
    /// The slot of item `id`, or nil. Expected O(1).
    @usableFromInline func itemSlot(_ id: SnapshotIdentifier) -> Slot? {
        withItems { itemIndex.find(id, in: $0) }
    }
}
