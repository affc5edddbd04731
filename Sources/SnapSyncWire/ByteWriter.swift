import SnapSyncModel

// The field encodings of PROTOCOL.md §2, appended straight into the caller's buffer so that a
// frame is built with no intermediate arrays. Each is O(bytes written), amortized. The
// primitives (varints, byte strings, big-endian integers) are `package`: the store's file
// formats (SnapSyncStore) are written with them.

extension Array where Element == UInt8 {
    /// Minimal unsigned LEB128: 1 byte below 128, at most 10.
    @inline(__always)
    package mutating func appendVarint(_ value: UInt64) {
        // Most varints (lengths, counts, small ids) are one byte: keep that path inlined.
        if value < 0x80 {
            append(UInt8(truncatingIfNeeded: value))
            return
        }
        appendLongVarint(value)
    }

    @inline(never)
    package mutating func appendLongVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        append(UInt8(truncatingIfNeeded: v))
    }

    @inline(__always) package mutating func appendVarint(_ value: Int) {
        appendVarint(UInt64(value))
    }

    package mutating func appendBytes(_ bytes: [UInt8]) {
        appendVarint(bytes.count)
        append(contentsOf: bytes)
    }

    /// A `bytes` field from borrowed bytes (the store's DIFF frames): one copy.
    package mutating func appendBytes(_ bytes: UnsafeRawBufferPointer) {
        appendVarint(bytes.count)
        append(contentsOf: bytes)
    }

    package mutating func appendString(_ string: String) {
        let utf8 = string.utf8
        appendVarint(utf8.count)
        append(contentsOf: utf8)
    }

    /// A big-endian u32 (the store's record and segment headers).
    package mutating func appendBigEndian(_ value: UInt32) {
        append(UInt8(truncatingIfNeeded: value >> 24))
        append(UInt8(truncatingIfNeeded: value >> 16))
        append(UInt8(truncatingIfNeeded: value >> 8))
        append(UInt8(truncatingIfNeeded: value))
    }

    /// A big-endian u64.
    package mutating func appendBigEndian(_ value: UInt64) {
        appendBigEndian(UInt32(truncatingIfNeeded: value >> 32))
        appendBigEndian(UInt32(truncatingIfNeeded: value))
    }

    mutating func appendElement(_ element: SnapshotElement) {
        appendBytes(element.id.bytes)
        appendBytes(element.payload.bytes)
    }

    mutating func appendElements(_ elements: [SnapshotElement]) {
        appendVarint(elements.count)
        for element in elements { appendElement(element) }
    }

    mutating func appendIdentifiers(_ ids: [SnapshotIdentifier]) {
        appendVarint(ids.count)
        for id in ids { appendBytes(id.bytes) }
    }

    mutating func appendPlacement(_ placement: SnapshotOperation.Placement) {
        switch placement {
        case .before(let anchor):
            append(0x00)
            appendBytes(anchor.bytes)
        case .after(let anchor):
            append(0x01)
            appendBytes(anchor.bytes)
        }
    }

    mutating func appendOptionalVarint(_ value: UInt64?) {
        if let value {
            append(0x01)
            appendVarint(value)
        } else {
            append(0x00)
        }
    }

    /// `op = opcode u8, fields` (§5).
    mutating func appendOperation(_ op: SnapshotOperation) {
        switch op {
        case .appendSections(let elements):
            append(Opcode.appendSections.rawValue)
            appendElements(elements)
        case .insertSections(let elements, let placement):
            append(Opcode.insertSections.rawValue)
            appendPlacement(placement)
            appendElements(elements)
        case .deleteSections(let ids):
            append(Opcode.deleteSections.rawValue)
            appendIdentifiers(ids)
        case .moveSection(let id, let placement):
            append(Opcode.moveSection.rawValue)
            appendBytes(id.bytes)
            appendPlacement(placement)
        case .updateSections(let elements):
            append(Opcode.updateSections.rawValue)
            appendElements(elements)
        case .appendItems(let elements, let section):
            append(Opcode.appendItems.rawValue)
            if let section {
                append(0x01)
                appendBytes(section.bytes)
            } else {
                append(0x00)
            }
            appendElements(elements)
        case .insertItems(let elements, let placement):
            append(Opcode.insertItems.rawValue)
            appendPlacement(placement)
            appendElements(elements)
        case .deleteItems(let ids):
            append(Opcode.deleteItems.rawValue)
            appendIdentifiers(ids)
        case .deleteAllItems:
            append(Opcode.deleteAllItems.rawValue)
        case .moveItem(let id, let placement):
            append(Opcode.moveItem.rawValue)
            appendBytes(id.bytes)
            appendPlacement(placement)
        case .moveItemToSection(let id, let section):
            append(Opcode.moveItemToSection.rawValue)
            appendBytes(id.bytes)
            appendBytes(section.bytes)
        case .updateItems(let elements, let kind):
            append(Opcode.updateItems.rawValue)
            append(kind.rawValue)
            appendElements(elements)
        case .appendChildren(let elements, let parent):
            append(Opcode.appendChildren.rawValue)
            appendBytes(parent.bytes)
            appendElements(elements)
        case .moveItemToParent(let id, let parent):
            append(Opcode.moveItemToParent.rawValue)
            appendBytes(id.bytes)
            appendBytes(parent.bytes)
        }
    }

    mutating func appendOperations(_ ops: [SnapshotOperation]) {
        appendVarint(ops.count)
        for op in ops { appendOperation(op) }
    }

    /// `snapshot = list<section>; section = id, payload, items list<item>` (§4): the canonical
    /// encoding, which is also what the digest hashes. O(n).
    mutating func appendSnapshot(_ snapshot: RoomSnapshot) {
        // The model owns the canonical walk, so the bytes on the wire and the digest agree.
        snapshot.encodeCanonical(into: &self)
    }

    /// `section_items = list<item> [levels]` (§4, REPLACE_SECTION): the items in depth-first
    /// order, then one level per item when some level is above 0. O(n).
    mutating func appendSectionItems(_ items: SectionSnapshot) {
        appendElements(items.elements)
        guard items.isOutline else { return }
        for level in items.levels { appendVarint(level) }
    }
}

/// Operation codes (§5).
enum Opcode: UInt8 {
    case appendSections = 0x01
    case insertSections = 0x02
    case deleteSections = 0x03
    case moveSection = 0x04
    case updateSections = 0x05
    case appendItems = 0x10
    case insertItems = 0x11
    case deleteItems = 0x12
    case deleteAllItems = 0x13
    case moveItem = 0x14
    case moveItemToSection = 0x15
    case updateItems = 0x16
    /// Version 2 only (§8.2).
    case appendChildren = 0x17
    /// Version 2 only (§8.2).
    case moveItemToParent = 0x18

    /// Whether a connection of protocol `version` has this opcode.
    func exists(inVersion version: UInt64) -> Bool {
        switch self {
        case .appendChildren, .moveItemToParent: ProtocolVersion.hasOutlines(version)
        default: true
        }
    }
}
