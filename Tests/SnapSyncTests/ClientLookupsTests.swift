@testable import SnapSync
import SnapSyncClientTestSupport
import SnapSyncTestSupport
import Testing
import SnapSyncTestThreads

/// `SnapshotPositions` (the replica's index-path lookups) against the snapshot's own O(n)
/// positions, after every random batch, and the adapters' logic through the UIKit validator.
@Suite("Client: index-path lookups and the adapters' logic", .unitTests)
struct ClientLookupsTests {
    @Test("lookups match a brute-force walk after every random batch (seeded)")
    func randomBatches() {
        var operationsApplied = 0
        for seed in UInt64(1)...60 {
            var random = RandomBatches(seed: seed, sectionPool: 8, itemPool: 60)
            var snapshot = random.snapshot()
            var positions = SnapshotPositions(snapshot)
            expectPositions(positions, match: snapshot, "seed \(seed), start")
            for step in 0..<40 {
                let (operations, next) = random.batch(on: snapshot, count: Int.random(in: 1...6, using: &random.random))
                for operation in operations { positions.apply(operation) }
                operationsApplied += operations.count
                let change = RoomChange(
                    kind: .diff, room: "r", previousPosition: nil, position: RoomPosition(epoch: 1, version: UInt64(step)),
                    operations: operations, snapshot: next, updates: BatchUpdates(from: snapshot, to: next, operations: operations))
                expectPositions(positions, match: next, "seed \(seed), batch \(step): \(operations)")
                expectAdapterReplays(change, from: snapshot, "seed \(seed), batch \(step): \(operations)")
                expectDiffableUpdate(change, from: snapshot, "seed \(seed), batch \(step): \(operations)")
                snapshot = next
            }
        }
        #expect(operationsApplied > 5_000, "\(operationsApplied) operations")
    }

    @Test("a catch-up folding many batches, and a resync, are followed too")
    func catchUpAndResync() {
        var random = RandomBatches(seed: 99, sectionPool: 6, itemPool: 40)
        let start = random.snapshot()
        var positions = SnapshotPositions(start)
        var snapshot = start, operations: [SnapshotOperation] = []
        for _ in 0..<30 {
            let batch = random.batch(on: snapshot, count: 4)
            operations += batch.operations
            snapshot = batch.result
        }
        let catchUp = RoomChange(
            kind: .catchUp, room: "r", previousPosition: RoomPosition(epoch: 1, version: 0), position: RoomPosition(epoch: 1, version: 30),
            operations: operations, snapshot: snapshot, updates: BatchUpdates(from: start, to: snapshot, operations: operations))
        positions.apply(catchUp)
        expectPositions(positions, match: snapshot, "catch-up")
        expectAdapterReplays(catchUp, from: start, "catch-up")
        let other = random.snapshot()
        let resync = RoomChange(
            kind: .resync(.historyUnavailable), room: "r", previousPosition: catchUp.position, position: RoomPosition(epoch: 2, version: 5),
            operations: [], snapshot: other, updates: BatchUpdates(from: snapshot, to: other))
        positions.apply(resync)
        expectPositions(positions, match: other, "resync")
        expectAdapterReplays(resync, from: snapshot, "resync")
        expectDiffableUpdate(resync, from: snapshot, "resync")
    }

    @Test("a flat room's batch that holds outline ops (a child appended, then moved out or deleted with its parent) is followed")
    func flatBatchesWithOutlineOperations() throws {
        let batches: [[SnapshotOperation]] = [
            [.appendChildren(["c"], toParent: "a"), .moveItemToSection("c", section: "s")],
            [.appendChildren(["c"], toParent: "a"), .moveItem("c", .after("a"))],
            [.moveItemToParent("b", parent: "a"), .deleteItems(["a"])],
        ]
        for operations in batches {
            let old = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a"), SnapshotElement("b")]), (SnapshotElement("t"), [])])
            var new = old
            try new.apply(operations)
            #expect(!new.isOutline, "the batch ends flat: \(operations)")
            var positions = SnapshotPositions(old)
            positions.apply(
                RoomChange(
                    kind: .diff, room: "r", previousPosition: nil, position: RoomPosition(epoch: 1, version: 1), operations: operations,
                    snapshot: new, updates: BatchUpdates(from: old, to: new, operations: operations)))
            expectPositions(positions, match: new, "\(operations)")
        }
    }

    @Test("a large room: positions stay right through inserts at the front, moves and deletes")
    func largeRoom() throws {
        var snapshot = try RoomSnapshot([(SnapshotElement("s"), (0..<3000).map { SnapshotElement("i\($0)") })])
        var positions = SnapshotPositions(snapshot)
        var random = SplitMix64(seed: 7)
        for k in 0..<1500 {
            let a = SnapshotIdentifier("i\(Int.random(in: 0..<3000, using: &random))"), b = SnapshotIdentifier("i\(Int.random(in: 0..<3000, using: &random))")
            var operations: [SnapshotOperation] = [.insertItems([SnapshotElement("n\(k)")], .before(snapshot.itemIdentifiers(inSection: "s")![0]))]
            if a != b, snapshot.contains(item: a), snapshot.contains(item: b) { operations.append(.moveItem(a, .after(b))) }
            if k % 3 == 0, snapshot.contains(item: b) { operations.append(.deleteItems([b])) }
            try snapshot.apply(operations)
            for operation in operations { positions.apply(operation) }
        }
        expectPositions(positions, match: snapshot, "after 1500 batches")
        #expect(positions.indexPath(for: "n1499") == ItemIndexPath(item: 0, section: 0))
    }

    @Test("the four minimal batches that crashed a collection view (a reload beside a move) are safe through the adapter's steps")
    func minimalCasesThroughSteps() throws {
        func layout(_ sections: [(String, [String])]) throws -> RoomSnapshot {
            try RoomSnapshot(sections.map { (SnapshotElement(SnapshotIdentifier($0.0)), $0.1.map { SnapshotElement(SnapshotIdentifier($0)) }) })
        }
        let cases: [(RoomSnapshot, [SnapshotOperation])] = [
            (try layout([("S", ["a", "b"])]), [.updateItems([SnapshotElement("a", payload: "a'")], .reload), .moveItem("b", .before("a"))]),
            (try layout([("A", []), ("B", [])]), [.updateSections([SnapshotElement("B", payload: "B'")]), .moveSection("A", .after("B"))]),
            (try layout([("S2", ["a", "b"]), ("S10", ["c"])]), [.moveItem("a", .before("c")), .updateItems([SnapshotElement("b", payload: "b'")], .reload)]),
        ]
        for (k, (old, operations)) in cases.enumerated() {
            var new = old
            try new.apply(operations)
            let change = RoomChange(
                kind: .diff, room: "r", previousPosition: nil, position: RoomPosition(epoch: 1, version: 1), operations: operations, snapshot: new,
                updates: BatchUpdates(from: old, to: new, operations: operations))
            expectAdapterReplays(change, from: old, "case \(k + 1)")
            expectDiffableUpdate(change, from: old, "case \(k + 1)")
        }
    }
}
