// `snapsync-bench catchup`: what it costs a replica to catch up with a room it has been away
// from, three ways: today's DIFF replay (every missed version's DIFF), a full SNAPSHOT, and one
// DIFF from the room at the replica's version to the room now (the minimal batch of
// `RoomSnapshot.difference(to:)`, the same one REPLACE computes), the folded catch-up a resume could
// get. In process, on the model and the codec: bytes as framed on the wire, and times to compute
// and to apply. How the daemon gets the room at the old version, and the whole resume through
// it, is `resume` (ResumeBenchmark.swift).

import ArgumentParser
import SnapSyncModel
import SnapSyncTestSupport
import SnapSyncWire

struct CatchUpBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catchup",
        abstract: "Bytes and time to catch a replica up: DIFF replay, SNAPSHOT, or one folded DIFF.",
        discussion: """
            A room of --sections × --items-per-section items (8-byte identifiers, 16-byte \
            payloads) receives M single-op writes for each M of --missed, seeded: 40% payload \
            updates, 20% moves (after a random item, any section), 20% inserts (after a random \
            item), 20% deletes, each on a random live item. For each M: replay_bytes is the \
            version 2 DIFF frames of the M versions (version 3 adds 32 bytes of chain to each), \
            snapshot_bytes the SNAPSHOT frame of the room after them, folded_bytes one DIFF \
            frame of `old.difference(to: new)`; touched is the share of the room's items that \
            the folded batch names. Times are the median of --runs: replay_apply_ms applies the \
            M DIFFs' ops in order to the old room, folded_compute_ms computes the folded batch, \
            folded_apply_ms applies it.
            """)

    @OptionGroup var load: CatchUpLoadOptions

    @Option(help: "Timed runs per measurement (the median is reported).")
    var runs: Int = 5

    func run() throws {
        let base = try CatchUpLoad.room(sections: load.sections, itemsPerSection: load.itemsPerSection)
        let encoder = FrameEncoder()
        for count in load.missed {
            var writer = CatchUpLoad(room: base, seed: load.seed ^ UInt64(count))
            var room = base
            var writes: [[SnapshotOperation]] = []
            var replayBytes = 0
            writes.reserveCapacity(count)
            for version in 1...count {
                let ops = writer.nextWrite(version: version)
                try room.apply(ops, limits: .unlimited)
                writes.append(ops)
                replayBytes += encoder.encode(.diff(room: "catchup", epoch: 1, version: UInt64(version), ops: ops)).count
            }
            let snapshotBytes =
                encoder.encode(
                    .snapshot(
                        requestID: 1, room: "catchup", epoch: 1, version: UInt64(count), reason: .resync, digest: room.digest,
                        snapshot: room)
                ).count
            let folded = base.difference(to: room)
            var check = base
            try check.apply(folded, limits: .unlimited)
            guard check == room else { throw ValidationError("the folded batch of \(count) versions does not reach the room") }
            let foldedBytes = encoder.encode(.diff(room: "catchup", epoch: 1, version: UInt64(count), ops: folded)).count
            let replay = Bench.measureBoth(runs: runs) {
                var replica = base
                for ops in writes { try! replica.apply(ops, limits: .unlimited) }
                Bench.consume(replica)
            }
            let compute = Bench.measureProducing(runs: runs) { base.difference(to: room) }
            let apply = Bench.measureBoth(runs: runs) {
                var replica = base
                try! replica.apply(folded, limits: .unlimited)
                Bench.consume(replica)
            }
            Bench.printJSON([
                "missed_versions": .int(count),
                "items_before": .int(base.numberOfItems),
                "items_after": .int(room.numberOfItems),
                "touched": .decimal(Double(BatchStats(folded).elements) / Double(max(base.numberOfItems, room.numberOfItems)), digits: 3),
                "replay_bytes": .int(replayBytes),
                "replay_bytes_v3": .int(replayBytes + 32 * count),
                "snapshot_bytes": .int(snapshotBytes),
                "folded_bytes": .int(foldedBytes),
                "folded_over_snapshot": .decimal(Double(foldedBytes) / Double(snapshotBytes), digits: 3),
                "replay_over_snapshot": .decimal(Double(replayBytes + 32 * count) / Double(snapshotBytes), digits: 3),
                "replay_apply_ms": .decimal(Bench.median(replay.cpu) / 1e6, digits: 2),
                "folded_compute_ms": .decimal(Bench.median(compute.cpu) / 1e6, digits: 2),
                "folded_apply_ms": .decimal(Bench.median(apply.cpu) / 1e6, digits: 2),
                "runs": .int(runs),
            ])
        }
    }
}

/// The room and the writes of `catchup` and `resume`.
struct CatchUpLoadOptions: ParsableArguments {
    @Option(help: "Sections in the room.")
    var sections: Int = 100

    @Option(help: "Items per section.")
    var itemsPerSection: Int = 1000

    @Option(parsing: .upToNextOption, help: "Missed versions, one case each.")
    var missed: [Int] = [1000, 10_000, 100_000]

    @Option(help: "Seed of the writes.")
    var seed: UInt64 = 0xCA7C
}

/// The catch-up benchmarks' room and writes, shared by `catchup` (in process) and `resume` (the
/// daemon): a room of sections × items (8-byte identifiers, 16-byte payloads), then single-op
/// writes, seeded: 40% payload updates, 20% moves (after a random item, any section), 20%
/// inserts (after a random item), 20% deletes, each on a random live item.
struct CatchUpLoad {
    private var rng: SplitMix64
    private var live: [Int]
    private var fresh: Int

    /// The room before the writes.
    static func room(sections: Int, itemsPerSection: Int) throws -> RoomSnapshot {
        var room = RoomSnapshot()
        for (section, items) in layout(sections: sections, itemsPerSection: itemsPerSection) {
            try room.apply([.appendSections([SnapshotElement(section)]), .appendItems(items, toSection: section)], limits: .unlimited)
        }
        return room
    }

    /// The room's sections and their items, in order.
    static func layout(sections: Int, itemsPerSection: Int) -> [(SnapshotIdentifier, [SnapshotElement])] {
        (0..<sections).map { s in
            (SnapshotIdentifier(uint64: UInt64(1 << 62) + UInt64(s)), (0..<itemsPerSection).map { DiffCases.item(s * itemsPerSection + $0) })
        }
    }

    init(room: RoomSnapshot, seed: UInt64) {
        rng = SplitMix64(seed: seed)
        live = Array(0..<room.numberOfItems)
        fresh = room.numberOfItems
    }

    /// The write that makes `version`.
    mutating func nextWrite(version: Int) -> [SnapshotOperation] {
        let pick = Int.random(in: 0..<live.count, using: &rng)
        let key = live[pick]
        let id = SnapshotIdentifier(uint64: UInt64(key))
        let update: [SnapshotOperation] = [.updateItems([DiffCases.item(key, version: UInt64(version))], .reload)]
        switch Int.random(in: 0..<10, using: &rng) {
        case 0..<4:
            return update
        case 4..<6:
            let other = live[Int.random(in: 0..<live.count, using: &rng)]
            return other == key ? update : [.moveItem(id, .after(SnapshotIdentifier(uint64: UInt64(other))))]
        case 6..<8:
            defer {
                live.append(fresh)
                fresh += 1
            }
            return [.insertItems([DiffCases.item(fresh)], .after(id))]
        default:
            live.swapAt(pick, live.count - 1)
            live.removeLast()
            return [.deleteItems([id])]
        }
    }
}
