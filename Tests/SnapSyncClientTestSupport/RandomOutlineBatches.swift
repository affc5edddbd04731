package import SnapSync

extension RandomBatches {
    /// One operation that may or may not apply to `snapshot`: half the time a flat one
    /// (`operation(on:)`, which acts on whole subtrees in an outline), else an outline one:
    /// children appended to a random item, or an item (with its subtree) moved under another.
    package mutating func outlineOperation(on snapshot: RoomSnapshot) -> SnapshotOperation {
        let items = snapshot.itemIdentifiers
        guard !items.isEmpty, Bool.random(using: &random) else { return operation(on: snapshot) }
        let item = items.randomElement(using: &random)!
        if Bool.random(using: &random) {
            return .appendChildren((0..<Int.random(in: 1...3, using: &random)).map { _ in SnapshotElement(itemID(), payload: payload()) }, toParent: item)
        }
        return .moveItemToParent(item, parent: items.randomElement(using: &random)!)
    }

    /// A batch of `count` outline operations that all apply in order to `snapshot` (at most
    /// `maxDepth` levels), and the result.
    package mutating func outlineBatch(on snapshot: RoomSnapshot, count: Int, maxDepth: Int = 4) -> (operations: [SnapshotOperation], result: RoomSnapshot) {
        var result = snapshot
        var operations: [SnapshotOperation] = []
        var attempts = 0
        while operations.count < count && attempts < count * 20 {
            attempts += 1
            let operation = outlineOperation(on: result)
            if (try? result.apply(operation, limits: SnapshotLimits(maxOutlineDepth: maxDepth))) != nil { operations.append(operation) }
        }
        return (operations, result)
    }
}
