// Where an item's identifier and payload bytes live: one byte arena per snapshot.
//
// Why: a room is mostly items, and an item is mostly two short byte strings. Stored as an
// `SnapshotIdentifier` and a `SnapshotPayload` each (two `[UInt8]`, two heap blocks with a 32-byte header and
// malloc's rounding), a 16-byte id and a 64-byte payload cost ~176 bytes of heap for 80 bytes of
// content, and the room's memory was ~4× its raw bytes. Here each item has a record in
// `itemBytes`, `[varint id length][id][varint payload length][payload]`, which is exactly the
// item's canonical encoding (Protocol/PROTOCOL.md §4), and its 20-byte node names the record by
// its start: an item costs its bytes and two, its node and its share of the hash index, about
// 1.5× raw (docs/benchmarks.md, Memory). The lengths are in the record rather than the node
// because they are read with the bytes they measure: a lookup that compares an identifier reads
// its length from the cache line it reads the identifier from.
//
// Bytes freed by a delete, left behind when a payload outgrows its place and moves to the end,
// or reserved behind a payload that shrank (the node's `slack`), are garbage. They are counted,
// and the arena is compacted when garbage outweighs live bytes, so it never holds more than
// about twice its live content, and compaction, O(live bytes + slots), is paid for by at least
// as many bytes of garbage made since the last one: amortized O(1) per byte freed. A payload
// that fits the place its item had (its largest payload since it was stored, up to 64 KiB more
// than the current one) is overwritten in place: on the fan-out path, where an update keeps the
// size, an update never allocates.
//
// Only the model sees this layout; queries hand out `SnapshotIdentifier` and `SnapshotPayload` values, copied out
// of the arena (one allocation each).

extension RoomSnapshot {
    /// Read access to the item nodes and their bytes, without retains or uniqueness checks.
    /// Valid only inside `withItems`.
    @usableFromInline struct ItemsView {
        @usableFromInline let nodes: UnsafeBufferPointer<ItemNode>
        @usableFromInline let bytes: UnsafeRawBufferPointer

        @inlinable var count: Int { nodes.count }
        @inlinable subscript(slot: Int) -> ItemNode { nodes[slot] }

        /// The varint at `index` and the index after it. O(1)
        @inlinable func varint(at index: Int) -> (value: Int, end: Int) { RoomSnapshot.varint(in: bytes, at: index) }

        /// Where a live slot's identifier bytes are in the arena. O(1)
        @inlinable func idRange(_ slot: Slot) -> Range<Int> {
            let (count, start) = varint(at: nodes[Int(slot)].offset)
            return start..<start + count
        }

        /// Where a live slot's payload bytes are in the arena. O(1)
        @inlinable func payloadRange(_ slot: Slot) -> Range<Int> {
            let (count, start) = varint(at: idRange(slot).upperBound)
            return start..<start + count
        }

        /// The identifier bytes of a live slot. O(1)
        @inlinable func idBytes(_ slot: Slot) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(rebasing: bytes[idRange(slot)])
        }

        /// The payload bytes of a live slot. O(1)
        @inlinable func payloadBytes(_ slot: Slot) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(rebasing: bytes[payloadRange(slot)])
        }

        /// A live slot's record: its canonical encoding. Two items with the same identifier have
        /// the same payload exactly when their records are equal. O(1)
        @inlinable func recordBytes(_ slot: Slot) -> UnsafeRawBufferPointer {
            let start = nodes[Int(slot)].offset
            return UnsafeRawBufferPointer(rebasing: bytes[start..<RoomSnapshot.recordEnd(in: bytes, at: start)])
        }

        /// Where a live slot's identifier is and where its record ends, each length read once.
        /// O(1)
        @inlinable func recordParts(_ slot: Slot) -> (id: Range<Int>, end: Int) {
            let (count, start) = varint(at: nodes[Int(slot)].offset)
            let payload = varint(at: start + count)
            return (start..<start + count, payload.end + payload.value)
        }

        /// A live slot's identifier and its whole record, for a walk that compares both. O(1)
        @inlinable func idAndRecord(_ slot: Slot) -> (id: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer) {
            let parts = recordParts(slot)
            return (UnsafeRawBufferPointer(rebasing: bytes[parts.id]), UnsafeRawBufferPointer(rebasing: bytes[nodes[Int(slot)].offset..<parts.end]))
        }

        /// The identifier's length in bytes. O(1)
        @inlinable func idCount(_ slot: Slot) -> Int { varint(at: nodes[Int(slot)].offset).value }
        /// The payload's length in bytes. O(1)
        @inlinable func payloadCount(_ slot: Slot) -> Int { payloadRange(slot).count }
        /// The bytes of a live slot's record (lengths, identifier, payload; not the slack behind
        /// it): its canonical encoding's size. O(1)
        @inlinable func recordCount(_ slot: Slot) -> Int {
            let start = nodes[Int(slot)].offset
            return RoomSnapshot.recordEnd(in: bytes, at: start) - start
        }

        /// A copy of the identifier. O(length), one allocation.
        func id(_ slot: Slot) -> SnapshotIdentifier { SnapshotIdentifier(Array(idBytes(slot))) }
        /// A copy of the payload. O(length), one allocation unless empty.
        func payload(_ slot: Slot) -> SnapshotPayload {
            let bytes = payloadBytes(slot)
            return bytes.isEmpty ? .empty : SnapshotPayload(Array(bytes))
        }
    }

    /// Calls `body` with a view of the items. O(1) beyond `body`.
    @usableFromInline func withItems<R>(_ body: (ItemsView) throws -> R) rethrows -> R {
        try itemNodes.withUnsafeBufferPointer { nodes in
            try itemBytes.withUnsafeBytes { bytes in try body(ItemsView(nodes: nodes, bytes: bytes)) }
        }
    }

    /// The varint at `index` of a record and the index after it (Protocol/PROTOCOL.md §2). The
    /// records' lengths were written by `appendRecord`, so they are well formed. O(1)
    @inlinable static func varint(in bytes: UnsafeRawBufferPointer, at index: Int) -> (value: Int, end: Int) {
        let first = bytes[index]
        if first < 0x80 { return (Int(first), index + 1) }
        var value = Int(first & 0x7F), shift = 7, k = index + 1
        while true {
            let byte = bytes[k]
            value |= Int(byte & 0x7F) << shift
            k += 1
            if byte < 0x80 { return (value, k) }
            shift += 7
        }
    }

    /// The end of the record that starts at `start`. O(1)
    @inlinable static func recordEnd(in bytes: UnsafeRawBufferPointer, at start: Int) -> Int {
        let id = varint(in: bytes, at: start)
        let payload = varint(in: bytes, at: id.end + id.value)
        return payload.end + payload.value
    }

    /// A copy of a live item's identifier. O(length)
    func itemIdentifier(at slot: Slot) -> SnapshotIdentifier { withItems { $0.id(slot) } }
    /// A copy of a live item's payload. O(length)
    func itemPayload(at slot: Slot) -> SnapshotPayload { withItems { $0.payload(slot) } }

    /// Byte-for-byte equality, 8 bytes per step. O(length)
    @inlinable static func bytesEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        let count = a.count
        guard count == b.count else { return false }
        guard count > 0 else { return true }
        let p = a.baseAddress!, q = b.baseAddress!
        var k = 0
        while k + 8 <= count {
            if p.loadUnaligned(fromByteOffset: k, as: UInt64.self) != q.loadUnaligned(fromByteOffset: k, as: UInt64.self) { return false }
            k += 8
        }
        while k < count {
            if p.load(fromByteOffset: k, as: UInt8.self) != q.load(fromByteOffset: k, as: UInt8.self) { return false }
            k += 1
        }
        return true
    }
}

// MARK: - Writing (mutating; all but compaction O(bytes written))

extension RoomSnapshot {
    /// Lengths are at most 32 bits: 4 GiB per identifier or payload, far above any limit a
    /// daemon can be given (a frame is at most 2^32 - 1 bytes).
    private static func checkLength(_ count: Int, of what: String) {
        precondition(count <= Int(UInt32.max), "\(what) of \(count) bytes: over 4 GiB")
    }

    /// Calls `body` with each byte of `value` as a varint (Protocol/PROTOCOL.md §2), in order.
    @inline(__always) static func varintBytes(_ value: Int, _ body: (UInt8) -> Void) {
        var rest = UInt(value)
        while rest >= 0x80 {
            body(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        body(UInt8(rest))
    }

    /// Appends the record `[id length][id][payload length][payload]`; returns its start.
    private mutating func appendRecord(id: [UInt8], payload: [UInt8]) -> Int {
        Self.checkLength(id.count, of: "identifier")
        Self.checkLength(payload.count, of: "payload")
        let offset = itemBytes.count
        Self.varintBytes(id.count) { itemBytes.append($0) }
        itemBytes.append(contentsOf: id)
        Self.varintBytes(payload.count) { itemBytes.append($0) }
        itemBytes.append(contentsOf: payload)
        return offset
    }

    /// Appends an item's record to the arena; returns its start, for its node.
    mutating func storeItemBytes(_ item: SnapshotElement) -> Int {
        appendRecord(id: item.id.bytes, payload: item.payload.bytes)
    }

    /// Replaces a live item's payload: in place when its length and bytes fit the item's place,
    /// else the record moves to the end of the arena and the old place becomes garbage.
    /// O(id + payload bytes).
    mutating func storeItemPayload(_ slot: Slot, _ payload: SnapshotPayload) {
        Self.checkLength(payload.count, of: "payload")
        let (idEnd, payloadEnd) = withItems { items in
            let parts = items.recordParts(slot)
            return (parts.id.upperBound, parts.end)
        }
        let place = payloadEnd - idEnd + Int(itemNodes[Int(slot)].slack)
        let needed = Self.varintSize(payload.count) + payload.count
        if needed <= place {
            itemBytes.withUnsafeMutableBytes { arena in
                var k = idEnd
                Self.varintBytes(payload.count) {
                    arena[k] = $0
                    k += 1
                }
                payload.bytes.withUnsafeBytes { source in
                    if source.count > 0 { (arena.baseAddress! + k).copyMemory(from: source.baseAddress!, byteCount: source.count) }
                }
            }
            itemGarbage += payloadEnd - idEnd - needed
            // Beyond 64 KiB of slack the rest waits for the compaction (it is garbage already).
            itemNodes[Int(slot)].slack = UInt16(Swift.min(place - needed, ItemNode.maxSlack))
        } else {
            // The identifier is copied out first: appending a slice of the arena to itself would
            // make the arena non-unique and copy all of it.
            let (id, record) = withItems { (Array($0.idBytes(slot)), $0.recordCount(slot)) }
            itemGarbage += record
            itemNodes[Int(slot)].offset = appendRecord(id: id, payload: payload.bytes)
            itemNodes[Int(slot)].slack = 0
        }
        compactItemBytesIfWorthIt()
    }

    /// Marks a freed slot's bytes as garbage and the slot as free (`offset` -1).
    mutating func releaseItemBytes(_ slot: Slot) {
        itemGarbage += withItems { $0.recordCount(slot) }
        itemNodes[Int(slot)].offset = -1
        itemNodes[Int(slot)].slack = 0
        compactItemBytesIfWorthIt()
    }

    /// Compacts when garbage exceeds both the live bytes and the slot count (so the walk over
    /// slots is paid for too), and a 4 KiB floor keeps small snapshots from compacting often.
    private mutating func compactItemBytesIfWorthIt() {
        let live = itemBytes.count - itemGarbage
        if itemGarbage > Swift.max(4096, live, itemNodes.count) { compactItemBytes() }
    }

    /// Copies every live item's record, in slot order, into a fresh arena of exactly the live
    /// size (slack is dropped). O(live bytes + slots)
    mutating func compactItemBytes() {
        let old = itemBytes  // shares the buffer; nothing writes to it until it is replaced
        var fresh: [UInt8] = []
        fresh.reserveCapacity(old.count - itemGarbage)
        old.withUnsafeBytes { source in
            for k in itemNodes.indices where itemNodes[k].offset >= 0 {
                let start = itemNodes[k].offset
                itemNodes[k].offset = fresh.count
                itemNodes[k].slack = 0
                fresh.append(contentsOf: UnsafeRawBufferPointer(rebasing: source[start..<Self.recordEnd(in: source, at: start)]))
            }
        }
        itemBytes = fresh
        itemGarbage = 0
    }
}
