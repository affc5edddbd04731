@testable import SnapSync
import SnapSyncClientTestSupport
import Testing

/// Outlines in a replica, without a daemon: per-viewer expansion, and changes whose index paths
/// count the visible rows, replayed as UIKit replays a batch update.
@Suite("Client: outlines (expansion, visible rows)")
struct ClientOutlineTests {
    /// The seeds' outline screen: root categories with children.
    static func emoji() -> RoomSnapshot {
        var s = try! RoomSnapshot([(SnapshotElement("outline"), []), (SnapshotElement("list"), ["x"])])
        try! s.apply([
            .appendItems(["smileys", "animals", "food"], toSection: "outline"),
            .appendChildren(["grin", "wink"], toParent: "smileys"),
            .appendChildren(["cat", "dog"], toParent: "animals"),
            .appendChildren(["tabby"], toParent: "cat"),
        ])
        return s
    }

    /// A replica at `snapshot` (version 1) and a stream of its changes past the `.initial` one.
    func replica(_ snapshot: RoomSnapshot) async -> (RoomReplica, AsyncStream<RoomChange>.Iterator, RoomChange) {
        let replica = RoomReplica(room: "r")
        replica.publish(
            RoomChange(
                kind: .initial, room: "r", previousPosition: nil, position: RoomPosition(epoch: 1, version: 1), operations: [],
                snapshot: snapshot, updates: BatchUpdates(from: RoomSnapshot(), to: snapshot)))
        var changes = replica.changes.makeAsyncIterator()
        let initial = await changes.next()!
        return (replica, changes, initial)
    }

    func publishDiff(_ replica: RoomReplica, _ operations: [SnapshotOperation]) throws {
        let (old, position) = replica.current
        var new = old
        try new.apply(operations, limits: .unlimited)
        replica.publish(
            RoomChange(
                kind: .diff, room: "r", previousPosition: position, position: RoomPosition(epoch: position.epoch, version: position.version + 1),
                operations: operations, snapshot: new, updates: BatchUpdates(from: old, to: new, operations: operations)))
    }

    func rows(_ s: RoomSnapshot) -> [[String]] { s.sectionIdentifiers.map { s.itemIdentifiers(inSection: $0)!.map { $0.string! } } }

    @Test("a replica starts collapsed; expanding and collapsing yield the rows' inserts and deletes")
    func expandAndCollapse() async throws {
        var (replica, changes, initial) = await replica(Self.emoji())
        #expect(rows(initial.visibleSnapshot) == [["smileys", "animals", "food"], ["x"]])
        #expect(replica.visibleItems == ["smileys", "animals", "food", "x"])
        #expect(replica.itemIdentifier(for: ItemIndexPath(item: 2, section: 0)) == "food")
        #expect(!replica.isVisible("cat"))
        #expect(replica.sectionSnapshot(for: "outline")?.children(of: "animals") == ["cat", "dog"])

        replica.expand("animals")
        let expanded = await changes.next()!
        #expect(expanded.kind == .expansion)
        #expect(expanded.position == initial.position)
        #expect(expanded.updates.insertedItems == [ItemIndexPath(item: 2, section: 0), ItemIndexPath(item: 3, section: 0)])
        #expect(expanded.updates.deletedItems.isEmpty && expanded.updates.movedItems.isEmpty)
        // The expanded row redraws its disclosure control.
        #expect(expanded.updates.reconfiguredItemIdentifiers == ["animals"])
        expectReplays(expanded.updates, from: initial.visibleSnapshot, to: expanded.visibleSnapshot, operations: [], "expand")
        #expect(replica.isExpanded("animals") && replica.isVisible("cat") && !replica.isVisible("tabby"))
        #expect(replica.itemIdentifier(for: ItemIndexPath(item: 3, section: 0)) == "dog")
        #expect(replica.indexPath(for: "food") == ItemIndexPath(item: 4, section: 0))

        // The diffable routes: the flat one lists the rows; the section snapshot one every item
        // with its hierarchy and the expanded items, and UIKit shows the same rows.
        #expect(DiffableUpdate(initial).sections.first?.items == ["smileys", "animals", "food"])
        #expect(DiffableUpdate(expanded).sections.first?.items == ["smileys", "animals", "cat", "dog", "food"])
        let section = try #require(DiffableSectionUpdate(expanded, section: "outline"))
        #expect(section.runs.first == DiffableSectionUpdate.Run(parent: nil, items: ["smileys"]))
        #expect(section.runs.flatMap(\.items) == expanded.snapshot.itemIdentifiers(inSection: "outline"))
        #expect(section.expandedItems == ["animals"] && section.visibleItems == ["smileys", "animals", "cat", "dog", "food"])
        expectDiffableUpdate(expanded, from: initial.visibleSnapshot, "expand")

        replica.expand(["cat", "smileys"])
        let more = await changes.next()!
        #expect(rows(more.visibleSnapshot)[0] == ["smileys", "grin", "wink", "animals", "cat", "tabby", "dog", "food"])
        expectReplays(more.updates, from: expanded.visibleSnapshot, to: more.visibleSnapshot, operations: [], "expand two")

        replica.collapse("animals")
        let collapsed = await changes.next()!
        #expect(collapsed.updates.deletedItems == [4, 5, 6].map { ItemIndexPath(item: $0, section: 0) })
        #expect(rows(collapsed.visibleSnapshot)[0] == ["smileys", "grin", "wink", "animals", "food"])
        // cat stays expanded: expanding animals again shows tabby too.
        #expect(replica.isExpanded("cat"))
        expectReplays(collapsed.updates, from: more.visibleSnapshot, to: collapsed.visibleSnapshot, operations: [], "collapse")
    }

    @Test("a remote change inside a collapsed subtree yields no row updates")
    func hiddenChangesMoveNoRow() async throws {
        var (replica, changes, _) = await replica(Self.emoji())
        try publishDiff(replica, [.appendChildren(["kitten"], toParent: "cat"), .updateItems([SnapshotElement("tabby", payload: "striped")], .reload)])
        let hidden = await changes.next()!
        #expect(hidden.kind == .diff)
        #expect(hidden.updates.isEmpty, "\(hidden.updates)")
        #expect(hidden.snapshot.children(of: "cat") == ["tabby", "kitten"])
        // A visible change next to it is reported, at visible positions.
        try publishDiff(replica, [.moveItem("food", .before("smileys")), .updateItems([SnapshotElement("dog", payload: "woof")], .reload)])
        let visible = await changes.next()!
        #expect(rows(visible.visibleSnapshot)[0] == ["food", "smileys", "animals"])
        #expect(!visible.updates.isEmpty)
        #expect(visible.updates.reloadedItemIdentifiers.isEmpty)  // dog is hidden
        // A collapsed item whose children all go redraws its disclosure control.
        try publishDiff(replica, [.deleteItems(["grin", "wink"])])
        let emptied = await changes.next()!
        #expect(emptied.updates.reconfiguredItemIdentifiers == ["smileys"])
        #expect(emptied.updates.deletedItems.isEmpty)
    }

    @Test("expansion can start expanded, and forgets items that leave the room")
    func configuredExpansion() async throws {
        var (replica, changes, _) = await replica(Self.emoji())
        replica.expansion = OutlineExpansion(expandsByDefault: true)
        let all = await changes.next()!
        #expect(rows(all.visibleSnapshot)[0] == ["smileys", "grin", "wink", "animals", "cat", "tabby", "dog", "food"])
        replica.collapse("cat")
        _ = await changes.next()!
        try publishDiff(replica, [.deleteItems(["cat"])])
        _ = await changes.next()!
        #expect(replica.expansion.exceptions.isEmpty)
        try publishDiff(replica, [.appendChildren(["cat"], toParent: "animals"), .appendChildren(["tabby"], toParent: "cat")])
        let back = await changes.next()!
        #expect(rows(back.visibleSnapshot)[0].suffix(3) == ["cat", "tabby", "food"])
    }

    @Test("random expansions and random forest batches replay as UIKit batches over the visible rows (seeded)")
    func randomOutlineChangesReplay() async throws {
        var kinds = (inserts: 0, deletes: 0, moves: 0, hiddenDiffs: 0)
        for seed in UInt64(1)...30 {
            var random = RandomBatches(seed: seed &* 104_729, sectionPool: 4, itemPool: 30, allowsDeleteAll: false)
            let start = random.outlineBatch(on: random.snapshot(), count: 8).result
            var (replica, changes, last) = await replica(start)
            for step in 0..<25 {
                let before = replica.current.snapshot
                switch Int.random(in: 0..<3, using: &random.random) {
                case 0:
                    let items = before.itemIdentifiers
                    guard let item = items.randomElement(using: &random.random) else { continue }
                    if Bool.random(using: &random.random) { replica.expand(item) } else { replica.collapse(item) }
                    guard before.isOutline else { continue }  // a flat room has nothing to expand
                default:
                    let (operations, _) = random.outlineBatch(on: before, count: Int.random(in: 1...4, using: &random.random))
                    try publishDiff(replica, operations)
                }
                let change = await changes.next()!
                let context =
                    "seed \(seed), step \(step): \(change.kind) \(change.operations)\nbefore:\n\(last.visibleSnapshot.visualDescription())after:\n\(change.visibleSnapshot.visualDescription())"
                expectReplays(change.updates, from: last.visibleSnapshot, to: change.visibleSnapshot, operations: change.operations, context)
                // Both diffable routes show exactly these rows (`expectDiffableUpdate`).
                expectDiffableUpdate(change, from: last.visibleSnapshot, context)
                // The rows are the items whose ancestors are all expanded, and the lookups count them.
                let visible = change.snapshot.itemIdentifiers.filter { replica.expansion.isVisible($0, in: change.snapshot) }
                #expect(change.visibleSnapshot.itemIdentifiers == visible, "\(context)")
                #expect(change.visibleSnapshot == replica.expansion.visibleSnapshot(of: change.snapshot), "\(context)")
                for section in change.visibleSnapshot.sectionIdentifiers {
                    let s = change.visibleSnapshot.indexOfSection(section)!
                    for (i, item) in change.visibleSnapshot.itemIdentifiers(inSection: section)!.enumerated() {
                        #expect(replica.itemIdentifier(for: ItemIndexPath(item: i, section: s)) == item, "\(context)")
                    }
                }
                if change.kind == .diff, last.visibleSnapshot == change.visibleSnapshot, change.updates.isEmpty { kinds.hiddenDiffs += 1 }
                kinds.inserts += change.updates.insertedItems.count
                kinds.deletes += change.updates.deletedItems.count
                kinds.moves += change.updates.movedItems.count
                last = change
            }
        }
        #expect(kinds.inserts > 50 && kinds.deletes > 50 && kinds.moves > 10 && kinds.hiddenDiffs > 5, "\(kinds)")
    }
}
