@testable import SnapSync
import Testing

/// `changes` and `events` with several consumers: each gets every element, in order.
@Suite("Client: streams with several consumers", .timeLimit(.minutes(5)))
struct ClientStreamsTests {
    func change(_ version: UInt64, _ snapshot: RoomSnapshot, from previous: RoomSnapshot) -> RoomChange {
        RoomChange(
            kind: .diff, room: "r", previousPosition: RoomPosition(epoch: 1, version: version - 1), position: RoomPosition(epoch: 1, version: version),
            operations: [], snapshot: snapshot, updates: BatchUpdates(from: previous, to: snapshot))
    }

    @Test("two consumers of a replica's changes each get every change; a late one starts from the current snapshot")
    func replicaChanges() async throws {
        let replica = RoomReplica(room: "r")
        let first = replica.changes, second = replica.changes
        var snapshots = [RoomSnapshot()]
        for version in UInt64(1)...50 {
            var next = snapshots.last!
            try next.appendSections([SnapshotElement("s\(version)")])
            replica.publish(change(version, next, from: snapshots.last!))
            snapshots.append(next)
        }
        let late = replica.changes
        replica.finish()
        let consumed = await withTaskGroup(of: [UInt64].self) { group in
            for stream in [first, second, late] { group.addTask { await stream.reduce(into: []) { $0.append($1.version) } } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(consumed.filter { $0 == Array(0...50) }.count == 2, "\(consumed)")
        #expect(consumed.contains([50]), "the late stream starts with .initial at v50: \(consumed)")
        var lateIterator = late.makeAsyncIterator()
        #expect(await lateIterator.next() == nil, "a consumed, finished stream stays finished")
        #expect(await replica.changes.first { _ in true } == nil, "a stream made after finish() ends at once")
    }

    @Test("a stream's first change is .initial at the snapshot it starts from")
    func initialChange() async throws {
        let replica = RoomReplica(room: "r")
        var snapshot = RoomSnapshot()
        try snapshot.appendSections(["main"])
        try snapshot.appendItems(["a", "b"], toSection: "main")
        replica.publish(change(1, snapshot, from: RoomSnapshot()))
        let stream = replica.changes
        replica.finish()
        let all = await stream.reduce(into: [RoomChange]()) { $0.append($1) }
        #expect(all.count == 1)
        #expect(all.first?.kind == .initial && all.first?.previousPosition == nil && all.first?.snapshot == snapshot)
        #expect(all.first?.updates.insertedSections == [0])
    }

    @Test("two consumers of the client's events each get every event")
    func clientEvents() async {
        let client = SnapSyncClient(host: "127.0.0.1", port: 9)
        let first = client.events, second = client.events
        await client.close()
        let third = client.events
        for stream in [first, second] {
            let events = await stream.reduce(into: [String]()) { $0.append("\($1)") }
            #expect(events == ["closed"])
        }
        #expect(await third.first { _ in true } == nil)
    }

    @Test("a consumer that stops is forgotten; the others go on")
    func consumerStops() async throws {
        let replica = RoomReplica(room: "r")
        let stopping = Task {
            for await _ in replica.changes { break }
        }
        await stopping.value
        let staying = replica.changes
        var snapshot = RoomSnapshot()
        try snapshot.appendSections(["s"])
        replica.publish(change(1, snapshot, from: RoomSnapshot()))
        replica.finish()
        #expect(await staying.reduce(into: []) { $0.append($1.version) } == [0, 1])
    }
}
