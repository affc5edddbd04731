/// Records a batch of operations with UIKit's snapshot mutators, applying each to a private copy
/// of the room's snapshot as it goes, so that a mistake (a duplicate item, a missing anchor, a
/// limit) throws right at the call that made it, before anything is sent.
///
/// ```swift
/// try await client.perform("inbox") { batch in
///     try batch.appendItems(["m-42"], toSection: "today")
///     try batch.moveItem("m-7", beforeItem: "m-42")
/// }
/// ```
///
/// Local validation is against the replica's snapshot, which may be behind the server's by the
/// DIFFs still in flight; the server validates again, atomically, and its REJECT is what counts.
/// A failed call leaves the builder as it was: the operation is neither applied nor recorded.
///
/// Each call costs what `Snapshot.apply` costs for that operation; the first call copies the
/// snapshot (copy-on-write, O(n)) unless the builder owns it alone.
public struct BatchBuilder: Sendable {
    /// The snapshot as it will be if the server applies the batch to the same base.
    public private(set) var snapshot: Snapshot
    /// The operations recorded so far, in order.
    public private(set) var operations: [Operation] = []
    /// The limits operations are checked against: the server's, from WELCOME.
    public let limits: Limits

    public init(base: Snapshot, limits: Limits = .default) {
        snapshot = base
        self.limits = limits
    }

    /// Applies `operation` to `snapshot` and records it.
    /// - Throws: `BatchError` whose `operationIndex` is the index the operation would have had
    ///   in `operations`, as the server's REJECT would count it.
    public mutating func apply(_ operation: Operation) throws(BatchError) {
        do {
            try snapshot.apply(operation, limits: limits)
        } catch {
            throw BatchError(operationIndex: operations.count, violation: error.violation)
        }
        operations.append(operation)
    }

    // MARK: UIKit-named mutators

    public mutating func appendSections(_ sections: [Element]) throws(BatchError) {
        try apply(.appendSections(sections))
    }
    public mutating func insertSections(_ sections: [Element], beforeSection anchor: Identifier) throws(BatchError) {
        try apply(.insertSections(sections, .before(anchor)))
    }
    public mutating func insertSections(_ sections: [Element], afterSection anchor: Identifier) throws(BatchError) {
        try apply(.insertSections(sections, .after(anchor)))
    }
    public mutating func deleteSections(_ sections: [Identifier]) throws(BatchError) {
        try apply(.deleteSections(sections))
    }
    public mutating func moveSection(_ section: Identifier, beforeSection anchor: Identifier) throws(BatchError) {
        try apply(.moveSection(section, .before(anchor)))
    }
    public mutating func moveSection(_ section: Identifier, afterSection anchor: Identifier) throws(BatchError) {
        try apply(.moveSection(section, .after(anchor)))
    }
    /// Replaces the sections' payloads (`reloadSections(_:)`).
    public mutating func reloadSections(_ sections: [Element]) throws(BatchError) {
        try apply(.updateSections(sections))
    }
    /// `nil` appends to the last section, as UIKit does.
    public mutating func appendItems(_ items: [Element], toSection section: Identifier? = nil) throws(BatchError) {
        try apply(.appendItems(items, toSection: section))
    }
    public mutating func insertItems(_ items: [Element], beforeItem anchor: Identifier) throws(BatchError) {
        try apply(.insertItems(items, .before(anchor)))
    }
    public mutating func insertItems(_ items: [Element], afterItem anchor: Identifier) throws(BatchError) {
        try apply(.insertItems(items, .after(anchor)))
    }
    public mutating func deleteItems(_ items: [Identifier]) throws(BatchError) {
        try apply(.deleteItems(items))
    }
    /// Removes every item and every section, as UIKit's `deleteAllItems()` does.
    public mutating func deleteAllItems() {
        // Cannot fail: it names nothing.
        snapshot.deleteAllItems()
        operations.append(.deleteAllItems)
    }
    public mutating func moveItem(_ item: Identifier, beforeItem anchor: Identifier) throws(BatchError) {
        try apply(.moveItem(item, .before(anchor)))
    }
    public mutating func moveItem(_ item: Identifier, afterItem anchor: Identifier) throws(BatchError) {
        try apply(.moveItem(item, .after(anchor)))
    }
    /// Moves an item to the end of a section, which may be empty.
    public mutating func moveItem(_ item: Identifier, toSection section: Identifier) throws(BatchError) {
        try apply(.moveItemToSection(item, section: section))
    }
    /// Replaces the items' payloads; clients replace the cells.
    public mutating func reloadItems(_ items: [Element]) throws(BatchError) {
        try apply(.updateItems(items, .reload))
    }
    /// Replaces the items' payloads; clients keep the cells and refresh their content.
    public mutating func reconfigureItems(_ items: [Element]) throws(BatchError) {
        try apply(.updateItems(items, .reconfigure))
    }
}
