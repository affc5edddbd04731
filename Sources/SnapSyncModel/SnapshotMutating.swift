/// UIKit's snapshot mutators (and its section snapshots' outline ones), written once for
/// everything that applies `SnapshotOperation`s:
/// `RoomSnapshot` itself, and the client's `BatchBuilder`, which also records what it applied.
///
/// Each mutator is one operation, applied atomically: it either happens completely or throws a
/// `BatchError` and changes nothing. Mutators that add or change content take optional `limits`;
/// without them, `defaultLimits` apply.
public protocol SnapshotMutating {
    /// The limits a mutator checks when its call names none.
    var defaultLimits: SnapshotLimits { get }
    /// Applies one operation atomically (see `RoomSnapshot.apply(_:limits:)`).
    mutating func apply(_ operation: SnapshotOperation, limits: SnapshotLimits) throws(BatchError)
}

extension SnapshotMutating {
    /// `appendSections(_:)`: new sections after the last one. Each is a batch of one operation.
    /// - Complexity: O(k) for k sections (expected, hashing).
    public mutating func appendSections(_ sections: [SnapshotElement], limits: SnapshotLimits? = nil) throws(BatchError) {
        try apply(.appendSections(sections), limits: limits ?? defaultLimits)
    }
    /// `insertSections(_:beforeSection:)`.
    /// - Complexity: O(k) for k sections.
    public mutating func insertSections(_ sections: [SnapshotElement], beforeSection anchor: SnapshotIdentifier, limits: SnapshotLimits? = nil)
        throws(BatchError)
    {
        try apply(.insertSections(sections, .before(anchor)), limits: limits ?? defaultLimits)
    }
    /// `insertSections(_:afterSection:)`.
    /// - Complexity: O(k) for k sections.
    public mutating func insertSections(_ sections: [SnapshotElement], afterSection anchor: SnapshotIdentifier, limits: SnapshotLimits? = nil)
        throws(BatchError)
    {
        try apply(.insertSections(sections, .after(anchor)), limits: limits ?? defaultLimits)
    }
    /// `deleteSections(_:)`: removes each section with its items; an unknown identifier rejects
    /// the whole call (Protocol/PROTOCOL.md §7).
    /// - Complexity: O(k + items in the deleted sections).
    public mutating func deleteSections(_ sections: [SnapshotIdentifier]) throws(BatchError) {
        try apply(.deleteSections(sections), limits: defaultLimits)
    }
    /// `moveSection(_:beforeSection:)`; the items travel with the section.
    /// - Complexity: O(1).
    public mutating func moveSection(_ section: SnapshotIdentifier, beforeSection anchor: SnapshotIdentifier) throws(BatchError) {
        try apply(.moveSection(section, .before(anchor)), limits: defaultLimits)
    }
    /// `moveSection(_:afterSection:)`; the items travel with the section.
    /// - Complexity: O(1).
    public mutating func moveSection(_ section: SnapshotIdentifier, afterSection anchor: SnapshotIdentifier) throws(BatchError) {
        try apply(.moveSection(section, .after(anchor)), limits: defaultLimits)
    }
    /// `reloadSections(_:)`: replaces section payloads.
    /// - Complexity: O(k + payload bytes).
    public mutating func reloadSections(_ sections: [SnapshotElement], limits: SnapshotLimits? = nil) throws(BatchError) {
        try apply(.updateSections(sections), limits: limits ?? defaultLimits)
    }
    /// `appendItems(_:toSection:)`: `nil` means the last section.
    /// - Complexity: O(k) for k items.
    public mutating func appendItems(_ items: [SnapshotElement], toSection section: SnapshotIdentifier? = nil, limits: SnapshotLimits? = nil) throws(BatchError)
    {
        try apply(.appendItems(items, toSection: section), limits: limits ?? defaultLimits)
    }
    /// `insertItems(_:beforeItem:)`: into the anchor's section.
    /// - Complexity: O(k) for k items.
    public mutating func insertItems(_ items: [SnapshotElement], beforeItem anchor: SnapshotIdentifier, limits: SnapshotLimits? = nil) throws(BatchError) {
        try apply(.insertItems(items, .before(anchor)), limits: limits ?? defaultLimits)
    }
    /// `insertItems(_:afterItem:)`: into the anchor's section.
    /// - Complexity: O(k) for k items.
    public mutating func insertItems(_ items: [SnapshotElement], afterItem anchor: SnapshotIdentifier, limits: SnapshotLimits? = nil) throws(BatchError) {
        try apply(.insertItems(items, .after(anchor)), limits: limits ?? defaultLimits)
    }
    /// `deleteItems(_:)`: an unknown identifier rejects the whole call (Protocol/PROTOCOL.md §7).
    /// - Complexity: O(k) for k items.
    public mutating func deleteItems(_ items: [SnapshotIdentifier]) throws(BatchError) {
        try apply(.deleteItems(items), limits: defaultLimits)
    }
    /// `deleteAllItems()`: removes every item and every section, as UIKit does.
    /// - Complexity: O(1) to apply (the old storage moves into the undo log); freeing it
    ///   afterwards is O(n).
    public mutating func deleteAllItems() {
        // Cannot fail: it names nothing.
        try! apply(.deleteAllItems, limits: defaultLimits)
    }
    /// `moveItem(_:beforeItem:)`; may cross sections.
    /// - Complexity: O(1).
    public mutating func moveItem(_ item: SnapshotIdentifier, beforeItem anchor: SnapshotIdentifier) throws(BatchError) {
        try apply(.moveItem(item, .before(anchor)), limits: defaultLimits)
    }
    /// `moveItem(_:afterItem:)`; may cross sections.
    /// - Complexity: O(1).
    public mutating func moveItem(_ item: SnapshotIdentifier, afterItem anchor: SnapshotIdentifier) throws(BatchError) {
        try apply(.moveItem(item, .after(anchor)), limits: defaultLimits)
    }
    /// Moves an item to the end of a section, which may be empty (`move_item_to_section`).
    /// - Complexity: O(1).
    public mutating func moveItem(_ item: SnapshotIdentifier, toSection section: SnapshotIdentifier) throws(BatchError) {
        try apply(.moveItemToSection(item, section: section), limits: defaultLimits)
    }
    /// Section snapshots' `append(_:to: parent)`: the items become `parent`'s last children,
    /// after its whole subtree (`append_children`, protocol version 2).
    /// - Complexity: O(k + the parent's subtree).
    public mutating func appendChildren(_ items: [SnapshotElement], toParent parent: SnapshotIdentifier, limits: SnapshotLimits? = nil) throws(BatchError) {
        try apply(.appendChildren(items, toParent: parent), limits: limits ?? defaultLimits)
    }
    /// Moves an item with its subtree to the end of `parent`'s children, possibly in another
    /// section (`move_item_to_parent`, protocol version 2).
    /// - Complexity: O(the item's subtree + the parent's subtree).
    public mutating func moveItem(_ item: SnapshotIdentifier, toParent parent: SnapshotIdentifier, limits: SnapshotLimits? = nil) throws(BatchError) {
        try apply(.moveItemToParent(item, parent: parent), limits: limits ?? defaultLimits)
    }
    /// `reloadItems(_:)`: replaces item payloads; clients replace the cells.
    /// - Complexity: O(k + payload bytes).
    public mutating func reloadItems(_ items: [SnapshotElement], limits: SnapshotLimits? = nil) throws(BatchError) {
        try apply(.updateItems(items, .reload), limits: limits ?? defaultLimits)
    }
    /// `reconfigureItems(_:)`: replaces item payloads; clients keep the cells.
    /// - Complexity: O(k + payload bytes).
    public mutating func reconfigureItems(_ items: [SnapshotElement], limits: SnapshotLimits? = nil) throws(BatchError) {
        try apply(.updateItems(items, .reconfigure), limits: limits ?? defaultLimits)
    }
}
