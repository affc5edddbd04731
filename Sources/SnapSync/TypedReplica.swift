/// A `RoomReplica` read through a `RoomCoding`: the same replica, with typed identifiers and
/// items. Lookups cost what the replica's cost (O(log n)) plus coding; a value whose bytes do
/// not decode throws `ElementCodingError`.
///
/// ```swift
/// let board = try await client.join("board", coding: RoomCoding<String, String, Card>())
/// let card = try board.item(board.itemIdentifier(for: indexPath)!)
/// ```
public struct TypedReplica<SectionID: Hashable & Sendable, ItemID: Hashable & Sendable, Item: Sendable>: Sendable {
    public let replica: RoomReplica
    public let coding: RoomCoding<SectionID, ItemID, Item>

    public init(_ replica: RoomReplica, coding: RoomCoding<SectionID, ItemID, Item>) {
        self.replica = replica
        self.coding = coding
    }

    public var room: String { replica.room }

    /// O(log n)
    public func sectionIdentifier(for section: Int) throws(ElementCodingError) -> SectionID? {
        guard let id = replica.sectionIdentifier(for: section) else { return nil }
        return try coding.sectionID(id)
    }

    /// O(log n)
    public func itemIdentifier(for indexPath: ItemIndexPath) throws(ElementCodingError) -> ItemID? {
        guard let id = replica.itemIdentifier(for: indexPath) else { return nil }
        return try coding.itemID(id)
    }

    /// O(log n)
    public func indexPath(for item: ItemID) throws(ElementCodingError) -> ItemIndexPath? {
        replica.indexPath(for: try coding.identifier(forItem: item))
    }

    /// O(log n)
    public func index(ofSection section: SectionID) throws(ElementCodingError) -> Int? {
        replica.index(ofSection: try coding.identifier(forSection: section))
    }

    /// The item `id` in the current snapshot, or nil. O(1) expected, plus decoding.
    public func item(_ id: ItemID) throws(ElementCodingError) -> Item? {
        try coding.item(id, in: replica.snapshot)
    }

    /// O(sections)
    public func sectionIdentifiers() throws(ElementCodingError) -> [SectionID] {
        try coding.sectionIdentifiers(in: replica.snapshot)
    }

    /// O(items in the section)
    public func itemIdentifiers(inSection section: SectionID) throws(ElementCodingError) -> [ItemID]? {
        try coding.itemIdentifiers(inSection: section, in: replica.snapshot)
    }
}
