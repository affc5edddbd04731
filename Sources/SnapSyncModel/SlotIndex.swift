/// The identifier → slot hash index of `RoomSnapshot`'s items.
///
/// Why not `[SnapshotIdentifier: Slot]`: a Swift dictionary keeps no hash values, so every probe
/// compares keys, and an `SnapshotIdentifier` key is a pointer to its bytes on the heap. On a 100k-item
/// room at the dictionary's 3/4 load, a lookup of an absent identifier (every insert checks for
/// duplicates; the differ asks for every new item) compared ~8 keys, each a cache miss. This
/// index stores, per bucket, 32 bits of the hash next to the slot, so probes compare integers in
/// one contiguous array and dereference an identifier only when those 32 bits match.
///
/// Layout: open addressing with linear probing, power-of-two capacity, load at most 3/4, and
/// backward-shift deletion (no tombstones, so probe lengths do not degrade under churn). A
/// bucket is `UInt64`: 0 when empty, else `tag << 32 | (slot + 1)`, where `tag` is the low 32
/// bits of the identifier's hash. The home bucket is `tag & mask`, so growing and deleting never
/// re-hash an identifier: the tag holds every bit they need (capacities stay far below 2^32).
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

    /// The low 32 bits of the bytes' hash (`Hasher.combine(bytes:)`), computed from the bytes
    /// alone, so one identifier has one tag whether it is read from a value or from the arena.
    @usableFromInline static func tag(of bytes: UnsafeRawBufferPointer) -> UInt32 {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return UInt32(truncatingIfNeeded: hasher.finalize())
    }

    @usableFromInline static func tag(of id: SnapshotIdentifier) -> UInt32 {
        id.bytes.withUnsafeBytes { tag(of: $0) }
    }

    /// The slot whose identifier bytes are `id`, or nil.
    @usableFromInline func find(_ id: UnsafeRawBufferPointer, tag: UInt32, in items: RoomSnapshot.ItemsView) -> Slot? {
        guard count > 0 else { return nil }
        let mask = buckets.count - 1
        return buckets.withUnsafeBufferPointer { buckets in
            var b = Int(tag) & mask
            while true {
                let entry = buckets[b]
                if entry == 0 { return nil }
                if UInt32(truncatingIfNeeded: entry >> 32) == tag {
                    let slot = Slot(truncatingIfNeeded: entry & 0xFFFF_FFFF) - 1
                    if RoomSnapshot.bytesEqual(items.idBytes(slot), id) { return slot }
                }
                b = (b + 1) & mask
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
        // At most 3/4 full: an absent identifier then probes ~8.5 buckets on average, 68 bytes,
        // one or two cache lines, so the cost is still the first miss; at 1/2 it was 2.5
        // buckets, but the index took 16–32 bytes per item instead of 11–21 (docs/benchmarks.md,
        // Memory).
        if (count + 1) * 4 > buckets.count * 3 { grow() }
        place(tag: tag, slot: slot)
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
            // Backward shift: pull later entries of the run into the hole unless their home
            // bucket lies cyclically in (hole, j], where they would become unreachable.
            var j = hole
            while true {
                j = (j + 1) & mask
                let entry = buckets[j]
                if entry == 0 { break }
                let home = Int(truncatingIfNeeded: entry >> 32) & mask
                let stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j)
                if !stays {
                    buckets[hole] = entry
                    hole = j
                }
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

    private mutating func place(tag: UInt32, slot: Slot) {
        let mask = buckets.count - 1
        let entry = UInt64(tag) << 32 | UInt64(UInt32(slot) + 1)
        buckets.withUnsafeMutableBufferPointer { buckets in
            var b = Int(tag) & mask
            while buckets[b] != 0 { b = (b + 1) & mask }
            buckets[b] = entry
        }
    }

    /// Doubles the capacity (16 at first), re-placing entries by their stored tags.
    private mutating func grow() {
        let old = buckets
        buckets = [UInt64](repeating: 0, count: Swift.max(16, old.count * 2))
        for entry in old where entry != 0 {
            place(tag: UInt32(truncatingIfNeeded: entry >> 32), slot: Slot(truncatingIfNeeded: entry & 0xFFFF_FFFF) - 1)
        }
    }
}

extension RoomSnapshot {
    /// The slot of item `id`, or nil. Expected O(1).
    @usableFromInline func itemSlot(_ id: SnapshotIdentifier) -> Slot? {
        withItems { itemIndex.find(id, in: $0) }
    }
}
