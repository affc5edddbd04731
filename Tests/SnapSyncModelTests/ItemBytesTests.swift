// The item byte arena (RoomSnapshot+ItemBytes.swift): payloads rewritten in place or moved, freed
// bytes counted as garbage and compacted away, all without changing what the snapshot says, and
// with the arena bounded by about twice its live bytes. `@testable` only to read the arena's
// size: the bound is the point of the arena.

import Testing
import SnapSyncTestThreads
@testable import SnapSyncModel
import SnapSyncTestSupport

@Suite(.unitTests) struct ItemBytesTests {
    static func element(_ k: Int, payloadBytes: Int, fill: UInt8 = 0x61) -> SnapshotElement {
        SnapshotElement(SnapshotIdentifier("item-\(k)"), payload: SnapshotPayload([UInt8](repeating: fill, count: payloadBytes)))
    }

    /// The snapshot built from scratch with the same content: equal, same digest, same encoding.
    static func expectSameContent(_ s: RoomSnapshot, as items: [SnapshotElement], section: SnapshotIdentifier = "s") throws {
        let rebuilt = try RoomSnapshot([(section: SnapshotElement(section), items: items)], limits: .unlimited)
        #expect(s == rebuilt)
        #expect(s.digest == rebuilt.digest)
        #expect(s.canonicalEncoding == rebuilt.canonicalEncoding)
        #expect(s.itemIdentifiers == items.map(\.id))
        for item in items { #expect(s.payload(ofItem: item.id) == item.payload) }
    }

    @Test func aPayloadThatFitsIsRewrittenInPlace() throws {
        var s = RoomSnapshot()
        try s.appendSections(["s"])
        try s.appendItems([Self.element(1, payloadBytes: 64), Self.element(2, payloadBytes: 64)], toSection: "s")
        let arena = s.itemBytes.count
        for round in 0..<1_000 {
            try s.reloadItems([Self.element(1, payloadBytes: 64 - round % 3, fill: UInt8(round % 200))])
            try s.checkInvariants()
        }
        // Same size or smaller every time: nothing was appended, whatever shrank is garbage.
        #expect(s.itemBytes.count == arena)
        try Self.expectSameContent(s, as: [Self.element(1, payloadBytes: 64 - 999 % 3, fill: UInt8(999 % 200)), Self.element(2, payloadBytes: 64)])
    }

    @Test func aGrowingPayloadMovesAndTheArenaStaysBounded() throws {
        var s = RoomSnapshot()
        try s.appendSections(["s"])
        try s.appendItems((0..<50).map { Self.element($0, payloadBytes: 8) }, toSection: "s")
        var expected = (0..<50).map { Self.element($0, payloadBytes: 8) }
        for round in 1...2_000 {
            let k = round % 50
            // Grows until 400 bytes, then starts small again: moves and in-place writes mixed.
            let size = 8 + (round / 50 * 7) % 400
            expected[k] = Self.element(k, payloadBytes: size, fill: UInt8(round % 251))
            try s.reloadItems([expected[k]])
            if round % 97 == 0 { try s.checkInvariants() }
            let live = expected.reduce(0) { $0 + $1.id.count + $1.payload.count }
            #expect(s.itemBytes.count <= 2 * live + s.itemNodes.count + 4096, "round \(round)")
        }
        try s.checkInvariants()
        try Self.expectSameContent(s, as: expected)
    }

    @Test func deletesAreCompactedAway() throws {
        var s = RoomSnapshot()
        try s.appendSections(["s"])
        let all = (0..<400).map { Self.element($0, payloadBytes: 64) }
        try s.appendItems(all, toSection: "s")
        let full = s.itemBytes.count
        // Delete three in four: ~23 KiB of garbage against ~7.7 KiB live, so a compaction ran.
        let gone = all.indices.filter { $0 % 4 != 0 }.map { all[$0].id }
        for chunk in stride(from: 0, to: gone.count, by: 10) {
            try s.deleteItems(Array(gone[chunk..<min(chunk + 10, gone.count)]))
            try s.checkInvariants()
        }
        let kept = all.indices.filter { $0 % 4 == 0 }.map { all[$0] }
        let live = kept.reduce(0) { $0 + $1.id.count + $1.payload.count }
        #expect(s.itemBytes.count < full / 2)
        #expect(s.itemBytes.count <= 2 * live + s.itemNodes.count + 4096)
        try Self.expectSameContent(s, as: kept)
        // Freed slots are reused, and the new bytes land after the compacted ones.
        try s.appendItems([Self.element(1_000, payloadBytes: 32)], toSection: "s")
        try s.checkInvariants()
        try Self.expectSameContent(s, as: kept + [Self.element(1_000, payloadBytes: 32)])
    }

    @Test func aRejectedBatchThatCompactedRollsBackExactly() throws {
        var s = RoomSnapshot()
        try s.appendSections(["s"])
        let all = (0..<300).map { Self.element($0, payloadBytes: 64) }
        try s.appendItems(all, toSection: "s")
        let before = s
        let beforeDigest = s.digest
        // Deletes enough to compact, grows a payload (a move), then fails on a missing item.
        let batch: [SnapshotOperation] = [
            .deleteItems(all[0..<250].map(\.id)),
            .updateItems([Self.element(260, payloadBytes: 500)], .reload),
            .deleteItems(["missing"]),
        ]
        #expect(throws: BatchError.self) { try s.apply(batch, limits: .unlimited) }
        try s.checkInvariants()
        #expect(s == before)
        #expect(s.digest == beforeDigest)
        try Self.expectSameContent(s, as: all)
    }

    @Test func copiesDoNotSeeEachOthersWrites() throws {
        var a = RoomSnapshot()
        try a.appendSections(["s"])
        try a.appendItems((0..<100).map { Self.element($0, payloadBytes: 64) }, toSection: "s")
        let b = a
        try a.reloadItems([Self.element(3, payloadBytes: 64, fill: 0x7A)])  // in place
        try a.reloadItems([Self.element(4, payloadBytes: 200, fill: 0x7A)])  // moved
        try a.deleteItems((50..<100).map { Self.element($0, payloadBytes: 0).id })  // compacted or not
        try a.checkInvariants()
        try b.checkInvariants()
        try Self.expectSameContent(b, as: (0..<100).map { Self.element($0, payloadBytes: 64) })
        #expect(a.payload(ofItem: "item-3") == Self.element(3, payloadBytes: 64, fill: 0x7A).payload)
        #expect(a.payload(ofItem: "item-4") == Self.element(4, payloadBytes: 200, fill: 0x7A).payload)
    }

    /// Churn against a dictionary: random inserts, deletes, moves and payload changes of random
    /// sizes; after each batch the invariants hold, the arena is bounded, and the content is
    /// what the dictionary says.
    @Test(arguments: [11, 12, 13] as [UInt64])
    func randomChurnKeepsContentAndBound(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        var s = RoomSnapshot()
        try s.appendSections(["s"])
        var order: [SnapshotIdentifier] = []
        var payloads: [SnapshotIdentifier: SnapshotPayload] = [:]
        var next = 0
        for round in 0..<1_500 {
            let roll = random.next() % 10
            if roll < 4 || order.count < 20 {
                let id = SnapshotIdentifier("i\(next)")
                next += 1
                let payload = SnapshotPayload([UInt8](repeating: UInt8(truncatingIfNeeded: next), count: Int(random.next() % 300)))
                try s.appendItems([SnapshotElement(id, payload: payload)], toSection: "s")
                order.append(id)
                payloads[id] = payload
            } else if roll < 6 {
                let k = Int(random.next() % UInt64(order.count))
                try s.deleteItems([order[k]])
                payloads[order.remove(at: k)] = nil
            } else if roll < 7 {
                let k = Int(random.next() % UInt64(order.count)), anchor = Int(random.next() % UInt64(order.count))
                guard k != anchor else { continue }
                let anchorID = order[anchor]
                try s.moveItem(order[k], afterItem: anchorID)
                let id = order.remove(at: k)
                order.insert(id, at: order.firstIndex(of: anchorID)! + 1)
            } else {
                let id = order[Int(random.next() % UInt64(order.count))]
                let payload = SnapshotPayload([UInt8](repeating: UInt8(truncatingIfNeeded: round), count: Int(random.next() % 300)))
                try s.reloadItems([SnapshotElement(id, payload: payload)])
                payloads[id] = payload
            }
            try s.checkInvariants()
            let live = order.reduce(0) { $0 + $1.count + payloads[$1]!.count }
            #expect(s.itemBytes.count <= 2 * live + s.itemNodes.count + 4096, "seed \(seed), round \(round)")
        }
        try Self.expectSameContent(s, as: order.map { SnapshotElement($0, payload: payloads[$0]!) })
    }
    /// An empty identifier with an empty payload still has a record (its two lengths): no two
    /// items' places overlap, whatever their sizes.
    @Test func anEmptyItemSharesNoBytesWithItsNeighbour() throws {
        var s = RoomSnapshot()
        try s.appendSections(["s"])
        try s.appendItems([SnapshotElement(SnapshotIdentifier(""))], toSection: "s")
        try s.insertItems([SnapshotElement(SnapshotIdentifier("a"))], beforeItem: SnapshotIdentifier(""))
        try s.checkInvariants()
        try s.appendItems([SnapshotElement(SnapshotIdentifier("b")), SnapshotElement(SnapshotIdentifier("c"), payload: "p")], toSection: "s")
        try s.reloadItems([SnapshotElement(SnapshotIdentifier(""), payload: .empty), SnapshotElement(SnapshotIdentifier("b"), payload: .empty)])
        try s.checkInvariants()
        try Self.expectSameContent(
            s,
            as: [
                SnapshotElement(SnapshotIdentifier("a")), SnapshotElement(SnapshotIdentifier("")), SnapshotElement(SnapshotIdentifier("b")),
                SnapshotElement(SnapshotIdentifier("c"), payload: "p"),
            ])
    }

    /// A node is 20 bytes (docs/benchmarks.md, Memory: an item's cost), and a record is the
    /// item's canonical encoding: lengths as varints, then the bytes.
    @Test func aNodeIs20BytesAndARecordIsTheCanonicalEncoding() throws {
        #expect(MemoryLayout<RoomSnapshot.ItemNode>.stride == 20)
        var s = RoomSnapshot()
        try s.appendSections(["s"])
        let long = SnapshotElement(SnapshotIdentifier(String(repeating: "i", count: 200)), payload: SnapshotPayload([UInt8](repeating: 7, count: 300)))
        try s.appendItems([SnapshotElement(SnapshotIdentifier("a"), payload: "xy"), long], toSection: "s")
        #expect(Array(s.itemBytes.prefix(5)) == [1, 0x61, 2, 0x78, 0x79])
        // 200 = 0xC8: varint C8 01; 300 = 0x12C: varint AC 02.
        #expect(Array(s.itemBytes[5..<7]) == [0xC8, 0x01])
        #expect(Array(s.itemBytes[207..<209]) == [0xAC, 0x02])
        #expect(s.itemBytes.count == 5 + 2 + 200 + 2 + 300)
        try s.checkInvariants()
    }

    /// A payload that shrank keeps at most 64 KiB of its place for growing back (the node's
    /// slack is 16 bits); the rest is garbage at once, and a payload that outgrows the place
    /// kept moves to the arena's end.
    @Test func aShrunkPayloadKeepsAtMost64KiBToGrowBackInto() throws {
        var s = RoomSnapshot()
        try s.appendSections(["s"])
        // Payloads over the default 64 KiB limit: the arena has none of its own.
        func reload(_ element: SnapshotElement) throws { try s.apply([.updateItems([element], .reload)], limits: .unlimited) }
        // Item 2 keeps the live bytes above the garbage, so that no compaction runs meanwhile.
        try s.apply([.appendItems([Self.element(1, payloadBytes: 200_000), Self.element(2, payloadBytes: 300_000)], toSection: "s")], limits: .unlimited)
        let arena = s.itemBytes.count
        try reload(Self.element(1, payloadBytes: 10, fill: 1))
        try s.checkInvariants()
        #expect(s.itemBytes.count == arena, "written in place")
        #expect(s.itemNodes[0].slack == UInt16.max)
        // 10 + 65,535 bytes of place: 60,000 (a 3-byte length) fits, in place.
        try reload(Self.element(1, payloadBytes: 60_000, fill: 2))
        try s.checkInvariants()
        #expect(s.itemBytes.count == arena, "grown back in place")
        #expect(Int(s.itemNodes[0].slack) == 1 + 10 + 65_535 - 3 - 60_000)
        try reload(Self.element(1, payloadBytes: 70_000, fill: 3))
        try s.checkInvariants()
        #expect(s.itemNodes[0].offset >= arena || s.itemBytes.count < arena, "moved to the end, or compacted")
        try Self.expectSameContent(s, as: [Self.element(1, payloadBytes: 70_000, fill: 3), Self.element(2, payloadBytes: 300_000)])
    }
}
