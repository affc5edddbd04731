import SnapSyncModel
import SnapSyncStore
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncWire
import Testing

@testable import SnapSyncHub

// A seeded simulation of a room's resume base (ResumeBase.swift): random MUTATEs (growing and
// shrinking payloads, moves, deletes, the odd deleteAllItems), REPLACEs that change little or
// much, and reloads from the room's own checkpoint image, under small random history limits.
// After every write the room's invariants hold (the oldest state in reach, taken forward by the
// history's DIFFs, is the room), and every version in reach is rebuilt exactly as it was.

@Suite(.unitTests) struct ResumeBaseSimulationTests {
    @Test(arguments: [UInt64(81), 82, 83, 84])
    func everyVersionInReachIsRebuiltExactly(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        var limits = WireLimits()
        limits.historyCount = Int.random(in: 6...40, using: &rng)
        let historyBytes = Int.random(in: 4096...65536, using: &rng)
        var room = Room(name: "room", epoch: 9, version: 0, snapshot: RoomSnapshot(), limits: limits, maxHistoryBytes: historyBytes)
        var scratch: [UInt8] = []
        var states: [UInt64: RoomSnapshot] = [0: RoomSnapshot()]
        var next = 0
        var (rebuilt, anchored, reloads, replaces) = (0, 0, 0, 0)

        func payload() -> SnapshotPayload {
            SnapshotPayload(Array(repeating: UInt8.random(in: 97...122, using: &rng), count: Int.random(in: 0...300, using: &rng)))
        }
        func fresh() -> SnapshotElement {
            next += 1
            return SnapshotElement(SnapshotIdentifier("n\(next)"), payload: payload())
        }
        func randomOps(on snapshot: RoomSnapshot) -> [SnapshotOperation] {
            let items = snapshot.itemIdentifiers
            let sections = snapshot.sectionIdentifiers
            if sections.isEmpty || Int.random(in: 0..<100, using: &rng) < 3 {
                return sections.count < 3 ? [.appendSections([fresh()])] : [.deleteAllItems]
            }
            var ops: [SnapshotOperation] = []
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                switch Int.random(in: 0..<5, using: &rng) {
                case 0, 1:
                    ops.append(.appendItems((0..<Int.random(in: 1...5, using: &rng)).map { _ in fresh() }, toSection: sections.randomElement(using: &rng)))
                case 2 where !items.isEmpty: ops.append(.updateItems([SnapshotElement(items.randomElement(using: &rng)!, payload: payload())], .reload))
                case 3 where items.count > 1:
                    let (a, b) = (items.randomElement(using: &rng)!, items.randomElement(using: &rng)!)
                    if a != b { ops.append(.moveItem(a, .after(b))) }
                case 4 where !items.isEmpty: ops.append(.deleteItems([items.randomElement(using: &rng)!]))
                default: break
                }
            }
            return ops
        }
        func record(_ outcome: Room.WriteOutcome) throws {
            guard case .applied(let version, _) = outcome else { return }
            states[version] = room.snapshot
            try room.checkInvariants()
            if room.resumeBase?.anchor != nil { anchored += 1 }
            // The oldest version in reach (where an anchor stands), the newest, and two between.
            let reach = try #require(room.resumeBase).version
            let sample = [reach, room.version] + (0..<2).map { _ in UInt64.random(in: reach...room.version, using: &rng) }
            for version in sample {
                #expect(room.state(atVersion: version) == states[version], "seed \(seed): version \(version) of \(room.version)")
                rebuilt += 1
            }
        }

        for _ in 0..<300 {
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<65:
                try record(room.mutate(randomOps(on: room.snapshot), expectedVersion: nil, writeID: [], scratch: &scratch))
            case 65..<92:
                var target = room.snapshot
                for _ in 0..<(Bool.random(using: &rng) ? 1 : 12) { try? target.apply(randomOps(on: target), limits: .unlimited) }
                replaces += 1
                try record(room.replace(with: target, expectedVersion: nil, writeID: [], scratch: &scratch))
            default:
                // The room as its checkpoint keeps it, loaded again: the base from the image
                // (the anchor, or the room rolled back through the undos).
                let image = room.image(keepingBaseUpTo: Int.max)
                let first = image.version - UInt64(image.diffFrames.count)
                let history = image.diffFrames.enumerated().map { index, frame in
                    WriteRecord(room: "room", epoch: 9, version: first + 1 + UInt64(index), writeID: [], fingerprint: nil, diffFrame: frame)
                }
                room = Room(
                    name: "room", epoch: 9, version: image.version, snapshot: image.snapshot, limits: limits, maxHistoryBytes: historyBytes,
                    history: history, chain: image.chain, base: image.resolvedBase)
                reloads += 1
                try room.checkInvariants()
                if !history.isEmpty, image.resolvedBase != nil { #expect(room.canFold(from: first)) }
            }
        }
        #expect(rebuilt > 600 && reloads > 5 && replaces > 50, "rebuilt \(rebuilt), reloads \(reloads), replaces \(replaces)")
        #expect(anchored > 0, "seed \(seed): no anchor in 300 writes")
    }
}
