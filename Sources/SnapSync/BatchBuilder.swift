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
/// Each call costs what `RoomSnapshot.apply` costs for that operation; the first call copies the
/// snapshot (copy-on-write, O(n)) unless the builder owns it alone.
public struct BatchBuilder: Sendable {
    /// The snapshot as it will be if the server applies the batch to the same base.
    public private(set) var snapshot: RoomSnapshot
    /// The operations recorded so far, in order.
    public private(set) var operations: [SnapshotOperation] = []
    /// The limits operations are checked against: the server's, from WELCOME.
    public let limits: SnapshotLimits

    public init(base: RoomSnapshot, limits: SnapshotLimits = .default) {
        snapshot = base
        self.limits = limits
    }

    /// Applies `operation` to `snapshot` and records it, checked against `limits`.
    /// - Throws: `BatchError` whose `operationIndex` is the index the operation would have had
    ///   in `operations`, as the server's REJECT would count it.
    public mutating func apply(_ operation: SnapshotOperation) throws(BatchError) {
        try apply(operation, limits: limits)
    }
}

/// The UIKit-named mutators (`appendItems(_:toSection:)`, `moveItem(_:beforeItem:)`, ...) come
/// from `SnapshotMutating`, as on `RoomSnapshot`; here each one is also recorded.
extension BatchBuilder: SnapshotMutating {
    public var defaultLimits: SnapshotLimits { limits }

    public mutating func apply(_ operation: SnapshotOperation, limits: SnapshotLimits) throws(BatchError) {
        do {
            try snapshot.apply(operation, limits: limits)
        } catch {
            throw BatchError(operationIndex: operations.count, violation: error.violation)
        }
        operations.append(operation)
    }
}
