import Foundation
@testable import SnapSync
import Testing
import SnapSyncTestThreads

/// The typed façade: string interpolation, `RoomCoding`'s coders, typed errors, `TypedBatch`.
@Suite("Client: typed identifiers and payloads", .unitTests)
struct ClientTypedTests {
    struct Card: Codable, Equatable, Sendable {
        var title: String
        var points: Int
    }

    @Test("identifiers, payloads and elements take string interpolation")
    func interpolation() {
        let n = 7
        let element = SnapshotElement("card-\(n)")
        let payload: SnapshotPayload = "points: \(n * 2)"
        let id: SnapshotIdentifier = "section-\(n)"
        #expect(element.id == SnapshotIdentifier("card-7") && element.payload.isEmpty)
        #expect(payload == SnapshotPayload("points: 14"))
        #expect(id.string == "section-7")
        let literal: SnapshotElement = "plain"
        #expect(literal.id == "plain")
    }

    @Test("a typed batch writes what the coding reads back")
    func roundTrip() async throws {
        let coding = RoomCoding<String, Int, Card>()
        var batch = TypedBatch(builder: BatchBuilder(base: RoomSnapshot()), coding: coding)
        try batch.appendSections(["todo", "done"])
        try batch.appendItems([(1, Card(title: "write tests", points: 3)), (2, Card(title: "ship", points: 1))], toSection: "todo")
        try batch.moveItem(2, beforeItem: 1)
        try batch.reconfigureItems([(1, Card(title: "write more tests", points: 5))])
        let snapshot = batch.snapshot
        // Every other operation the builder records, typed.
        var more = batch
        try more.appendSections([("later", "Later")])
        try more.reloadSections([("done", "Done!")])
        try more.moveItem(1, toSection: "done")
        try more.appendChildren([(3, Card(title: "sub-task", points: 1))], toParent: 2)
        try more.moveItem(3, toParent: 1)
        #expect(
            Array(more.builder.operations.suffix(5)) == [
                .appendSections([SnapshotElement("later", payload: "Later")]), .updateSections([SnapshotElement("done", payload: "Done!")]),
                .moveItemToSection("1", section: "done"),
                .appendChildren([try coding.element(3, Card(title: "sub-task", points: 1))], toParent: "2"),
                .moveItemToParent("3", parent: "1"),
            ])
        #expect(more.snapshot.parent(of: "3") == "1" && more.snapshot.payload(ofSection: "done") == "Done!")
        try more.deleteAllItems()
        #expect(more.snapshot.numberOfItems == 0 && more.snapshot.numberOfSections == 0)
        #expect(try coding.sectionIdentifiers(in: snapshot) == ["todo", "done"])
        #expect(try coding.itemIdentifiers(inSection: "todo", in: snapshot) == [2, 1])
        #expect(try coding.itemIdentifiers(inSection: "nope", in: snapshot) == nil)
        #expect(try coding.item(1, in: snapshot) == Card(title: "write more tests", points: 5))
        #expect(try coding.item(3, in: snapshot) == nil)
        #expect(snapshot.contains(item: "1"), "Int identifiers are their text")

        let replica = RoomReplica(room: "board")
        replica.publish(
            RoomChange(
                kind: .initial, room: "board", previousPosition: nil, position: RoomPosition(epoch: 1, version: 1), operations: [],
                snapshot: snapshot, updates: BatchUpdates(from: RoomSnapshot(), to: snapshot)))
        let typed = TypedReplica(replica, coding: coding)
        #expect(try typed.itemIdentifier(for: ItemIndexPath(item: 1, section: 0)) == 1)
        #expect(try typed.indexPath(for: 2) == ItemIndexPath(item: 0, section: 0))
        #expect(try typed.sectionIdentifier(for: 1) == "done")
        #expect(try typed.index(ofSection: "done") == 1)
        #expect(try typed.item(2)?.title == "ship")

        // The typed change stream: reads at the change's version, whatever the replica holds now.
        var changes = typed.changes.makeAsyncIterator()
        let first = try #require(await changes.next())
        #expect(first.kind == .initial && first.position.version == 1)
        #expect(try first.sectionIdentifiers() == ["todo", "done"] && first.itemIdentifiers(inSection: "todo") == [2, 1])
        #expect(try first.visibleItemIdentifiers(inSection: "todo") == [2, 1] && first.item(1)?.points == 5)
        var builder = TypedBatch(builder: BatchBuilder(base: snapshot), coding: coding)
        try builder.deleteItems([2])
        replica.publish(
            RoomChange(
                kind: .diff, room: "board", previousPosition: RoomPosition(epoch: 1, version: 1), position: RoomPosition(epoch: 1, version: 2),
                operations: builder.builder.operations, snapshot: builder.snapshot,
                updates: BatchUpdates(from: snapshot, to: builder.snapshot, operations: builder.builder.operations)))
        let second = try #require(await changes.next())
        #expect(second.kind == .diff && second.updates.deletedItems == [ItemIndexPath(item: 0, section: 0)])
        #expect(try second.item(2) == nil && first.item(2)?.title == "ship", "each change reads its own version")
    }

    @Test("bytes that do not decode throw ElementCodingError naming the identifier")
    func decodingErrors() throws {
        var snapshot = RoomSnapshot()
        try snapshot.appendSections(["s"])
        try snapshot.appendItems([SnapshotElement("x", payload: "not json"), SnapshotElement("12", payload: "{\"title\":\"t\",\"points\":1}")], toSection: "s")
        let coding = RoomCoding<String, Int, Card>()
        #expect(throws: ElementCodingError.self) { try coding.itemIdentifiers(inSection: "s", in: snapshot) }
        do {
            _ = try coding.itemIdentifiers(inSection: "s", in: snapshot)
        } catch {
            #expect(error.role == .itemIdentifier && error.direction == .decoding && error.identifier == "x")
            #expect(error.description.contains("item identifier of x"), "\(error)")
        }
        do {
            _ = try coding.item(from: SnapshotPayload("not json"), of: "x")
            Issue.record("decoded a card from \"not json\"")
        } catch {
            #expect(error.role == .itemPayload && error.identifier == "x")
        }
        #expect(try coding.item(12, in: snapshot) == Card(title: "t", points: 1))
        var bytes = RoomSnapshot()
        try bytes.appendSections([SnapshotElement(SnapshotIdentifier([0xFF]))])
        #expect(throws: ElementCodingError.self) { try coding.sectionIdentifiers(in: bytes) }
    }

    @Test("a typed batch's failures are SnapSyncError: .invalidBatch, .coding")
    func batchErrors() throws {
        struct Unencodable: Codable, Sendable {
            func encode(to encoder: any Encoder) throws { throw EncodingError.invalidValue(0, .init(codingPath: [], debugDescription: "never")) }
            init() {}
            init(from decoder: any Decoder) throws {}
        }
        var batch = TypedBatch(builder: BatchBuilder(base: RoomSnapshot()), coding: RoomCoding<String, String, Unencodable>())
        #expect(throws: SnapSyncError.self) { try batch.deleteItems(["missing"]) }
        do {
            try batch.deleteItems(["missing"])
        } catch {
            guard let batchError = error.batchError else {
                Issue.record("\(error)")
                return
            }
            #expect(batchError.operationIndex == 0)
        }
        try batch.appendSections(["s"])
        do {
            try batch.appendItems([("a", Unencodable())])
            Issue.record("encoded the unencodable")
        } catch {
            guard let coding = error.codingError else {
                Issue.record("\(error)")
                return
            }
            #expect(coding.direction == .encoding && coding.role == .itemPayload && coding.identifier == "a")
        }
        #expect(batch.builder.operations.count == 1, "failed calls record nothing")
    }

    @Test("perform maps its body's errors to one SnapSyncError")
    func bodyErrors() {
        struct Mine: Error {}
        #expect(
            SnapSyncError(batchBodyError: BatchError(operationIndex: 2, violation: .itemNotFound("x")))
                == .invalidBatch(BatchError(operationIndex: 2, violation: .itemNotFound("x"))))
        #expect(SnapSyncError(batchBodyError: SnapSyncError.closed) == .closed)
        #expect(SnapSyncError(batchBodyError: Mine()) == .batchAbandoned("Mine()"))
    }
}
