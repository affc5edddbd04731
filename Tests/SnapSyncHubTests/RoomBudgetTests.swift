import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub

// The room budget near its limit (--max-room-total-bytes): a write that grows the rooms is
// refused with server_full and changes nothing, one that shrinks them is taken, so a full server
// can be emptied by writes.

private func element(_ id: String, _ payload: String = "") -> SnapshotElement {
    SnapshotElement(SnapshotIdentifier(id), payload: SnapshotPayload(payload))
}

/// A room holding a big item "big" and a small one "a" in section "s", under a budget that is
/// full: its limit leaves less than one remembered frame and id free.
private func fullRoom() throws -> (Room, RoomMemoryBudget) {
    let room = Room(name: "room", epoch: 9, version: 0, snapshot: RoomSnapshot(), limits: WireLimits())
    var scratch: [UInt8] = []
    let ops: [SnapshotOperation] = [
        .appendSections([element("s")]),
        .appendItems([element("big", String(repeating: "x", count: 60_000)), element("a", "1")], toSection: "s"),
    ]
    guard case .applied = room.mutate(ops, expectedVersion: nil, writeID: [], scratch: &scratch) else {
        throw Failure("the room could not be filled")
    }
    let budget = RoomMemoryBudget(limit: RoomMemoryBudget.bytes(of: room) + 100)
    budget.update(room)
    room.budget = budget
    return (room, budget)
}

private struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

@Suite(.unitTests) struct RoomBudgetTests {
    @Test func aGrowingWriteIsRefusedWhenTheBudgetIsFull() throws {
        let (room, budget) = try fullRoom()
        let before = room.snapshot
        var scratch: [UInt8] = []
        for ops: [SnapshotOperation] in [
            [.appendItems([element("b", "2")], toSection: "s")],
            // Deletes one item but adds a bigger one: still growth.
            [.deleteItems(["a"]), .appendItems([element("c", String(repeating: "y", count: 1000))], toSection: "s")],
            [],
        ] {
            guard case .rejected(let rejection) = room.mutate(ops, expectedVersion: nil, writeID: [1], scratch: &scratch) else {
                Issue.record("\(ops) was not refused")
                continue
            }
            budget.update(room)
            #expect(rejection.code == .serverFull)
            #expect(room.snapshot == before && room.version == 1 && room.writeIDCount == 0)
        }
        guard case .rejected(let rejection) = room.replace(with: before, expectedVersion: nil, writeID: [1], scratch: &scratch) else {
            Issue.record("an unchanged REPLACE remembering a write id was not refused")
            return
        }
        #expect(rejection.code == .serverFull)
    }

    @Test func aMutateThatShrinksTheRoomIsTakenWhenTheBudgetIsFull() throws {
        let (room, budget) = try fullRoom()
        let total = budget.total
        var scratch: [UInt8] = []
        guard case .applied(let version, _) = room.mutate([.deleteItems(["big"])], expectedVersion: 1, writeID: [2], scratch: &scratch) else {
            Issue.record("deleting the big item was refused")
            return
        }
        budget.update(room)
        #expect(version == 2 && !room.snapshot.contains(item: "big") && room.snapshot.contains(item: "a"))
        #expect(throws: Never.self) { try room.checkInvariants() }
        #expect(budget.total < total - 50_000)
        // With the room emptied, growing writes fit again.
        guard case .applied = room.mutate([.appendItems([element("b", "2")], toSection: "s")], expectedVersion: nil, writeID: [], scratch: &scratch) else {
            Issue.record("a small write after the delete was refused")
            return
        }
    }

    @Test func aReplaceWithASmallerTargetIsTakenWhenTheBudgetIsFull() throws {
        let (room, budget) = try fullRoom()
        let total = budget.total
        var scratch: [UInt8] = []
        let target = try RoomSnapshot([(section: element("s"), items: [element("a", "1")])])
        guard case .applied(2, _) = room.replace(with: target, expectedVersion: nil, writeID: [3], scratch: &scratch) else {
            Issue.record("a REPLACE dropping the big item was refused")
            return
        }
        budget.update(room)
        #expect(room.snapshot == target)
        #expect(budget.total < total - 50_000)
    }
}

@Suite(.unitTests) struct RoomBudgetBoundTests {
    /// Below a full budget, a MUTATE refused by its bound (twice its DIFF) is measured exactly
    /// only when it can shrink the room (PROTOCOL.md §7.1): a batch of moves, which grows the
    /// snapshot by nothing but has a large DIFF, is refused, and the room is not copied for it.
    @Test func aBatchThatCannotShrinkIsRefusedByItsBound() throws {
        let room = Room(name: "room", epoch: 9, version: 0, snapshot: RoomSnapshot(), limits: WireLimits())
        var scratch: [UInt8] = []
        let ids = (0..<200).map { "i\($0)" }
        guard
            case .applied = room.mutate(
                [.appendSections([element("s")]), .appendItems(ids.map { element($0) }, toSection: "s")],
                expectedVersion: nil, writeID: [], scratch: &scratch)
        else {
            throw Failure("the room could not be filled")
        }
        // Room for the moves' exact growth (their DIFF and a remembered frame and id), not for
        // twice their DIFF.
        let moves: [SnapshotOperation] = ids.dropFirst().map { .moveItem(SnapshotIdentifier($0), .before("i0")) }
        let size = FrameEncoder().encodeDiff(room: room.name, epoch: room.epoch, version: 2, ops: moves, into: &scratch)
        let budget = RoomMemoryBudget(limit: RoomMemoryBudget.bytes(of: room) + size + 2 * RoomMemoryBudget.bytesPerRememberedID + 100)
        budget.update(room)
        room.budget = budget
        let before = room.snapshot
        guard case .rejected(let rejection) = room.mutate(moves, expectedVersion: nil, writeID: [], scratch: &scratch) else {
            Issue.record("a batch of moves past the bound of twice its DIFF was measured and taken")
            return
        }
        #expect(rejection.code == .serverFull)
        #expect(room.snapshot == before && room.version == 1)
    }
}
