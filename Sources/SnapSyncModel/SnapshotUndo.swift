// What undoes one applied batch, kept after the batch succeeded: a room rolls its state back
// through these to rebuild an older version (a folded catch-up) without keeping that version's
// whole state beside its own.
//
// The entries are the ones `apply` records for its own rollback (RoomSnapshot+Applying.swift),
// written out as bytes: an entry costs a tag byte, its identifiers and payloads each after a
// varint length, and one byte per optional identifier. That is about what the batch's DIFF costs,
// where the entries themselves (enum values holding arrays) would cost 50–100 bytes more each. A
// `deleteAllItems` entry holds the whole state before it, as the rollback log does; so does an
// undo made with `whole(_:)`, for a change too large to be worth recording entry by entry.

/// The inverse of one batch applied to a `RoomSnapshot` (`applyReversibly(_:limits:)`), or the
/// whole state before a change (`whole(_:)`): `undo(_:)` turns the state after the change back
/// into the state before it.
public struct SnapshotUndo: Sendable {
    /// The encoded entries, in the order they were recorded (undone back to front).
    let entries: [UInt8]
    /// The states `deleteAllItems` entries (or a whole undo) restore, by index.
    let states: [RoomSnapshot]

    /// What the undo holds, in canonical-encoding bytes: its entries' bytes plus the canonical
    /// size of every whole state it keeps (which is what a memory budget counts for a snapshot).
    public let byteCount: Int

    init(entries: [UInt8], states: [RoomSnapshot]) {
        self.entries = entries
        self.states = states
        byteCount = entries.count + states.reduce(0) { $0 + $1.canonicalByteCount }
    }

    /// The undo that restores `state` whole, whatever the change was. O(1): the state's storage
    /// is shared, not copied.
    public static func whole(_ state: RoomSnapshot) -> SnapshotUndo {
        SnapshotUndo(entries: [Tag.restoreAll.rawValue, 0], states: [state])
    }

    enum Tag: UInt8 {
        case removeSection, restoreSection, moveSectionBack, restoreSectionPayload
        case removeItem, restoreItem, moveItemBack, restoreItemPayload, restoreAll
    }
}

extension RoomSnapshot {
    /// Applies `batch` atomically, as `apply(_:limits:)` does, and returns what undoes it.
    /// - Throws: `BatchError`, the snapshot then unchanged.
    /// - Complexity: that of `apply(_:limits:)`, plus O(bytes of the identifiers and payloads the
    ///   undo names) to write it.
    public mutating func applyReversibly(_ batch: [SnapshotOperation], limits: SnapshotLimits = .default) throws(BatchError) -> SnapshotUndo {
        var undo: [Undo] = []
        try apply(batch, limits: limits, undo: &undo)
        return SnapshotUndo(recording: undo)
    }

    /// Turns the state `undo` was made after back into the state before its change. Undoing
    /// several changes goes from the newest to the oldest: each undo names neighbours by
    /// identifier, as they were right after its own change.
    /// - Precondition: `self` is the state right after `undo`'s change (equal content).
    /// - Complexity: O(bytes of the undo) plus O(1) per entry (expected, hashing).
    public mutating func undo(_ undo: SnapshotUndo) {
        rollBack(undo.decoded())
        dropOutlineIfFlat()
    }

    /// Undoes a run of changes: `undos` in the order they were made, undone newest first.
    /// - Complexity: the sum of `undo(_:)`'s; O(n) more when the storage is shared (a copy).
    public mutating func undo(_ undos: some BidirectionalCollection<SnapshotUndo>) {
        for undo in undos.reversed() { self.undo(undo) }
    }
}

extension SnapshotUndo {
    /// The entries of `undo`, written in two passes (sizing, then writing) so that the buffer
    /// is allocated once at its exact size: it lives as long as its version is in reach, and a
    /// buffer grown by doubling would keep up to half its size as slack and leave the blocks it
    /// outgrew between long-lived ones. O(bytes).
    init(recording undo: [RoomSnapshot.Undo]) {
        var sizer = Writer(sizing: true)
        for entry in undo { sizer.write(entry) }
        var writer = Writer(sizing: false)
        writer.bytes.reserveCapacity(sizer.count)
        for entry in undo { writer.write(entry) }
        self.init(entries: writer.bytes, states: writer.states)
    }

    /// Writes entries, or only counts their bytes (`sizing`).
    private struct Writer {
        let sizing: Bool
        var count = 0
        var bytes: [UInt8] = []
        var states: [RoomSnapshot] = []

        init(sizing: Bool) { self.sizing = sizing }

        mutating func byte(_ value: UInt8) {
            count += 1
            if !sizing { bytes.append(value) }
        }

        mutating func varint(_ value: Int) {
            if sizing { count += RoomSnapshot.varintSize(value) } else { RoomSnapshot.varintBytes(value) { bytes.append($0) } }
        }

        mutating func raw(_ raw: [UInt8]) {
            varint(raw.count)
            count += raw.count
            if !sizing { bytes.append(contentsOf: raw) }
        }

        mutating func id(_ id: SnapshotIdentifier) { raw(id.bytes) }
        mutating func payload(_ payload: SnapshotPayload) { raw(payload.bytes) }

        mutating func optionalID(_ id: SnapshotIdentifier?) {
            guard let id else { return byte(0) }
            byte(1)
            raw(id.bytes)
        }

        mutating func write(_ entry: RoomSnapshot.Undo) {
            switch entry {
            case .removeSection(let section):
                byte(Tag.removeSection.rawValue)
                id(section)
            case .restoreSection(let section, let after):
                byte(Tag.restoreSection.rawValue)
                id(section.id)
                payload(section.payload)
                optionalID(after)
            case .moveSectionBack(let section, let after):
                byte(Tag.moveSectionBack.rawValue)
                id(section)
                optionalID(after)
            case .restoreSectionPayload(let section, let old):
                byte(Tag.restoreSectionPayload.rawValue)
                id(section)
                payload(old)
            case .removeItem(let item):
                byte(Tag.removeItem.rawValue)
                id(item)
            case .restoreItem(let item, let section, let after, let parent):
                byte(Tag.restoreItem.rawValue)
                id(item.id)
                payload(item.payload)
                id(section)
                optionalID(after)
                optionalID(parent)
            case .moveItemBack(let item, let section, let after, let parent):
                byte(Tag.moveItemBack.rawValue)
                id(item)
                id(section)
                optionalID(after)
                optionalID(parent)
            case .restoreItemPayload(let item, let old):
                byte(Tag.restoreItemPayload.rawValue)
                id(item)
                payload(old)
            case .restoreAll(let old):
                byte(Tag.restoreAll.rawValue)
                varint(states.count)
                states.append(old)
            }
        }
    }

    /// The entries as `apply` recorded them. The bytes were written by `init(recording:)` and
    /// never leave this type, so they are well formed: a bad tag is a bug.
    /// - Complexity: O(bytes), one allocation per identifier and payload.
    func decoded() -> [RoomSnapshot.Undo] {
        var undo: [RoomSnapshot.Undo] = []
        entries.withUnsafeBytes { bytes in
            var k = 0
            func count() -> Int {
                let (value, end) = RoomSnapshot.varint(in: bytes, at: k)
                k = end
                return value
            }
            func raw() -> [UInt8] {
                let n = count()
                defer { k += n }
                return Array(bytes[k..<k + n])
            }
            func id() -> SnapshotIdentifier { SnapshotIdentifier(raw()) }
            func payload() -> SnapshotPayload { SnapshotPayload(raw()) }
            func optionalID() -> SnapshotIdentifier? {
                k += 1
                return bytes[k - 1] == 0 ? nil : id()
            }
            while k < bytes.count {
                let tag = Tag(rawValue: bytes[k])
                k += 1
                switch tag {
                case .removeSection: undo.append(.removeSection(id()))
                case .restoreSection:
                    let section = SnapshotElement(id(), payload: payload())
                    undo.append(.restoreSection(section, after: optionalID()))
                case .moveSectionBack:
                    let section = id()
                    undo.append(.moveSectionBack(section, after: optionalID()))
                case .restoreSectionPayload:
                    let section = id()
                    undo.append(.restoreSectionPayload(section, payload()))
                case .removeItem: undo.append(.removeItem(id()))
                case .restoreItem:
                    let item = SnapshotElement(id(), payload: payload())
                    let section = id()
                    let after = optionalID()
                    undo.append(.restoreItem(item, section: section, after: after, parent: optionalID()))
                case .moveItemBack:
                    let item = id(), section = id()
                    let after = optionalID()
                    undo.append(.moveItemBack(item, section: section, after: after, parent: optionalID()))
                case .restoreItemPayload:
                    let item = id()
                    undo.append(.restoreItemPayload(item, payload()))
                case .restoreAll: undo.append(.restoreAll(states[count()]))
                case nil: preconditionFailure("SnapshotUndo: entry tag \(bytes[k - 1]) at byte \(k - 1)")
                }
            }
        }
        return undo
    }
}
