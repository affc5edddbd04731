/// Index-path lookups for one snapshot of a room, kept up to date change by change: what a
/// `cellForItemAt` (or a SwiftUI row) calls per visible cell.
///
/// `RoomSnapshot` finds an item by identifier in O(1) but its position in O(n) (positions are not
/// stored, so that moves stay O(1)). This index keeps the order of the sections and of each
/// section's items in balanced trees that count their nodes (`RankedForest`), and follows each
/// change by applying its operations, so no array is rebuilt per change:
/// - `sectionIdentifier(for:)`, `itemIdentifier(for:)`, `indexPath(for:)`, `index(ofSection:)`:
///   O(log n) expected (n: sections, or items of the section); plus O(1) expected hashing.
/// - `apply(_:)`: O(k log n) for a change of k operation elements (a `.diff` or `.catchUp`);
///   O(n) for `.initial` and `.resync`, which replace the snapshot.
///
/// `RoomReplica` and `ObservableReplica` keep one each. An app that applies changes to its views
/// itself (a data source updated from a `changes` loop) can keep its own, so that lookups answer
/// for exactly the snapshot its views show: `apply` every change in order, as it applies it.
///
/// Memory: per section and item, a 24-byte tree node, a copy of its identifier and an entry in
/// a hash table from identifier to node: on top of the snapshot, which does not store positions.
///
/// A value: a copy shares storage until one side changes, and then costs O(n).
public struct SnapshotPositions: Sendable {
    private var forest = RankedForest()
    private var sectionsRoot = RankedForest.none
    /// Per node: the identifier of the section or item it stands for.
    private var identifiers: [SnapshotIdentifier] = []
    /// Per node: for an item, its section's node; for a section, the root of its items' tree.
    private var owner: [RankedForest.Node] = []
    private var sectionNodes: [SnapshotIdentifier: RankedForest.Node] = [:]
    private var itemNodes: [SnapshotIdentifier: RankedForest.Node] = [:]
    /// The last change followed was of an outline: the next one is followed whole.
    private var followsOutline = false

    /// Positions of an empty snapshot.
    public init() {}

    /// Positions of `snapshot`. O(n).
    public init(_ snapshot: RoomSnapshot) {
        reset(to: snapshot)
    }

    /// Sections. O(1)
    public var numberOfSections: Int { forest.count(sectionsRoot) }

    /// Items in the section at `section`, or nil when there is none. O(log n)
    public func numberOfItems(inSection section: Int) -> Int? {
        let node = forest.select(sectionsRoot, section)
        return node == RankedForest.none ? nil : forest.count(owner[Int(node)])
    }

    /// The identifier of the section at `section`, or nil when out of range. O(log n)
    public func sectionIdentifier(for section: Int) -> SnapshotIdentifier? {
        let node = forest.select(sectionsRoot, section)
        return node == RankedForest.none ? nil : identifiers[Int(node)]
    }

    /// The identifier of the item at `indexPath`, or nil when out of range. O(log n)
    public func itemIdentifier(for indexPath: ItemIndexPath) -> SnapshotIdentifier? {
        let section = forest.select(sectionsRoot, indexPath.section)
        guard section != RankedForest.none else { return nil }
        let item = forest.select(owner[Int(section)], indexPath.item)
        return item == RankedForest.none ? nil : identifiers[Int(item)]
    }

    /// The index path of `item`, or nil when it is not in the snapshot. O(log n)
    public func indexPath(for item: SnapshotIdentifier) -> ItemIndexPath? {
        guard let node = itemNodes[item] else { return nil }
        return ItemIndexPath(item: forest.rank(node), section: forest.rank(owner[Int(node)]))
    }

    /// The index of `section`, or nil when it is not in the snapshot. O(log n)
    public func index(ofSection section: SnapshotIdentifier) -> Int? {
        sectionNodes[section].map { forest.rank($0) }
    }

    /// Follows `change`, counting its visible rows (`RoomChange.visibleSnapshot`): its operations
    /// for a `.diff` or `.catchUp` that stays flat throughout, its visible snapshot otherwise
    /// (O(n): an outline's operations move subtrees whose rows may be hidden). A change that
    /// starts and ends flat may still hold outline operations (a child appended, then moved out
    /// or deleted with its parent), so those are followed whole too. Changes must be applied in
    /// order, each to the positions of its `previousPosition`.
    public mutating func apply(_ change: RoomChange) {
        let staysFlat = !followsOutline && !change.snapshot.isOutline && !change.operations.contains(where: \.isOutlineOperation)
        switch change.kind {
        case .diff where staysFlat, .catchUp where staysFlat:
            for operation in change.operations { apply(operation) }
        default:
            reset(to: change.visibleSnapshot)
        }
        followsOutline = change.snapshot.isOutline
    }

    /// Follows one operation that applied to the snapshot these positions are of. O(k log n)
    /// for k elements. An operation that did not apply (an unknown identifier) is ignored where
    /// it names nothing, so that the positions never trap; `RoomSnapshot.apply` is the validator.
    public mutating func apply(_ operation: SnapshotOperation) {
        switch operation {
        case .appendSections(let sections):
            for section in sections { insertSection(section.id, at: numberOfSections) }
        case .insertSections(let sections, let placement):
            guard var position = index(ofSection: placement.anchor) else { return }
            if case .after = placement { position += 1 }
            for (offset, section) in sections.enumerated() { insertSection(section.id, at: position + offset) }
        case .deleteSections(let sections):
            for section in sections { deleteSection(section) }
        case .moveSection(let section, let placement):
            guard let node = sectionNodes[section], sectionNodes[placement.anchor] != nil else { return }
            forest.remove(node, from: &sectionsRoot)
            var position = index(ofSection: placement.anchor)!
            if case .after = placement { position += 1 }
            forest.insert(node, at: position, into: &sectionsRoot)
        case .appendItems(let items, let section):
            let node = section.flatMap { sectionNodes[$0] } ?? forest.select(sectionsRoot, numberOfSections - 1)
            guard node != RankedForest.none else { return }
            for item in items { insertItem(item.id, inSection: node, at: forest.count(owner[Int(node)])) }
        case .insertItems(let items, let placement):
            guard let anchor = itemNodes[placement.anchor] else { return }
            let section = owner[Int(anchor)]
            var position = forest.rank(anchor)
            if case .after = placement { position += 1 }
            for (offset, item) in items.enumerated() { insertItem(item.id, inSection: section, at: position + offset) }
        case .deleteItems(let items):
            for item in items {
                guard let node = itemNodes.removeValue(forKey: item) else { continue }
                forest.remove(node, from: &owner[Int(owner[Int(node)])])
                forest.release(node)
            }
        case .deleteAllItems:
            self = SnapshotPositions()
        case .moveItem(let item, let placement):
            guard let node = itemNodes[item], let anchor = itemNodes[placement.anchor], node != anchor else { return }
            forest.remove(node, from: &owner[Int(owner[Int(node)])])
            let section = owner[Int(anchor)]
            var position = forest.rank(anchor)
            if case .after = placement { position += 1 }
            owner[Int(node)] = section
            forest.insert(node, at: position, into: &owner[Int(section)])
        case .moveItemToSection(let item, let section):
            guard let node = itemNodes[item], let target = sectionNodes[section] else { return }
            forest.remove(node, from: &owner[Int(owner[Int(node)])])
            owner[Int(node)] = target
            forest.insert(node, at: forest.count(owner[Int(target)]), into: &owner[Int(target)])
        case .updateSections, .updateItems:
            break
        case .appendChildren, .moveItemToParent:
            // Outlines are followed whole, by `apply(_ change:)`: an operation alone does not
            // say which rows of a subtree are visible.
            break
        }
    }

    /// O(n): each tree is built whole from its ordered nodes.
    private mutating func reset(to snapshot: RoomSnapshot) {
        self = SnapshotPositions()
        var sections: [RankedForest.Node] = []
        sections.reserveCapacity(snapshot.numberOfSections)
        itemNodes.reserveCapacity(snapshot.numberOfItems)
        for section in snapshot.sections {
            let node = newNode(section.id, owner: RankedForest.none)
            sectionNodes[section.id] = node
            sections.append(node)
            var items: [RankedForest.Node] = []
            for item in snapshot.itemIdentifiers(inSection: section.id) ?? [] {
                let itemNode = newNode(item, owner: node)
                itemNodes[item] = itemNode
                items.append(itemNode)
            }
            owner[Int(node)] = forest.tree(of: items)
        }
        sectionsRoot = forest.tree(of: sections)
    }

    private mutating func newNode(_ id: SnapshotIdentifier, owner nodeOwner: RankedForest.Node) -> RankedForest.Node {
        let node = forest.makeNode()
        if Int(node) == identifiers.count {
            identifiers.append(id)
            owner.append(nodeOwner)
        } else {
            identifiers[Int(node)] = id
            owner[Int(node)] = nodeOwner
        }
        return node
    }

    private mutating func insertSection(_ id: SnapshotIdentifier, at position: Int) {
        guard sectionNodes[id] == nil else { return }
        let node = newNode(id, owner: RankedForest.none)
        sectionNodes[id] = node
        forest.insert(node, at: position, into: &sectionsRoot)
    }

    private mutating func insertItem(_ id: SnapshotIdentifier, inSection section: RankedForest.Node, at position: Int) {
        guard itemNodes[id] == nil else { return }
        let node = newNode(id, owner: section)
        itemNodes[id] = node
        forest.insert(node, at: position, into: &owner[Int(section)])
    }

    private mutating func deleteSection(_ id: SnapshotIdentifier) {
        guard let node = sectionNodes.removeValue(forKey: id) else { return }
        for item in forest.nodes(owner[Int(node)]) {
            itemNodes[identifiers[Int(item)]] = nil
            forest.release(item)
        }
        forest.remove(node, from: &sectionsRoot)
        forest.release(node)
    }
}
