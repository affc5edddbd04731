/// One change of a replica read through a `RoomCoding`: the change, and typed reads of the
/// snapshot it made current. A view that draws from the change it was told about, rather than
/// from the replica (which may be a change ahead), never mixes two versions.
public struct TypedChange<SectionID: Hashable & Sendable, ItemID: Hashable & Sendable, Item: Sendable>: Sendable {
    public let change: RoomChange
    public let coding: RoomCoding<SectionID, ItemID, Item>

    public init(_ change: RoomChange, coding: RoomCoding<SectionID, ItemID, Item>) {
        self.change = change
        self.coding = coding
    }

    public var kind: RoomChange.Kind { change.kind }
    public var position: RoomPosition { change.position }
    /// The change as index paths (`RoomChange.updates`).
    public var updates: BatchUpdates { change.updates }

    /// The item `id` after the change, or nil. O(1) expected, plus decoding.
    public func item(_ id: ItemID) throws(ElementCodingError) -> Item? {
        try coding.item(id, in: change.snapshot)
    }

    /// The sections after the change. O(sections)
    public func sectionIdentifiers() throws(ElementCodingError) -> [SectionID] {
        try coding.sectionIdentifiers(in: change.snapshot)
    }

    /// Every item of `section` after the change, hidden ones of an outline included; nil when
    /// there is no such section. O(items in the section)
    public func itemIdentifiers(inSection section: SectionID) throws(ElementCodingError) -> [ItemID]? {
        try coding.itemIdentifiers(inSection: section, in: change.snapshot)
    }

    /// The visible rows of `section` after the change (`RoomChange.visibleSnapshot`): what the
    /// index paths count. O(rows in the section)
    public func visibleItemIdentifiers(inSection section: SectionID) throws(ElementCodingError) -> [ItemID]? {
        try coding.itemIdentifiers(inSection: section, in: change.visibleSnapshot)
    }
}

extension TypedReplica {
    /// A new stream of this replica's changes, typed: `.initial`, then every change, as
    /// `RoomReplica.changes` delivers them.
    public var changes: AsyncMapSequence<AsyncStream<RoomChange>, TypedChange<SectionID, ItemID, Item>> {
        let coding = coding
        return replica.changes.map { TypedChange($0, coding: coding) }
    }
}
