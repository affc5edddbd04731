/// The items of one section as an ordered forest, after UIKit's
/// `NSDiffableDataSourceSectionSnapshot`, with typed errors where UIKit crashes: what
/// `dataSource.apply(_:to:)` takes, and what `RoomSnapshot.operations(replacingSection:with:limits:)`
/// diffs a room's section against.
///
/// Items are kept in depth-first order (`items`), each under at most one parent; identifiers are
/// unique. There is no expansion state here: expansion is per viewer, kept by the client's
/// replica. Stored as a one-section `RoomSnapshot`, so it has the same costs: lookups O(1),
/// `append(_:to:)` and `insert(_:after:)` O(k + the anchor's subtree), `delete` O(the subtrees).
///
/// A mutator either happens completely or throws a `BatchError` (its `operationIndex` is 0) and
/// changes nothing. No content limit applies here; the room's limits are checked when the
/// section snapshot is applied to a room.
public struct SectionSnapshot: Sendable, Equatable, CustomStringConvertible {
    /// One section, `SectionSnapshot.section`, holding the items.
    var storage: RoomSnapshot
    /// The identifier of the one section of `storage`; never shown.
    static let section = SnapshotIdentifier([])

    /// An empty section snapshot.
    public init() {
        storage = RoomSnapshot()
        try! storage.apply(.appendSections([SnapshotElement(Self.section)]), limits: .unlimited)
    }

    /// Root items, in order.
    /// - Throws: `duplicateItem`, or a limit of `limits`.
    /// - Complexity: O(k)
    public init(_ items: [SnapshotElement], limits: SnapshotLimits = .unlimited) throws(BatchError) {
        self.init()
        try storage.apply(.appendItems(items, toSection: Self.section), limits: limits)
    }

    /// Wraps a one-section snapshot whose section is `SectionSnapshot.section`.
    init(storage: RoomSnapshot) { self.storage = storage }

    /// Gives the items (all roots so far) the parents that `levels` describes, one level per item
    /// in order, as the canonical `levels` part does (`RoomSnapshot.setOutlineLevels`).
    /// - Complexity: O(n)
    public mutating func setOutlineLevels(_ levels: [Int], maxOutlineDepth: Int) throws(OutlineLevelsError) {
        try storage.setOutlineLevels(levels, maxOutlineDepth: maxOutlineDepth)
    }

    private mutating func apply(_ ops: [SnapshotOperation]) throws(BatchError) {
        do {
            try storage.apply(ops, limits: .unlimited)
        } catch {
            throw BatchError(operationIndex: 0, violation: error.violation)
        }
    }

    // MARK: Mutators (UIKit names)

    /// `append(_:to:)`: the items become the last roots (`parent` nil) or `parent`'s last children.
    /// - Throws: `parentNotFound`, `duplicateItem`.
    /// - Complexity: O(k + the parent's subtree)
    public mutating func append(_ items: [SnapshotElement], to parent: SnapshotIdentifier? = nil) throws(BatchError) {
        try apply([parent.map { .appendChildren(items, toParent: $0) } ?? .appendItems(items, toSection: Self.section)])
    }

    /// `insert(_:before:)`: siblings of `anchor` (same parent), just before it.
    /// - Throws: `anchorItemNotFound`, `duplicateItem`.
    /// - Complexity: O(k)
    public mutating func insert(_ items: [SnapshotElement], before anchor: SnapshotIdentifier) throws(BatchError) {
        try apply([.insertItems(items, .before(anchor))])
    }

    /// `insert(_:after:)`: siblings of `anchor` (same parent), just after its whole subtree.
    /// - Throws: `anchorItemNotFound`, `duplicateItem`.
    /// - Complexity: O(k + the anchor's subtree)
    public mutating func insert(_ items: [SnapshotElement], after anchor: SnapshotIdentifier) throws(BatchError) {
        try apply([.insertItems(items, .after(anchor))])
    }

    /// `delete(_:)`: each item with all its descendants. An item whose ancestor is listed too, or
    /// an item listed twice, goes once, as in UIKit (the room's `deleteItems` refuses both).
    /// - Throws: `itemNotFound` for an unknown item.
    /// - Complexity: O(k · depth + the deleted subtrees)
    public mutating func delete(_ items: [SnapshotIdentifier]) throws(BatchError) {
        for id in items where !storage.contains(item: id) { throw BatchError(operationIndex: 0, violation: .itemNotFound(id)) }
        let listed = Set(items)
        var seen = Set<SnapshotIdentifier>()
        var topmost: [SnapshotIdentifier] = []
        for id in items where seen.insert(id).inserted {
            var ancestor = storage.parentSlot(storage.itemSlot(id)!)
            var covered = false
            while ancestor != RoomSnapshot.none, !covered {
                covered = listed.contains(storage.itemIdentifier(at: ancestor))
                ancestor = storage.parentSlot(ancestor)
            }
            if !covered { topmost.append(id) }
        }
        try apply([.deleteItems(topmost)])
    }

    /// `deleteAll()`.
    /// - Complexity: O(1), then O(n) to free.
    public mutating func deleteAll() { self = SectionSnapshot() }

    /// `replace(childrenOf:using:)`: `parent`'s children (with their subtrees) become
    /// `snapshot`'s items, its roots as `parent`'s children.
    /// - Throws: `parentNotFound`; `duplicateItem` when an item of `snapshot` is elsewhere in
    ///   this one (outside `parent`'s old descendants).
    /// - Complexity: O(parent's subtree + |snapshot|), plus a walk of parent's subtree per run
    ///   of siblings appended.
    public mutating func replace(childrenOf parent: SnapshotIdentifier, using snapshot: SectionSnapshot) throws(BatchError) {
        guard let children = storage.children(of: parent) else {
            throw BatchError(operationIndex: 0, violation: .parentNotFound(parent))
        }
        var ops: [SnapshotOperation] = children.isEmpty ? [] : [.deleteItems(children)]
        for op in snapshot.storage.rebuildOutline().dropFirst(2) {
            // Runs of roots become runs of `parent`'s children.
            if case .appendItems(let run, _) = op { ops.append(.appendChildren(run, toParent: parent)) } else { ops.append(op) }
        }
        try apply(ops)
    }

    // MARK: Queries

    /// Every item in depth-first order. O(n)
    public var items: [SnapshotIdentifier] { storage.itemIdentifiers(inSection: Self.section)! }
    /// Every item with its payload, in depth-first order. O(n)
    public var elements: [SnapshotElement] { Array(storage.items(inSection: Self.section)) }
    /// Every item's level, in the order of `items` (0: a root). O(n)
    public var levels: [Int] { storage.itemLevels }
    /// The roots in order. O(n)
    public var rootItems: [SnapshotIdentifier] { storage.rootItems(inSection: Self.section)! }
    /// O(1)
    public var count: Int { storage.numberOfItems }
    /// O(1)
    public var isEmpty: Bool { storage.numberOfItems == 0 }
    /// Whether some item has a parent. O(1)
    public var isOutline: Bool { storage.isOutline }

    /// O(1)
    public func contains(_ item: SnapshotIdentifier) -> Bool { storage.contains(item: item) }
    /// The item's position in `items`. O(n)
    public func index(of item: SnapshotIdentifier) -> Int? { storage.indexOfItem(item) }
    /// O(1) plus the copy.
    public func payload(of item: SnapshotIdentifier) -> SnapshotPayload? { storage.payload(ofItem: item) }
    /// `nil` for a root or an unknown item. O(1)
    public func parent(of item: SnapshotIdentifier) -> SnapshotIdentifier? { storage.parent(of: item) }
    /// 0 for a root; `nil` for an unknown item. O(1)
    public func level(of item: SnapshotIdentifier) -> Int? { storage.level(of: item) }
    /// The item's children in order; `nil` for an unknown item. O(its subtree)
    public func children(of item: SnapshotIdentifier) -> [SnapshotIdentifier]? { storage.children(of: item) }

    /// `snapshot(of:includingParent:)`: `parent`'s descendants as a section snapshot of their
    /// own, its children as roots, or `parent` itself as the one root when `includingParent`;
    /// `nil` for an unknown item.
    /// - Complexity: O(parent's subtree)
    public func snapshot(of parent: SnapshotIdentifier, includingParent: Bool = false) -> SectionSnapshot? {
        guard let slot = storage.itemSlot(parent) else { return nil }
        let last = storage.subtreeEnd(slot)
        let base = storage.levelOfSlot(slot) + (includingParent ? 0 : 1)
        var elements: [SnapshotElement] = []
        var levels: [Int] = []
        var s = includingParent ? slot : (slot == last ? RoomSnapshot.none : storage.itemNodes[Int(slot)].next)
        while s != RoomSnapshot.none {
            elements.append(SnapshotElement(storage.itemIdentifier(at: s), payload: storage.itemPayload(at: s)))
            levels.append(storage.levelOfSlot(s) - base)
            if s == last { break }
            s = storage.itemNodes[Int(s)].next
        }
        // Unique items, and levels of a subtree of a valid forest: neither step can fail.
        var result = try! SectionSnapshot(elements)
        try! result.setOutlineLevels(levels, maxOutlineDepth: .max)
        return result
    }

    /// A text dump of the tree, for debugging:
    /// ```
    /// SectionSnapshot: 3 items
    /// ├─ fruit
    /// │  └─ apple = "red"
    /// └─ vegetable
    /// ```
    /// - Complexity: O(n)
    public func visualDescription() -> String {
        "SectionSnapshot: \(count) item\(count == 1 ? "" : "s")\n" + storage.describeItems(ofSectionSlot: storage.sectionIndex[Self.section]!, indent: "")
    }

    public var description: String { visualDescription() }
}

extension RoomSnapshot {
    /// One section's items, with their hierarchy, as a section snapshot; `nil` when there is no
    /// such section.
    /// - Complexity: O(items in the section)
    public func sectionSnapshot(of section: SnapshotIdentifier) -> SectionSnapshot? {
        guard let s = sectionIndex[section] else { return nil }
        var result = SectionSnapshot()
        var elements: [SnapshotElement] = []
        var levels: [Int] = []
        elements.reserveCapacity(sectionNodes[Int(s)].itemCount)
        withItems { items in
            var i = sectionNodes[Int(s)].firstItem
            while i != Self.none {
                elements.append(SnapshotElement(items.id(i), payload: items.payload(i)))
                levels.append(levelOfSlot(i))
                i = items[Int(i)].next
            }
        }
        // The items come from one valid section: unique, and a valid forest.
        try! result.storage.apply(.appendItems(elements, toSection: SectionSnapshot.section), limits: .unlimited)
        try! result.setOutlineLevels(levels, maxOutlineDepth: .max)
        return result
    }
}
