// `snapsync-bench apply`: per-operation cost of RoomSnapshot.apply on a room of 1,000,000 items, and
// of the whole-snapshot walks the daemon does (digest, canonical encoding).

import SnapSyncTestSupport
import ArgumentParser
import SnapSyncModel

struct ApplyBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apply",
        abstract: "Per-operation cost of RoomSnapshot.apply on a 1,000,000-item snapshot.",
        discussion: """
            The snapshot has 1000 sections × 1000 items (8-byte identifiers, 16-byte payloads). \
            Each case applies single-operation batches (`apply([op])`, as a MUTATE of one \
            operation does, undo log included) at random positions, timed in blocks of --block \
            operations; the median block gives the per-operation figure. lookup is \
            payload(ofItem:) by identifier. digest and encode walk the whole snapshot.
            """)

    @Option(help: "Sections × items per section = items.")
    var sections: Int = 1000

    @Option(name: .customLong("items-per-section"), help: "Items per section.")
    var itemsPerSection: Int = 1000

    @Option(help: "Operations per timed block.")
    var block: Int = 1000

    @Option(help: "Timed blocks per case.")
    var blocks: Int = 25

    @Option(help: "Seed for the random positions.")
    var seed: UInt64 = 0x5EED

    func run() throws {
        var rng = SplitMix64(seed: seed)
        var contents: [(section: SnapshotElement, items: [SnapshotElement])] = []
        contents.reserveCapacity(sections)
        for s in 0..<sections {
            contents.append((SnapshotElement(SnapshotIdentifier("section-\(s)")), (0..<itemsPerSection).map { DiffCases.item(s * itemsPerSection + $0) }))
        }
        var snapshot = try RoomSnapshot(contents, limits: .unlimited)
        contents = []
        let n = snapshot.numberOfItems
        // Identifiers of live items, for picking random targets; kept in step with deletes.
        var live = (0..<n).map { SnapshotIdentifier(uint64: UInt64($0)) }
        var nextNew = n

        func report(_ name: String, _ blockTimes: [Double]) {
            let perOp = blockTimes.map { $0 / Double(block) / 1e3 }
            Bench.printJSON([
                "case": .string(name),
                "items": .int(n),
                "median_us": .number(Bench.median(perOp), digits: 4),
                "min_us": .number(perOp.min()!, digits: 4),
                "ops": .int(block * blocks),
            ])
        }

        // Each block draws its random operands before the clock starts.
        func timedBlocks(_ prepare: (inout SplitMix64) -> [SnapshotOperation]) throws -> [Double] {
            var times: [Double] = []
            for round in 0...blocks {
                let ops = prepare(&rng)
                var failure: BatchError?
                let t = Bench.time {
                    for op in ops {
                        do throws(BatchError) { try snapshot.apply([op], limits: .unlimited) } catch { failure = error; return }
                    }
                }
                if let failure { throw ValidationError("apply failed: \(failure)") }
                if round > 0 { times.append(t) }
            }
            return times
        }

        let insert = try timedBlocks { rng in
            (0..<block).map { _ in
                defer { nextNew += 1 }
                return .insertItems([DiffCases.item(nextNew)], .after(live.randomElement(using: &rng)!))
            }
        }
        report("insert", insert)

        let move = try timedBlocks { rng in
            (0..<block).map { _ in
                let id = live.randomElement(using: &rng)!
                var anchor = live.randomElement(using: &rng)!
                while anchor == id { anchor = live.randomElement(using: &rng)! }
                return .moveItem(id, rng.next() & 1 == 0 ? .before(anchor) : .after(anchor))
            }
        }
        report("move", move)

        let delete = try timedBlocks { rng in
            (0..<block).map { _ in
                let index = Int.random(in: 0..<live.count, using: &rng)
                live.swapAt(index, live.count - 1)
                return .deleteItems([live.removeLast()])
            }
        }
        report("delete", delete)

        var lookups: [Double] = []
        for round in 0...blocks {
            let ids = (0..<block).map { _ in live.randomElement(using: &rng)! }
            var found = 0
            let t = Bench.time {
                for id in ids where snapshot.payload(ofItem: id) != nil { found += 1 }
            }
            guard found == block else { throw ValidationError("lookup missed \(block - found) items") }
            if round > 0 { lookups.append(t) }
        }
        report("lookup", lookups)

        try snapshot.checkInvariants()

        // Whole-snapshot walks: milliseconds per call.
        let wholeRuns = 7
        let digestTimes = Bench.measure(runs: wholeRuns) { Bench.consume(snapshot.digest) }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(snapshot.canonicalByteCount)
        let encodeTimes = Bench.measure(runs: wholeRuns) {
            buffer.removeAll(keepingCapacity: true)
            snapshot.encodeCanonical(into: &buffer)
        }
        for (name, times) in [("digest", digestTimes), ("encode-canonical", encodeTimes)] {
            Bench.printJSON([
                "case": .string(name),
                "items": .int(snapshot.numberOfItems),
                "bytes": .int(snapshot.canonicalByteCount),
                "median_ms": .number(Bench.median(times) / 1e6),
                "min_ms": .number(times.min()! / 1e6),
                "runs": .int(wholeRuns),
            ])
        }
    }
}
