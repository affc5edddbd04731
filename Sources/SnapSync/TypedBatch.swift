/// A `BatchBuilder` with typed identifiers and items (`RoomCoding`): what
/// `SnapSyncClient.perform(_:coding:)` hands its body. It covers every operation the builder
/// records: sections (with payloads), items, moves within and across sections, reloads and
/// reconfigures, `deleteAllItems`, and an outline's children. Each call encodes its values, then
/// validates and records the operation as the builder does; it throws
/// `SnapSyncError.coding` when a value does not encode, `.invalidBatch` when the operation does
/// not apply. A failed call records nothing.
public struct TypedBatch<SectionID: Hashable & Sendable, ItemID: Hashable & Sendable, Item: Sendable>: Sendable {
    /// The untyped builder: its `snapshot` and `operations`, and every mutator.
    public var builder: BatchBuilder
    public let coding: RoomCoding<SectionID, ItemID, Item>

    public init(builder: BatchBuilder, coding: RoomCoding<SectionID, ItemID, Item>) {
        self.builder = builder
        self.coding = coding
    }

    /// The snapshot as it will be if the server applies the batch to the same base.
    public var snapshot: RoomSnapshot { builder.snapshot }

    public mutating func appendSections(_ sections: [SectionID]) throws(SnapSyncError) {
        try apply(.appendSections(try sectionElements(sections)))
    }

    public mutating func insertSections(_ sections: [SectionID], beforeSection anchor: SectionID) throws(SnapSyncError) {
        try apply(.insertSections(try sectionElements(sections), .before(try section(anchor))))
    }

    public mutating func insertSections(_ sections: [SectionID], afterSection anchor: SectionID) throws(SnapSyncError) {
        try apply(.insertSections(try sectionElements(sections), .after(try section(anchor))))
    }

    /// Appends sections with payloads (a section's payload is bytes of the app's own; the
    /// coding types items only).
    public mutating func appendSections(_ sections: [(SectionID, SnapshotPayload)]) throws(SnapSyncError) {
        try apply(.appendSections(try sectionElements(sections)))
    }

    /// New payloads for existing sections, shown with fresh section views (`reloadSections`).
    public mutating func reloadSections(_ sections: [(SectionID, SnapshotPayload)]) throws(SnapSyncError) {
        try apply(.updateSections(try sectionElements(sections)))
    }

    public mutating func deleteSections(_ sections: [SectionID]) throws(SnapSyncError) {
        try apply(.deleteSections(try sectionElements(sections).map(\.id)))
    }

    public mutating func moveSection(_ moved: SectionID, beforeSection anchor: SectionID) throws(SnapSyncError) {
        try apply(.moveSection(try section(moved), .before(try section(anchor))))
    }

    public mutating func moveSection(_ moved: SectionID, afterSection anchor: SectionID) throws(SnapSyncError) {
        try apply(.moveSection(try section(moved), .after(try section(anchor))))
    }

    /// Appends `items` (identifier and content) to `section`, or to the last section.
    public mutating func appendItems(_ items: [(ItemID, Item)], toSection section: SectionID? = nil) throws(SnapSyncError) {
        let target: SnapshotIdentifier? = try section.map { s throws(SnapSyncError) in try self.section(s) }
        try apply(.appendItems(try elements(items), toSection: target))
    }

    public mutating func insertItems(_ items: [(ItemID, Item)], beforeItem anchor: ItemID) throws(SnapSyncError) {
        try apply(.insertItems(try elements(items), .before(try item(anchor))))
    }

    public mutating func insertItems(_ items: [(ItemID, Item)], afterItem anchor: ItemID) throws(SnapSyncError) {
        try apply(.insertItems(try elements(items), .after(try item(anchor))))
    }

    public mutating func deleteItems(_ items: [ItemID]) throws(SnapSyncError) {
        try apply(.deleteItems(try itemIdentifiers(items)))
    }

    public mutating func moveItem(_ moved: ItemID, beforeItem anchor: ItemID) throws(SnapSyncError) {
        try apply(.moveItem(try item(moved), .before(try item(anchor))))
    }

    public mutating func moveItem(_ moved: ItemID, afterItem anchor: ItemID) throws(SnapSyncError) {
        try apply(.moveItem(try item(moved), .after(try item(anchor))))
    }

    /// Moves `moved` (with its children) to the end of `section`'s roots.
    public mutating func moveItem(_ moved: ItemID, toSection section: SectionID) throws(SnapSyncError) {
        try apply(.moveItemToSection(try item(moved), section: try self.section(section)))
    }

    /// Deletes every section and item (UIKit's `deleteAllItems`).
    public mutating func deleteAllItems() throws(SnapSyncError) {
        try apply(.deleteAllItems)
    }

    /// Appends `items` as the last children of `parent` (an outline, protocol version 2).
    public mutating func appendChildren(_ items: [(ItemID, Item)], toParent parent: ItemID) throws(SnapSyncError) {
        try apply(.appendChildren(try elements(items), toParent: try item(parent)))
    }

    /// Moves `moved` (with its children) to be the last child of `parent`.
    public mutating func moveItem(_ moved: ItemID, toParent parent: ItemID) throws(SnapSyncError) {
        try apply(.moveItemToParent(try item(moved), parent: try item(parent)))
    }

    /// New content for existing items, shown by keeping their cells (`reconfigureItems`).
    public mutating func reconfigureItems(_ items: [(ItemID, Item)]) throws(SnapSyncError) {
        try apply(.updateItems(try elements(items), .reconfigure))
    }

    /// New content for existing items, shown with fresh cells (`reloadItems`).
    public mutating func reloadItems(_ items: [(ItemID, Item)]) throws(SnapSyncError) {
        try apply(.updateItems(try elements(items), .reload))
    }

    private mutating func apply(_ operation: SnapshotOperation) throws(SnapSyncError) {
        do {
            try builder.apply(operation)
        } catch {
            throw .invalidBatch(error)
        }
    }

    private func section(_ id: SectionID) throws(SnapSyncError) -> SnapshotIdentifier {
        do { return try coding.identifier(forSection: id) } catch { throw .coding(error) }
    }

    private func item(_ id: ItemID) throws(SnapSyncError) -> SnapshotIdentifier {
        do { return try coding.identifier(forItem: id) } catch { throw .coding(error) }
    }

    private func sectionElements(_ sections: [SectionID]) throws(SnapSyncError) -> [SnapshotElement] {
        var result: [SnapshotElement] = []
        for id in sections { result.append(SnapshotElement(try section(id))) }
        return result
    }

    private func sectionElements(_ sections: [(SectionID, SnapshotPayload)]) throws(SnapSyncError) -> [SnapshotElement] {
        var result: [SnapshotElement] = []
        for (id, payload) in sections { result.append(SnapshotElement(try section(id), payload: payload)) }
        return result
    }

    private func itemIdentifiers(_ items: [ItemID]) throws(SnapSyncError) -> [SnapshotIdentifier] {
        var result: [SnapshotIdentifier] = []
        for id in items { result.append(try item(id)) }
        return result
    }

    private func elements(_ items: [(ItemID, Item)]) throws(SnapSyncError) -> [SnapshotElement] {
        var result: [SnapshotElement] = []
        result.reserveCapacity(items.count)
        for (id, content) in items {
            do { result.append(try coding.element(id, content)) } catch { throw .coding(error) }
        }
        return result
    }
}
