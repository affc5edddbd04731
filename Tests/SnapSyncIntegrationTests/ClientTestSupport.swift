import SnapSyncTestSupport
import SnapSync
import Testing

/// Random snapshots and operation batches over small identifier pools, so that batches often
/// touch, move and re-add the same identifiers.
struct RandomBatches {
    var random: SplitMix64
    let sectionPool: Int
    let itemPool: Int
    /// `deleteAllItems` empties the room; concurrent writers leave more to compare without it.
    let allowsDeleteAll: Bool

    init(seed: UInt64, sectionPool: Int = 8, itemPool: Int = 40, allowsDeleteAll: Bool = true) {
        random = SplitMix64(seed: seed)
        self.sectionPool = sectionPool
        self.itemPool = itemPool
        self.allowsDeleteAll = allowsDeleteAll
    }

    /// Identifier 0 of each pool is the empty one (an identifier like any other), and one
    /// payload in four is empty.
    mutating func sectionID() -> Identifier { Self.id("s", Int.random(in: 0..<sectionPool, using: &random)) }
    mutating func itemID() -> Identifier { Self.id("i", Int.random(in: 0..<itemPool, using: &random)) }
    mutating func payload() -> Payload {
        let k = Int.random(in: 0..<4, using: &random)
        return k == 3 ? .empty : Payload("p\(k)")
    }
    static func id(_ prefix: String, _ k: Int) -> Identifier { Identifier(k == 0 ? "" : "\(prefix)\(k)") }

    /// A snapshot with distinct identifiers.
    mutating func snapshot() -> Snapshot {
        var snapshot = Snapshot()
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
    mutating func operation(on snapshot: Snapshot) -> SnapshotOperation {
        let sections = snapshot.sectionIdentifiers, items = snapshot.itemIdentifiers
        func existingOrNewSection() -> Identifier {
            sections.isEmpty || Int.random(in: 0..<4, using: &random) == 0 ? sectionID() : sections.randomElement(using: &random)!
        }
        func existingOrNewItem() -> Identifier { items.isEmpty || Int.random(in: 0..<4, using: &random) == 0 ? itemID() : items.randomElement(using: &random)! }
        func placement(_ id: Identifier) -> Placement { Bool.random(using: &random) ? .before(id) : .after(id) }
        func elements(_ make: () -> Identifier) -> [SnapshotElement] {
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
    mutating func batch(on snapshot: Snapshot, count: Int) -> (operations: [SnapshotOperation], result: Snapshot) {
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

/// Replays `updates` on `old` the way `UICollectionView.performBatchUpdates` does, checking the
/// rules UIKit enforces with an exception, and returns the sections and items it ends up with.
/// Inserted and reloaded sections and inserted items take their content from `new`, as UIKit
/// asks the data source.
///
/// UIKit's model: deletes, reloads and move sources are old positions, processed as if all at
/// once against the old state; inserts and move destinations are final positions, processed in
/// ascending order; everything not named keeps its relative order.
func replayAsUIKit(_ updates: BatchUpdates, on old: Snapshot, dataSource new: Snapshot) throws -> [(Identifier, [Identifier])] {
    struct Broken: Error, CustomStringConvertible { var description: String }
    func check(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw Broken(description: message()) }
    }
    let oldLayout = old.sectionIdentifiers.map { ($0, old.itemIdentifiers(inSection: $0)!) }
    let newLayout = new.sectionIdentifiers.map { ($0, new.itemIdentifiers(inSection: $0)!) }

    // Section rules.
    let deletedSections = Set(updates.deletedSections), reloadedSections = Set(updates.reloadedSections)
    let movedFrom = Set(updates.movedSections.map(\.from)), movedTo = Set(updates.movedSections.map(\.to))
    let insertedSections = Set(updates.insertedSections)
    try check(deletedSections.count == updates.deletedSections.count, "a section is deleted twice")
    try check(insertedSections.count == updates.insertedSections.count, "a section is inserted twice")
    try check(movedFrom.count == updates.movedSections.count && movedTo.count == updates.movedSections.count, "a section moves twice")
    try check(
        deletedSections.isDisjoint(with: movedFrom) && deletedSections.isDisjoint(with: reloadedSections)
            && reloadedSections.isDisjoint(with: movedFrom), "a section is deleted, moved or reloaded at once")
    try check(insertedSections.isDisjoint(with: movedTo), "a section is inserted and moved to at once")
    try check((deletedSections.union(movedFrom).union(reloadedSections)).allSatisfy { oldLayout.indices.contains($0) }, "old section index out of range")
    try check((insertedSections.union(movedTo)).allSatisfy { newLayout.indices.contains($0) }, "new section index out of range")

    // Item rules.
    let deletedItems = Set(updates.deletedItems), movedItemsFrom = Set(updates.movedItems.map(\.from))
    let insertedItems = Set(updates.insertedItems), movedItemsTo = Set(updates.movedItems.map(\.to))
    let reloadedItems = Set(updates.reloadedItems + updates.reconfiguredItems)
    try check(deletedItems.count == updates.deletedItems.count && insertedItems.count == updates.insertedItems.count, "an item path appears twice")
    try check(movedItemsFrom.count == updates.movedItems.count && movedItemsTo.count == updates.movedItems.count, "an item moves twice")
    try check(reloadedItems.count == updates.reloadedItems.count + updates.reconfiguredItems.count, "an item is reloaded twice")
    try check(
        deletedItems.isDisjoint(with: movedItemsFrom) && reloadedItems.isDisjoint(with: deletedItems)
            && reloadedItems.isDisjoint(with: movedItemsFrom), "an item is deleted, moved or reloaded at once")
    try check(insertedItems.isDisjoint(with: movedItemsTo), "an item is inserted and moved to at once")
    let goneSections = deletedSections.union(reloadedSections)
    for path in deletedItems.union(movedItemsFrom).union(reloadedItems) {
        try check(oldLayout.indices.contains(path.section) && oldLayout[path.section].1.indices.contains(path.item), "old item path \(path) out of range")
        try check(!goneSections.contains(path.section), "item \(path) in a deleted or reloaded section is named")
    }
    let freshSections = insertedSections.union(
        reloadedSections.map { r in
            // A reloaded section stays in place; its final index is where its identifier is in `new`.
            new.indexOfSection(oldLayout[r].0) ?? -1
        })
    for path in insertedItems.union(movedItemsTo) {
        try check(newLayout.indices.contains(path.section) && newLayout[path.section].1.indices.contains(path.item), "new item path \(path) out of range")
        try check(!freshSections.contains(path.section), "item \(path) in an inserted or reloaded section is named")
    }

    // 1. Remove deleted and moving items (old paths), keeping the moving ones by old path.
    var carriedItems: [ItemIndexPath: Identifier] = [:]
    var sections: [(id: Identifier, items: [Identifier], reloaded: Bool, oldIndex: Int)] = []
    for (s, (id, items)) in oldLayout.enumerated() {
        var kept: [Identifier] = []
        for (i, item) in items.enumerated() {
            let path = ItemIndexPath(item: i, section: s)
            if movedItemsFrom.contains(path) { carriedItems[path] = item } else if !deletedItems.contains(path) { kept.append(item) }
        }
        sections.append((id, kept, reloadedSections.contains(s), s))
    }
    // 2. Remove deleted and moving sections.
    var carriedSections: [Int: (id: Identifier, items: [Identifier], reloaded: Bool, oldIndex: Int)] = [:]
    for section in sections where movedFrom.contains(section.oldIndex) { carriedSections[section.oldIndex] = section }
    sections.removeAll { deletedSections.contains($0.oldIndex) || movedFrom.contains($0.oldIndex) }
    // 3. Insert sections at their final indexes, ascending.
    let sectionMoves = Dictionary(uniqueKeysWithValues: updates.movedSections.map { ($0.to, $0.from) })
    for index in insertedSections.union(movedTo).sorted() {
        try check(index <= sections.count, "section insert at \(index) beyond the end (\(sections.count))")
        if let from = sectionMoves[index] {
            sections.insert(carriedSections[from]!, at: index)
        } else {
            sections.insert((newLayout[index].0, newLayout[index].1, false, -1), at: index)
        }
    }
    // 4. Reloaded sections take their content from the data source, at their final index.
    for index in sections.indices where sections[index].reloaded {
        try check(index < newLayout.count, "reloaded section lands beyond the end")
        sections[index].items = newLayout[index].1
    }
    // 5. Insert items at their final paths, ascending.
    let itemMoves = Dictionary(uniqueKeysWithValues: updates.movedItems.map { ($0.to, $0.from) })
    for path in insertedItems.union(movedItemsTo).sorted() {
        try check(sections.indices.contains(path.section), "item insert into missing section \(path)")
        try check(path.item <= sections[path.section].items.count, "item insert at \(path) beyond the end")
        let id = itemMoves[path].map { carriedItems[$0]! } ?? newLayout[path.section].1[path.item]
        sections[path.section].items.insert(id, at: path.item)
    }
    return sections.map { ($0.id, $0.items) }
}

/// Checks that `updates` take `old` to `new` as UIKit would replay them, and that every item
/// or section whose content changed gets a fresh cell.
func expectReplays(
    _ updates: BatchUpdates, from old: Snapshot, to new: Snapshot, operations: [SnapshotOperation],
    _ comment: @autoclosure () -> String, sourceLocation: SourceLocation = #_sourceLocation
) {
    let layout: [(Identifier, [Identifier])]
    do {
        layout = try replayAsUIKit(updates, on: old, dataSource: new)
    } catch {
        Issue.record("UIKit would refuse: \(error)\n\(comment())\nupdates: \(updates)", sourceLocation: sourceLocation)
        return
    }
    let expected = new.sectionIdentifiers.map { ($0, new.itemIdentifiers(inSection: $0)!) }
    let same = layout.count == expected.count && zip(layout, expected).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    #expect(same, "replay gives \(layout), expected \(expected)\n\(comment())\nupdates: \(updates)", sourceLocation: sourceLocation)

    // Content: a changed item is reloaded/reconfigured in place, or its old cell goes away.
    let oldLayout = old.sectionIdentifiers.map { ($0, old.itemIdentifiers(inSection: $0)!) }
    let namedItems = Set(
        operations.flatMap { op -> [Identifier] in
            if case .updateItems(let elements, _) = op { return elements.map(\.id) }
            return []
        })
    let refreshed = Set(updates.reloadedItems + updates.reconfiguredItems)
    let discarded = Set(updates.deletedItems)
    let goneSections = Set(updates.deletedSections + updates.reloadedSections)
    let moved = Set(updates.movedItems.map(\.from))
    for (s, (_, items)) in oldLayout.enumerated() {
        for (i, item) in items.enumerated() {
            guard let after = new.payload(ofItem: item) else { continue }
            let changed = old.payload(ofItem: item) != after || namedItems.contains(item)
            guard changed else { continue }
            let path = ItemIndexPath(item: i, section: s)
            #expect(!moved.contains(path), "changed item \(item) is moved, not refreshed\n\(comment())", sourceLocation: sourceLocation)
            #expect(
                refreshed.contains(path) || discarded.contains(path) || goneSections.contains(s),
                "changed item \(item) at \(path) keeps its stale cell\n\(comment())\nupdates: \(updates)", sourceLocation: sourceLocation)
            #expect(
                updates.reloadedItemIdentifiers.contains(item) || updates.reconfiguredItemIdentifiers.contains(item),
                "changed item \(item) is not listed by identifier\n\(comment())", sourceLocation: sourceLocation)
        }
    }
    for (k, from) in updates.reconfiguredItems.enumerated() {
        let to = updates.reconfiguredItemsAfterUpdate[k]
        #expect(
            oldLayout[from.section].1[from.item] == expected[to.section].1[to.item],
            "reconfigured \(from) and \(to) are different items", sourceLocation: sourceLocation)
    }
    for (s, (id, _)) in oldLayout.enumerated() {
        guard let after = new.payload(ofSection: id), after != old.payload(ofSection: id) else { continue }
        #expect(
            updates.reloadedSections.contains(s) || updates.deletedSections.contains(s),
            "changed section \(id) keeps its stale header\n\(comment())", sourceLocation: sourceLocation)
    }
}

// MARK: - Watching a live client

/// Collects a replica's changes in the background.
actor ChangeLog {
    private(set) var changes: [RoomChange] = []
    private(set) var finished = false

    static func start(_ replica: RoomReplica) -> ChangeLog {
        let log = ChangeLog()
        let stream = replica.changes
        Task {
            for await change in stream { await log.append(change) }
            await log.finish()
        }
        return log
    }

    private func append(_ change: RoomChange) { changes.append(change) }
    private func finish() { finished = true }

    /// Waits until `condition` holds for the changes so far; returns them.
    func wait(
        for what: String, timeout: Duration = .seconds(20),
        _ condition: ([RoomChange]) -> Bool
    ) async throws -> [RoomChange] {
        let deadline = ContinuousClock.now + timeout
        while !condition(changes) {
            guard ContinuousClock.now < deadline else {
                throw TimedOut("\(what); changes so far: \(changes.map { "\($0.kind) v\($0.version)" })")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return changes
    }
}

/// Collects a client's events in the background.
actor EventLog {
    private(set) var events: [ClientEvent] = []

    static func start(_ client: SnapSyncClient) -> EventLog {
        let log = EventLog()
        let stream = client.events
        Task { for await event in stream { await log.append(event) } }
        return log
    }

    private func append(_ event: ClientEvent) { events.append(event) }

    var disconnections: [SnapSyncError] {
        events.compactMap { if case .disconnected(let why) = $0 { why } else { nil } }
    }
}

struct TimedOut: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = "timed out waiting for \(description)" }
}

/// Polls `condition` until it holds or `timeout` passes.
func eventually(
    _ what: @autoclosure () -> String, timeout: Duration = .seconds(20),
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TimedOut(what()) }
        try await Task.sleep(for: .milliseconds(10))
    }
}

extension ConnectionState {
    var isReconnecting: Bool {
        if case .reconnecting = self { return true }
        return false
    }
}

extension RoomChange.Kind {
    var isResync: Bool {
        if case .resync = self { return true }
        return false
    }
}

/// Checks a replica's whole change stream: positions follow each other, and each change's
/// index paths, replayed on the previous snapshot as UIKit would, give the change's snapshot.
func expectConsistentStream(_ changes: [RoomChange], _ who: String, sourceLocation: SourceLocation = #_sourceLocation) {
    guard let first = changes.first else {
        Issue.record("\(who): no changes", sourceLocation: sourceLocation)
        return
    }
    #expect(first.kind == .initial, "\(who): the stream starts with the initial load", sourceLocation: sourceLocation)
    expectReplays(first.updates, from: Snapshot(), to: first.snapshot, operations: [], "\(who): initial", sourceLocation: sourceLocation)
    for (previous, change) in zip(changes, changes.dropFirst()) {
        #expect(
            change.previousPosition == previous.position, "\(who): \(change.kind) v\(change.version) follows v\(previous.version)",
            sourceLocation: sourceLocation)
        if change.kind == .diff {
            #expect(change.position.version == previous.position.version + 1, sourceLocation: sourceLocation)
        }
        var replayed = previous.snapshot
        if !change.kind.isResync {
            // A DIFF or catch-up carries the operations that made it.
            do {
                try replayed.apply(change.operations, limits: .unlimited)
            } catch {
                Issue.record("\(who): v\(change.version)'s operations do not apply: \(error)", sourceLocation: sourceLocation)
            }
            #expect(replayed == change.snapshot, "\(who): v\(change.version)'s operations give its snapshot", sourceLocation: sourceLocation)
        }
        expectReplays(
            change.updates, from: previous.snapshot, to: change.snapshot, operations: change.operations,
            "\(who): \(change.kind) v\(previous.version) → v\(change.version)", sourceLocation: sourceLocation)
    }
}
