/// The authoritative state of a room: an ordered list of sections, each an ordered list of
/// items, with the rules of UIKit's `NSDiffableDataSourceSnapshot`: section identifiers are
/// unique, and item identifiers are unique across the whole snapshot.
///
/// Storage is built for rooms of a million items, where an array per section would make every
/// insert and delete an O(n) memmove:
/// - sections and items live in slot arrays, linked into doubly linked lists (items per section);
/// - item identifiers and payloads live in one byte arena, not in an array each
///   (`RoomSnapshot+ItemBytes.swift`), which keeps a room under twice its raw bytes;
/// - two hash indexes map identifiers to slots (items: `SlotIndex`, built for large rooms);
/// - outlines (items with parents) keep each section's list in depth-first order, with each
///   item's parent and level in a side array that exists only while some item has a parent
///   (`RoomSnapshot+Outline.swift`): a flat room pays nothing for them.
///
/// So lookup by identifier, insert, delete and move are O(1) (expected, hashing), and
/// position queries (`indexOfItem`, `itemIdentifiers`) walk the lists: O(n).
///
/// `RoomSnapshot` is a value. Copies share storage until one is mutated (copy-on-write), and the
/// first mutation of a shared copy costs O(n). Applying batches never copies: a failed batch is
/// rolled back through an undo log (see `RoomSnapshot+Applying.swift`).
public struct RoomSnapshot: Sendable {
    /// Slot index; -1 is "none". Int32 keeps nodes small, and `SnapshotLimits.maxItems` is far below 2^31.
    @usableFromInline typealias Slot = Int32
    @usableFromInline static let none: Slot = -1

    @usableFromInline struct SectionNode: Sendable {
        @usableFromInline var id: SnapshotIdentifier
        @usableFromInline var payload: SnapshotPayload
        @usableFromInline var prev: Slot
        @usableFromInline var next: Slot
        @usableFromInline var firstItem: Slot
        @usableFromInline var lastItem: Slot
        @usableFromInline var itemCount: Int
    }

    /// An item: where its record is in `itemBytes` (see `RoomSnapshot+ItemBytes.swift`) and its
    /// links. 20 bytes: the lengths are in the record, and every field is 32 bits or less, so
    /// the node is 4-byte aligned (an `Int` field would pad it to 24 or 32).
    @usableFromInline struct ItemNode: Sendable {
        /// The record's start in `itemBytes`, low 32 bits.
        @usableFromInline var offsetLow: UInt32
        /// The record's start, bits 32–47 (an arena of up to 256 TiB); `UInt16.max` for a free slot.
        @usableFromInline var offsetHigh: UInt16
        /// Bytes reserved after the payload, so that a payload that shrank may grow back in
        /// place; at most 65,535 (more is left to the next compaction).
        @usableFromInline var slack: UInt16
        @usableFromInline var prev: Slot
        @usableFromInline var next: Slot
        @usableFromInline var section: Slot

        @usableFromInline static let maxSlack = Int(UInt16.max)

        @inlinable init(offset: Int, prev: Slot, next: Slot, section: Slot) {
            (offsetLow, offsetHigh, slack) = (0, 0, 0)
            (self.prev, self.next, self.section) = (prev, next, section)
            self.offset = offset
        }

        /// The record's start in `itemBytes`; -1 for a free slot.
        @inlinable var offset: Int {
            get { offsetHigh == UInt16.max ? -1 : Int(offsetHigh) << 32 | Int(offsetLow) }
            set {
                if newValue < 0 {
                    (offsetLow, offsetHigh) = (0, UInt16.max)
                } else {
                    precondition(newValue < Int(UInt16.max) << 32, "an item arena of 256 TiB")
                    (offsetLow, offsetHigh) = (UInt32(truncatingIfNeeded: newValue), UInt16(truncatingIfNeeded: newValue >> 32))
                }
            }
        }
    }

    @usableFromInline var sectionNodes: [SectionNode] = []
    @usableFromInline var itemNodes: [ItemNode] = []
    /// Every item's identifier and payload bytes, back to back (`RoomSnapshot+ItemBytes.swift`).
    @usableFromInline var itemBytes: [UInt8] = []
    /// Bytes of `itemBytes` that no live item names, until the next compaction.
    @usableFromInline var itemGarbage = 0
    @usableFromInline var freeSections: [Slot] = []
    @usableFromInline var freeItems: [Slot] = []
    @usableFromInline var sectionIndex: [SnapshotIdentifier: Slot] = [:]
    @usableFromInline var itemIndex = SlotIndex()
    @usableFromInline var firstSection: Slot = RoomSnapshot.none
    @usableFromInline var lastSection: Slot = RoomSnapshot.none
    /// Size of the canonical encoding (Protocol/PROTOCOL.md §4) without its leading section
    /// count: every linked section's id, payload and item-count varint, and every item's id and
    /// payload. The slot primitives keep it current, so `canonicalByteCount` and the
    /// `maxSnapshotBytes` check are O(1) instead of a walk over a million items.
    @usableFromInline var encodedBodyBytes: Int = 0

    /// An item's parent (`none`: a root) and level (0: a root). 8 bytes.
    @usableFromInline struct OutlineNode: Sendable {
        @usableFromInline var parent: Slot
        @usableFromInline var level: Int32
        @usableFromInline static let root = OutlineNode(parent: RoomSnapshot.none, level: 0)
    }
    /// Indexed by item slot, as `itemNodes`; empty while every item is a root. Free slots hold
    /// `.root`. See `RoomSnapshot+Outline.swift`.
    @usableFromInline var outline: [OutlineNode] = []
    /// Live items with a parent: the snapshot is an outline when this is not zero.
    @usableFromInline var nestedItemCount = 0
    /// Σ over live items of (varint size of its level − 1): what the canonical `levels` part
    /// takes beyond one byte per item (0 unless some level is 128 or more).
    @usableFromInline var levelExtraBytes = 0

    /// An empty snapshot.
    public init() {}

    /// Builds a snapshot from sections and their items, checking every rule and limit.
    /// - Complexity: O(n) in the number of sections and items.
    public init(_ sections: [(section: SnapshotElement, items: [SnapshotElement])], limits: SnapshotLimits = .unlimited) throws(BatchError) {
        var ops: [SnapshotOperation] = []
        ops.reserveCapacity(sections.count * 2)
        for (section, items) in sections {
            ops.append(.appendSections([section]))
            if !items.isEmpty { ops.append(.appendItems(items, toSection: section.id)) }
        }
        try apply(ops, limits: limits)
    }
}

// MARK: - Queries (UIKit names)

extension RoomSnapshot {
    /// - Complexity: O(1)
    @inlinable public var numberOfSections: Int { sectionIndex.count }
    /// - Complexity: O(1)
    @inlinable public var numberOfItems: Int { itemIndex.count }
    /// - Complexity: O(1)
    @inlinable public var isEmpty: Bool { sectionIndex.isEmpty }

    /// Items in a section, or `nil` when there is no such section.
    /// - Complexity: O(1)
    public func numberOfItems(inSection section: SnapshotIdentifier) -> Int? {
        guard let s = sectionIndex[section] else { return nil }
        return sectionNodes[Int(s)].itemCount
    }

    /// - Complexity: O(number of sections)
    public var sectionIdentifiers: [SnapshotIdentifier] {
        var result: [SnapshotIdentifier] = []
        result.reserveCapacity(numberOfSections)
        var s = firstSection
        while s != Self.none {
            result.append(sectionNodes[Int(s)].id)
            s = sectionNodes[Int(s)].next
        }
        return result
    }

    /// Every item, section by section.
    /// - Complexity: O(n), one allocation per item (identifiers are copied out of the arena).
    public var itemIdentifiers: [SnapshotIdentifier] {
        var result: [SnapshotIdentifier] = []
        result.reserveCapacity(numberOfItems)
        withItems { items in
            var s = firstSection
            while s != Self.none {
                var i = sectionNodes[Int(s)].firstItem
                while i != Self.none {
                    result.append(items.id(i))
                    i = items[Int(i)].next
                }
                s = sectionNodes[Int(s)].next
            }
        }
        return result
    }

    /// The items of one section in order, or `nil` when there is no such section.
    /// - Complexity: O(items in the section), one allocation per item.
    public func itemIdentifiers(inSection section: SnapshotIdentifier) -> [SnapshotIdentifier]? {
        guard let s = sectionIndex[section] else { return nil }
        var result: [SnapshotIdentifier] = []
        result.reserveCapacity(sectionNodes[Int(s)].itemCount)
        withItems { items in
            var i = sectionNodes[Int(s)].firstItem
            while i != Self.none {
                result.append(items.id(i))
                i = items[Int(i)].next
            }
        }
        return result
    }

    /// - Complexity: O(1)
    public func sectionIdentifier(containingItem item: SnapshotIdentifier) -> SnapshotIdentifier? {
        guard let i = itemSlot(item) else { return nil }
        return sectionNodes[Int(itemNodes[Int(i)].section)].id
    }

    /// The item's index in `itemIdentifiers` (across all sections), as UIKit's `indexOfItem(_:)`.
    /// - Complexity: O(n): positions are not stored, so that moves stay O(1).
    public func indexOfItem(_ item: SnapshotIdentifier) -> Int? {
        guard let target = itemSlot(item) else { return nil }
        let section = itemNodes[Int(target)].section
        var index = 0
        var s = firstSection
        while s != section {
            index += sectionNodes[Int(s)].itemCount
            s = sectionNodes[Int(s)].next
        }
        var i = sectionNodes[Int(s)].firstItem
        while i != target {
            index += 1
            i = itemNodes[Int(i)].next
        }
        return index
    }

    /// The item's (section index, item index within the section), as an index path.
    /// - Complexity: O(n)
    public func indexPath(ofItem item: SnapshotIdentifier) -> (section: Int, item: Int)? {
        guard let target = itemSlot(item) else { return nil }
        let section = itemNodes[Int(target)].section
        var sectionIndex = 0
        var s = firstSection
        while s != section {
            sectionIndex += 1
            s = sectionNodes[Int(s)].next
        }
        var index = 0
        var i = sectionNodes[Int(s)].firstItem
        while i != target {
            index += 1
            i = itemNodes[Int(i)].next
        }
        return (sectionIndex, index)
    }

    /// - Complexity: O(number of sections)
    public func indexOfSection(_ section: SnapshotIdentifier) -> Int? {
        guard let target = sectionIndex[section] else { return nil }
        var index = 0
        var s = firstSection
        while s != target {
            index += 1
            s = sectionNodes[Int(s)].next
        }
        return index
    }

    /// - Complexity: O(1)
    @inlinable public func contains(item: SnapshotIdentifier) -> Bool { itemSlot(item) != nil }
    /// - Complexity: O(1)
    @inlinable public func contains(section: SnapshotIdentifier) -> Bool { sectionIndex[section] != nil }

    /// - Complexity: O(1) expected, plus O(payload) to copy it.
    public func payload(ofItem item: SnapshotIdentifier) -> SnapshotPayload? {
        itemSlot(item).map { itemPayload(at: $0) }
    }

    /// - Complexity: O(1)
    public func payload(ofSection section: SnapshotIdentifier) -> SnapshotPayload? {
        sectionIndex[section].map { sectionNodes[Int($0)].payload }
    }

    /// The sections in order, each with its payload.
    /// - Complexity: O(1) to create; O(number of sections) to iterate.
    public var sections: SectionSequence { SectionSequence(snapshot: self) }

    /// The items of a section in order, each with its payload; empty when there is no such section.
    /// - Complexity: O(1) to create; O(items in the section) to iterate.
    public func items(inSection section: SnapshotIdentifier) -> ItemSequence {
        ItemSequence(snapshot: self, first: sectionIndex[section].map { sectionNodes[Int($0)].firstItem } ?? Self.none)
    }

    /// Iterates sections in order without allocating.
    public struct SectionSequence: Sequence, Sendable {
        let snapshot: RoomSnapshot
        public struct Iterator: IteratorProtocol {
            let snapshot: RoomSnapshot
            var slot: Slot
            public mutating func next() -> SnapshotElement? {
                guard slot != RoomSnapshot.none else { return nil }
                let node = snapshot.sectionNodes[Int(slot)]
                slot = node.next
                return SnapshotElement(node.id, payload: node.payload)
            }
        }
        public func makeIterator() -> Iterator { Iterator(snapshot: snapshot, slot: snapshot.firstSection) }
        public var underestimatedCount: Int { snapshot.numberOfSections }
    }

    /// Iterates one section's items in order; each element's identifier and payload are copied
    /// out of the arena (an allocation each).
    public struct ItemSequence: Sequence, Sendable {
        let snapshot: RoomSnapshot
        let first: Slot
        public struct Iterator: IteratorProtocol {
            let snapshot: RoomSnapshot
            var slot: Slot
            public mutating func next() -> SnapshotElement? {
                guard slot != RoomSnapshot.none else { return nil }
                let current = slot
                return snapshot.withItems { items in
                    slot = items[Int(current)].next
                    return SnapshotElement(items.id(current), payload: items.payload(current))
                }
            }
        }
        public func makeIterator() -> Iterator { Iterator(snapshot: snapshot, slot: first) }
    }
}

// MARK: - Equality

extension RoomSnapshot: Equatable {
    /// Two snapshots are equal when they hold the same sections and items, in the same order,
    /// with the same payloads and the same parents. Storage layout (slots) is not compared.
    /// - Complexity: O(n)
    public static func == (lhs: RoomSnapshot, rhs: RoomSnapshot) -> Bool {
        guard lhs.numberOfSections == rhs.numberOfSections, lhs.numberOfItems == rhs.numberOfItems,
            lhs.nestedItemCount == rhs.nestedItemCount
        else { return false }
        // Same identifiers in the same depth-first order with the same levels is the same forest.
        let outlined = lhs.nestedItemCount > 0
        var a = lhs.firstSection, b = rhs.firstSection
        while a != none, b != none {
            let sa = lhs.sectionNodes[Int(a)], sb = rhs.sectionNodes[Int(b)]
            guard sa.id == sb.id, sa.payload == sb.payload, sa.itemCount == sb.itemCount else { return false }
            let sameItems = lhs.withItems { left in
                rhs.withItems { right in
                    var i = sa.firstItem, j = sb.firstItem
                    while i != none, j != none {
                        guard bytesEqual(left.recordBytes(i), right.recordBytes(j)),
                            !outlined || lhs.outline[Int(i)].level == rhs.outline[Int(j)].level
                        else { return false }
                        i = left[Int(i)].next
                        j = right[Int(j)].next
                    }
                    return i == none && j == none
                }
            }
            guard sameItems else { return false }
            a = sa.next
            b = sb.next
        }
        return a == none && b == none
    }
}
