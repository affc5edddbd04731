/// The types a room's bytes stand for: section identifiers, item identifiers and item payloads,
/// each with its `ElementCoder`. The typed façade (`TypedReplica`, `TypedBatch`) reads and
/// writes through it; it works on any `RoomSnapshot` too (an `ObservableReplica`'s, a change's).
///
/// ```swift
/// struct Card: Codable, Sendable { var title: String }
/// let coding = RoomCoding<String, Int, Card>()   // identifiers as text, cards as JSON
/// let cards = try coding.itemIdentifiers(inSection: "todo", in: change.snapshot)
/// ```
///
/// Section payloads stay raw (`RoomSnapshot.payload(ofSection:)`). Every decoding failure throws an
/// `ElementCodingError` naming the identifier whose bytes did not decode.
public struct RoomCoding<SectionID: Hashable & Sendable, ItemID: Hashable & Sendable, Item: Sendable>: Sendable {
    public var sectionIDs: ElementCoder<SectionID>
    public var itemIDs: ElementCoder<ItemID>
    public var items: ElementCoder<Item>

    public init(sectionIDs: ElementCoder<SectionID>, itemIDs: ElementCoder<ItemID>, items: ElementCoder<Item>) {
        self.sectionIDs = sectionIDs
        self.itemIDs = itemIDs
        self.items = items
    }

    public func identifier(forSection section: SectionID) throws(ElementCodingError) -> SnapshotIdentifier {
        SnapshotIdentifier(try sectionIDs.encode(section, as: .sectionIdentifier))
    }

    public func identifier(forItem item: ItemID) throws(ElementCodingError) -> SnapshotIdentifier {
        SnapshotIdentifier(try itemIDs.encode(item, as: .itemIdentifier))
    }

    public func sectionID(_ identifier: SnapshotIdentifier) throws(ElementCodingError) -> SectionID {
        try sectionIDs.decode(identifier.bytes, as: .sectionIdentifier, identifier: identifier)
    }

    public func itemID(_ identifier: SnapshotIdentifier) throws(ElementCodingError) -> ItemID {
        try itemIDs.decode(identifier.bytes, as: .itemIdentifier, identifier: identifier)
    }

    /// The element that stores `item` under `id`.
    public func element(_ id: ItemID, _ item: Item) throws(ElementCodingError) -> SnapshotElement {
        let identifier = try identifier(forItem: id)
        return SnapshotElement(identifier, payload: SnapshotPayload(try items.encode(item, as: .itemPayload, identifier: identifier)))
    }

    /// The item stored under `identifier` in `payload`.
    public func item(from payload: SnapshotPayload, of identifier: SnapshotIdentifier) throws(ElementCodingError) -> Item {
        try items.decode(payload.bytes, as: .itemPayload, identifier: identifier)
    }

    // MARK: Reading a snapshot

    /// O(sections)
    public func sectionIdentifiers(in snapshot: RoomSnapshot) throws(ElementCodingError) -> [SectionID] {
        var result: [SectionID] = []
        for section in snapshot.sections { result.append(try sectionID(section.id)) }
        return result
    }

    /// The items of `section` in order, or nil when there is no such section. O(items in it)
    public func itemIdentifiers(inSection section: SectionID, in snapshot: RoomSnapshot) throws(ElementCodingError) -> [ItemID]? {
        guard let ids = snapshot.itemIdentifiers(inSection: try identifier(forSection: section)) else { return nil }
        var result: [ItemID] = []
        result.reserveCapacity(ids.count)
        for id in ids { result.append(try itemID(id)) }
        return result
    }

    /// The item `id`, decoded from its payload, or nil when it is not in the snapshot. O(1)
    /// expected, plus decoding.
    public func item(_ id: ItemID, in snapshot: RoomSnapshot) throws(ElementCodingError) -> Item? {
        let identifier = try identifier(forItem: id)
        guard let payload = snapshot.payload(ofItem: identifier) else { return nil }
        return try item(from: payload, of: identifier)
    }
}

extension RoomCoding where SectionID: LosslessStringConvertible, ItemID: LosslessStringConvertible, Item: Codable {
    /// Identifiers as their text, items as JSON.
    public init() {
        self.init(sectionIDs: .string, itemIDs: .string, items: .json)
    }
}
