// Where an item's identifier and payload bytes live: one byte arena per snapshot.
//
// Why: a room is mostly items, and an item is mostly two short byte strings. Stored as an
// `SnapshotIdentifier` and a `SnapshotPayload` each (two `[UInt8]`, two heap blocks with a 32-byte header and
// malloc's rounding), a 16-byte id and a 64-byte payload cost ~176 bytes of heap for 80 bytes of
// content, and the room's memory was ~4× its raw bytes. Here a node names a range of
// `itemBytes`, `[id][payload]` back to back, so an item costs its bytes, its 32-byte node and its
// share of the hash index: under 2× raw (docs/benchmarks.md, Memory).
//
// Bytes freed by a delete, left behind when a payload outgrows its place and moves to the end,
// or reserved behind a payload that shrank, are garbage. They are counted, and the arena is
// compacted when garbage outweighs live bytes, so it never holds more than about twice its live
// content, and compaction, O(live bytes + slots), is paid for by at least as many bytes of
// garbage made since the last one: amortized O(1) per byte freed. A payload that fits the
// place its item had (its largest payload since it was stored) is overwritten in place: on the
// fan-out path, where an update keeps the size, an update never allocates.
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

        /// The identifier bytes of a live slot. O(1)
        @inlinable func idBytes(_ slot: Slot) -> UnsafeRawBufferPointer {
            let node = nodes[Int(slot)]
            return UnsafeRawBufferPointer(rebasing: bytes[node.offset..<node.offset + Int(node.idCount)])
        }

        /// The payload bytes of a live slot. O(1)
        @inlinable func payloadBytes(_ slot: Slot) -> UnsafeRawBufferPointer {
            let node = nodes[Int(slot)]
            let start = node.offset + Int(node.idCount)
            return UnsafeRawBufferPointer(rebasing: bytes[start..<start + Int(node.payloadCount)])
        }

        /// A copy of the identifier. O(length), one allocation.
        func id(_ slot: Slot) -> SnapshotIdentifier { SnapshotIdentifier(Array(idBytes(slot))) }
        /// A copy of the payload. O(length), one allocation unless empty.
        func payload(_ slot: Slot) -> SnapshotPayload {
            nodes[Int(slot)].payloadCount == 0 ? .empty : SnapshotPayload(Array(payloadBytes(slot)))
        }
    }

    /// Calls `body` with a view of the items. O(1) beyond `body`.
    @usableFromInline func withItems<R>(_ body: (ItemsView) throws -> R) rethrows -> R {
        try itemNodes.withUnsafeBufferPointer { nodes in
            try itemBytes.withUnsafeBytes { bytes in try body(ItemsView(nodes: nodes, bytes: bytes)) }
        }
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
    /// Node length fields are 32-bit: 4 GiB per identifier or payload, far above any limit a
    /// daemon can be given (a frame is at most 2^32 - 1 bytes).
    private static func length(_ count: Int, of what: String) -> UInt32 {
        guard let length = UInt32(exactly: count) else { preconditionFailure("\(what) of \(count) bytes: over 4 GiB") }
        return length
    }

    /// Appends `[id][payload]` to the arena; returns the node fields that name it.
    mutating func storeItemBytes(_ item: SnapshotElement) -> (offset: Int, idCount: UInt32, payloadCount: UInt32) {
        let offset = itemBytes.count
        itemBytes.append(contentsOf: item.id.bytes)
        itemBytes.append(contentsOf: item.payload.bytes)
        return (offset, Self.length(item.id.count, of: "identifier"), Self.length(item.payload.count, of: "payload"))
    }

    /// Replaces a live item's payload: in place when it fits the item's place, else
    /// `[id][payload]` moves to the end of the arena and the old place becomes garbage.
    /// O(id + payload bytes).
    mutating func storeItemPayload(_ slot: Slot, _ payload: SnapshotPayload) {
        let node = itemNodes[Int(slot)]
        let newCount = Self.length(payload.count, of: "payload")
        if newCount <= node.payloadCapacity {
            let start = node.offset + Int(node.idCount)
            itemBytes.withUnsafeMutableBytes { arena in
                payload.bytes.withUnsafeBytes { source in
                    if source.count > 0 { (arena.baseAddress! + start).copyMemory(from: source.baseAddress!, byteCount: source.count) }
                }
            }
            itemGarbage += Int(node.payloadCount) - Int(newCount)
        } else {
            // The identifier is copied out first: appending a slice of the arena to itself would
            // make the arena non-unique and copy all of it.
            let id = withItems { Array($0.idBytes(slot)) }
            let offset = itemBytes.count
            itemBytes.append(contentsOf: id)
            itemBytes.append(contentsOf: payload.bytes)
            itemGarbage += Int(node.idCount) + Int(node.payloadCount)
            itemNodes[Int(slot)].offset = offset
            itemNodes[Int(slot)].payloadCapacity = newCount
        }
        itemNodes[Int(slot)].payloadCount = newCount
        compactItemBytesIfWorthIt()
    }

    /// Marks a freed slot's bytes as garbage and the slot as free (`offset` -1).
    mutating func releaseItemBytes(_ slot: Slot) {
        let node = itemNodes[Int(slot)]
        itemGarbage += Int(node.idCount) + Int(node.payloadCount)
        itemNodes[Int(slot)].offset = -1
        itemNodes[Int(slot)].idCount = 0
        itemNodes[Int(slot)].payloadCount = 0
        itemNodes[Int(slot)].payloadCapacity = 0
        compactItemBytesIfWorthIt()
    }

    /// Compacts when garbage exceeds both the live bytes and the slot count (so the walk over
    /// slots is paid for too), and a 4 KiB floor keeps small snapshots from compacting often.
    private mutating func compactItemBytesIfWorthIt() {
        let live = itemBytes.count - itemGarbage
        if itemGarbage > Swift.max(4096, live, itemNodes.count) { compactItemBytes() }
    }

    /// Copies every live item's bytes, in slot order, into a fresh arena of exactly the live
    /// size (reserved places shrink to their payloads). O(live bytes + slots)
    mutating func compactItemBytes() {
        let old = itemBytes  // shares the buffer; nothing writes to it until it is replaced
        var fresh: [UInt8] = []
        fresh.reserveCapacity(old.count - itemGarbage)
        old.withUnsafeBytes { source in
            for k in itemNodes.indices where itemNodes[k].offset >= 0 {
                let start = itemNodes[k].offset
                let length = Int(itemNodes[k].idCount) + Int(itemNodes[k].payloadCount)
                itemNodes[k].offset = fresh.count
                itemNodes[k].payloadCapacity = itemNodes[k].payloadCount
                fresh.append(contentsOf: UnsafeRawBufferPointer(rebasing: source[start..<start + length]))
            }
        }
        itemBytes = fresh
        itemGarbage = 0
    }
}
