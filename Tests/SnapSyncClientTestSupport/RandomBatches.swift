package import SnapSync
package import SnapSyncTestSupport

/// Random snapshots and operation batches over small identifier pools, so that batches often
/// touch, move and re-add the same identifiers.
package struct RandomBatches {
    package var random: SplitMix64
    package let sectionPool: Int
    package let itemPool: Int
    /// `deleteAllItems` empties the room; concurrent writers leave more to compare without it.
    package let allowsDeleteAll: Bool

    package init(seed: UInt64, sectionPool: Int = 8, itemPool: Int = 40, allowsDeleteAll: Bool = true) {
        random = SplitMix64(seed: seed)
        self.sectionPool = sectionPool
        self.itemPool = itemPool
        self.allowsDeleteAll = allowsDeleteAll
    }

    /// SnapshotIdentifier 0 of each pool is the empty one (an identifier like any other), and one
    /// payload in four is empty.
    package mutating func sectionID() -> SnapshotIdentifier { Self.id("s", Int.random(in: 0..<sectionPool, using: &random)) }
    package mutating func itemID() -> SnapshotIdentifier { Self.id("i", Int.random(in: 0..<itemPool, using: &random)) }
    package mutating func payload() -> SnapshotPayload {
        let k = Int.random(in: 0..<4, using: &random)
        return k == 3 ? .empty : SnapshotPayload("p\(k)")
    }
    package static func id(_ prefix: String, _ k: Int) -> SnapshotIdentifier { SnapshotIdentifier(k == 0 ? "" : "\(prefix)\(k)") }

    /// A snapshot with distinct identifiers.
    package mutating func snapshot() -> RoomSnapshot {
        var snapshot = RoomSnapshot()
        for _ in 0..<Int.random(in: 0...5, using: &random) {
            let section = sectionID()
            guard !snapshot.contains(section: section) else { continue }
            try! snapshot.appendSections([SnapshotElement(section, payload: payload())])
            for _ in 0..<Int.random(in: 0...7, using: &random) {
                let item = itemID()
                if !snapshot.contains(item: item) { try! snapshot.appendItems([SnapshotElement(item, payload: payload())], toSection: section) }
            }
        }
        return snapshot
    }

    /// One operation that may or may not apply to `snapshot`.
    package mutating func operation(on snapshot: RoomSnapshot) -> SnapshotOperation {
        let sections = snapshot.sectionIdentifiers, items = snapshot.itemIdentifiers
        func existingOrNewSection() -> SnapshotIdentifier {
            sections.isEmpty || Int.random(in: 0..<4, using: &random) == 0 ? sectionID() : sections.randomElement(using: &random)!
        }
        func existingOrNewItem() -> SnapshotIdentifier {
            items.isEmpty || Int.random(in: 0..<4, using: &random) == 0 ? itemID() : items.randomElement(using: &random)!
        }
        func placement(_ id: SnapshotIdentifier) -> SnapshotOperation.Placement { Bool.random(using: &random) ? .before(id) : .after(id) }
        func elements(_ make: () -> SnapshotIdentifier) -> [SnapshotElement] {
            (0..<Int.random(in: 1...3, using: &random)).map { _ in SnapshotElement(make(), payload: payload()) }
        }
        switch Int.random(in: 0..<16, using: &random) {
        case 0: return .appendSections(elements { sectionID() })
        case 1: return .insertSections(elements { sectionID() }, placement(existingOrNewSection()))
        case 2: return .deleteSections([existingOrNewSection()])
        case 3, 4: return .moveSection(existingOrNewSection(), placement(existingOrNewSection()))
        case 5: return .updateSections([SnapshotElement(existingOrNewSection(), payload: payload())])
        case 6, 7: return .appendItems(elements { itemID() }, toSection: Bool.random(using: &random) ? nil : existingOrNewSection())
        case 8: return .insertItems(elements { itemID() }, placement(existingOrNewItem()))
        case 9: return .deleteItems([existingOrNewItem()])
        case 10: return allowsDeleteAll && Int.random(in: 0..<6, using: &random) == 0 ? .deleteAllItems : .deleteItems([existingOrNewItem()])
        case 11, 12: return .moveItem(existingOrNewItem(), placement(existingOrNewItem()))
        case 13: return .moveItemToSection(existingOrNewItem(), section: existingOrNewSection())
        case 14: return .updateItems([SnapshotElement(existingOrNewItem(), payload: payload())], .reload)
        default: return .updateItems([SnapshotElement(existingOrNewItem(), payload: payload())], .reconfigure)
        }
    }

    /// A batch of `count` operations that all apply in order to `snapshot`, and the result.
    package mutating func batch(on snapshot: RoomSnapshot, count: Int) -> (operations: [SnapshotOperation], result: RoomSnapshot) {
        var result = snapshot
        var operations: [SnapshotOperation] = []
        var attempts = 0
        while operations.count < count && attempts < count * 20 {
            attempts += 1
            let operation = operation(on: result)
            if (try? result.apply(operation, limits: .unlimited)) != nil { operations.append(operation) }
        }
        return (operations, result)
    }
}
