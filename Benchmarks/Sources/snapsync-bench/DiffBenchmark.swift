// `snapsync-bench diff`: cost of RoomSnapshot.difference(to:) on fixed, seeded cases, and the size
// of the batch it produces (operations, moves, elements named).

import SnapSyncTestSupport
import ArgumentParser
import SnapSyncModel

struct DiffBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff",
        abstract: "Time RoomSnapshot.difference(to:) on fixed, seeded cases.",
        discussion: """
            Cases: flat-10k and flat-100k (one section; 10% of items deleted, 10% inserted, 10% \
            moved, 10% payload-updated, at random positions); flat-100k-small (100k items, 13 \
            changes); sectioned-100x1000 (100 sections × 1000 items, 10% item churn, part of it \
            across sections, and 5 section changes); forest-10k (an outline of 10k items, at most 4 \
            levels, 10% churn: 2.5% each of leaves deleted, items inserted under random parents, \
            subtrees moved (half among their siblings, half to another parent) and payloads \
            updated). Each diff is applied once to check it reaches \
            the target before it is timed. median_ms is wall time to compute the batch; \
            cpu_median_ms the thread's CPU time for the same (steadier on a busy machine); \
            free_median_ms the time to free the batch afterwards, timed apart.

            With --parts, two costs that any differ returning this batch pays, measured in the \
            same process as parts of a floor: copy_median_ms builds a copy of the batch with \
            every identifier and payload allocated anew (the result's own allocations), and \
            lookup_median_ms looks up in the source snapshot's index, one after the other, every \
            identifier the batch inserts or moves (a new or moved item cannot be found by walking \
            the two snapshots side by side). Both are thread CPU medians.
            """)

    @Option(help: "Timed runs per case (the median is reported).")
    var runs: Int = 21

    @Option(help: "Seed for building the cases.")
    var seed: UInt64 = 0x5EED

    @Option(name: .customLong("case"), help: "Run only this case (repeatable).")
    var cases: [String] = []

    @Flag(help: "Also time the batch's allocations and its lookups apart (see above).")
    var parts = false

    func run() throws {
        let all: [(String, () -> (RoomSnapshot, RoomSnapshot))] = [
            ("flat-10k", { DiffCases.flat(items: 10_000, churnPercent: 10, seed: seed) }),
            ("flat-100k", { DiffCases.flat(items: 100_000, churnPercent: 10, seed: seed) }),
            ("flat-100k-small", { DiffCases.flat(items: 100_000, deletes: 3, inserts: 3, moves: 4, updates: 3, seed: seed) }),
            ("sectioned-100x1000", { DiffCases.sectioned(sections: 100, itemsPerSection: 1000, seed: seed) }),
            ("forest-10k", { DiffCases.forest(nodes: 10_000, levels: 4, churnPercent: 10, seed: seed) }),
        ]
        for name in cases where !all.contains(where: { $0.0 == name }) {
            throw ValidationError("unknown case \(name); cases: \(all.map(\.0).joined(separator: ", "))")
        }
        for (name, build) in all where cases.isEmpty || cases.contains(name) {
            let (a, b) = build()
            let ops = a.difference(to: b)
            var check = a
            try check.apply(ops, limits: .unlimited)
            guard check == b else { throw ValidationError("\(name): the diff does not reach the target") }
            let (times, cpu, free) = Bench.measureProducing(runs: runs) { a.difference(to: b) }
            let stats = BatchStats(ops)
            var partFields: [(String, JSONValue)] = []
            if parts {
                let copy = Bench.measureProducing(runs: runs) { ops.map(DiffCases.fresh) }
                let named = DiffCases.insertedAndMoved(ops)
                let lookups = Bench.measureBoth(runs: runs) { Bench.consume(named.reduce(0) { $0 + (a.contains(item: $1) ? 1 : 0) }) }
                partFields = [
                    ("copy_median_ms", .number(Bench.median(copy.cpu) / 1e6)),
                    ("lookups", .int(named.count)),
                    ("lookup_median_ms", .number(Bench.median(lookups.cpu) / 1e6)),
                ]
            }
            Bench.printJSON(
                [
                    ("case", .string(name)),
                    ("items", .int(a.numberOfItems)),
                    ("sections", .int(a.numberOfSections)),
                    ("median_ms", .number(Bench.median(times) / 1e6)),
                    ("min_ms", .number(times.min()! / 1e6)),
                    ("cpu_median_ms", .number(Bench.median(cpu) / 1e6)),
                    ("free_median_ms", .number(Bench.median(free) / 1e6)),
                    ("ops", .int(ops.count)),
                    ("moves", .int(stats.moves)),
                    ("elements", .int(stats.elements)),
                    ("runs", .int(runs)),
                ] + partFields)
        }
    }
}

/// What a batch amounts to: moves, and elements named (each id in a list counts once, each move
/// once, `deleteAllItems` once), which is what tools that count "changes" report.
struct BatchStats {
    var moves = 0
    var elements = 0

    init(_ ops: [SnapshotOperation]) {
        for op in ops {
            switch op {
            case .appendSections(let e), .insertSections(let e, _), .updateSections(let e),
                .appendItems(let e, _), .insertItems(let e, _), .updateItems(let e, _), .appendChildren(let e, _):
                elements += e.count
            case .deleteSections(let ids), .deleteItems(let ids):
                elements += ids.count
            case .moveSection, .moveItem, .moveItemToSection, .moveItemToParent:
                moves += 1
                elements += 1
            case .deleteAllItems:
                elements += 1
            }
        }
    }
}

/// The benchmark inputs. Items have 8-byte identifiers (big-endian integers) and 16-byte
/// payloads (the integer and a version), so updates change bytes, not lengths.
enum DiffCases {
    static func item(_ k: Int, version: UInt64 = 0) -> SnapshotElement {
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            bytes[i] = UInt8(truncatingIfNeeded: UInt64(k) >> (56 - 8 * UInt64(i)))
            bytes[8 + i] = UInt8(truncatingIfNeeded: version >> (56 - 8 * UInt64(i)))
        }
        return SnapshotElement(SnapshotIdentifier(uint64: UInt64(k)), payload: SnapshotPayload(bytes))
    }

    /// A copy with its own byte buffers, as a decoder would produce: the target of a REPLACE
    /// shares no storage with the room it replaces, so comparisons must read both sides.
    static func fresh(_ element: SnapshotElement) -> SnapshotElement {
        SnapshotElement(SnapshotIdentifier(Array(element.id.bytes[...])), payload: SnapshotPayload(Array(element.payload.bytes[...])))
    }

    /// A copy of an operation with its own byte buffers for every identifier and payload.
    static func fresh(_ op: SnapshotOperation) -> SnapshotOperation {
        func id(_ id: SnapshotIdentifier) -> SnapshotIdentifier { SnapshotIdentifier(Array(id.bytes[...])) }
        func at(_ placement: SnapshotOperation.Placement) -> SnapshotOperation.Placement {
            switch placement {
            case .before(let anchor): .before(id(anchor))
            case .after(let anchor): .after(id(anchor))
            }
        }
        switch op {
        case .appendSections(let e): return .appendSections(e.map(fresh))
        case .insertSections(let e, let p): return .insertSections(e.map(fresh), at(p))
        case .deleteSections(let ids): return .deleteSections(ids.map(id))
        case .moveSection(let s, let p): return .moveSection(id(s), at(p))
        case .updateSections(let e): return .updateSections(e.map(fresh))
        case .appendItems(let e, let s): return .appendItems(e.map(fresh), toSection: s.map(id))
        case .insertItems(let e, let p): return .insertItems(e.map(fresh), at(p))
        case .deleteItems(let ids): return .deleteItems(ids.map(id))
        case .deleteAllItems: return .deleteAllItems
        case .moveItem(let i, let p): return .moveItem(id(i), at(p))
        case .moveItemToSection(let i, let s): return .moveItemToSection(id(i), section: id(s))
        case .updateItems(let e, let kind): return .updateItems(e.map(fresh), kind)
        case .appendChildren(let e, let parent): return .appendChildren(e.map(fresh), toParent: id(parent))
        case .moveItemToParent(let i, let parent): return .moveItemToParent(id(i), parent: id(parent))
        }
    }

    /// The identifiers a batch inserts or moves, in its order.
    static func insertedAndMoved(_ ops: [SnapshotOperation]) -> [SnapshotIdentifier] {
        ops.flatMap { op -> [SnapshotIdentifier] in
            switch op {
            case .appendItems(let e, _), .insertItems(let e, _), .appendChildren(let e, _): e.map(\.id)
            case .moveItem(let i, _), .moveItemToSection(let i, _), .moveItemToParent(let i, _): [i]
            default: []
            }
        }
    }

    static func flat(items n: Int, churnPercent: Int, seed: UInt64) -> (RoomSnapshot, RoomSnapshot) {
        let k = n * churnPercent / 100
        return flat(items: n, deletes: k, inserts: k, moves: k, updates: k, seed: seed)
    }

    /// One section of `n` items; `b` deletes, moves and updates distinct random items of `a`
    /// and inserts new ones at random positions. Positions come from sort keys, so building `b`
    /// is O(n log n) rather than O(n) per random insert.
    static func flat(items n: Int, deletes: Int, inserts: Int, moves: Int, updates: Int, seed: UInt64) -> (RoomSnapshot, RoomSnapshot) {
        var rng = SplitMix64(seed: seed)
        let section = SnapshotElement(SnapshotIdentifier("flat"))
        let aItems = (0..<n).map { item($0) }
        // 0 keep, 1 delete, 2 move, 3 update: distinct items for each change.
        var fate = [UInt8](repeating: 0, count: n)
        var order = Array(0..<n)
        order.shuffle(using: &rng)
        for (offset, count, kind) in [(0, deletes, 1), (deletes, moves, 2), (deletes + moves, updates, 3)] as [(Int, Int, UInt8)] {
            for j in offset..<(offset + count) { fate[order[j]] = kind }
        }
        var keyed: [(key: Double, element: SnapshotElement)] = []
        keyed.reserveCapacity(n + inserts)
        for i in 0..<n {
            switch fate[i] {
            case 1: continue
            case 2: keyed.append((Double.random(in: 0..<Double(n), using: &rng), aItems[i]))
            case 3: keyed.append((Double(i), item(i, version: 1)))
            default: keyed.append((Double(i), aItems[i]))
            }
        }
        for j in 0..<inserts { keyed.append((Double.random(in: 0..<Double(n), using: &rng), item(n + j))) }
        keyed.sort { $0.key < $1.key }
        let a = try! RoomSnapshot([(section, aItems)], limits: .unlimited)
        let b = try! RoomSnapshot([(section, keyed.map { Self.fresh($0.element) })], limits: .unlimited)
        return (a, b)
    }

    /// `sections` × `itemsPerSection`; `b` churns 10% of the items (2.5% each deleted,
    /// inserted, moved (half of those to another section) and updated) and makes 5 section
    /// changes: two moved, one deleted (its items go with it, except those moved out), one
    /// inserted (with a few of the new items) and one payload update.
    static func sectioned(sections: Int, itemsPerSection: Int, seed: UInt64) -> (RoomSnapshot, RoomSnapshot) {
        var rng = SplitMix64(seed: seed)
        let n = sections * itemsPerSection
        let quarter = n / 40  // 2.5%
        func sectionID(_ s: Int) -> SnapshotIdentifier { SnapshotIdentifier("section-\(s)") }

        var aContents: [(section: SnapshotElement, items: [SnapshotElement])] = []
        for s in 0..<sections {
            aContents.append((SnapshotElement(sectionID(s)), (0..<itemsPerSection).map { item(s * itemsPerSection + $0) }))
        }

        // Section changes, on distinct sections.
        var sectionOrder = Array(0..<sections)
        sectionOrder.shuffle(using: &rng)
        let movedSections = Set(sectionOrder[0..<2]), deletedSection = sectionOrder[2], updatedSection = sectionOrder[3]
        var bSections: [(key: Double, id: SnapshotIdentifier, payload: SnapshotPayload, slot: Int)] = []
        for s in 0..<sections where s != deletedSection {
            let key = movedSections.contains(s) ? Double.random(in: 0..<Double(sections), using: &rng) : Double(s)
            bSections.append((key, sectionID(s), s == updatedSection ? SnapshotPayload("updated") : .empty, s))
        }
        bSections.append((Double.random(in: 0..<Double(sections), using: &rng), SnapshotIdentifier("section-new"), .empty, sections))
        bSections.sort { $0.key < $1.key }
        let survivors = bSections.map(\.slot)  // a section numbers, plus `sections` for the new one

        // Item changes.
        var fate = [UInt8](repeating: 0, count: n)  // 0 keep, 1 delete, 2 move within, 3 move across, 4 update
        var order = Array(0..<n)
        order.shuffle(using: &rng)
        let half = quarter / 2
        for (offset, count, kind) in [(0, quarter, 1), (quarter, half, 2), (quarter + half, quarter - half, 3), (2 * quarter, quarter, 4)]
            as [(Int, Int, UInt8)]
        {
            for j in offset..<(offset + count) { fate[order[j]] = kind }
        }
        var bItems = [[(key: Double, element: SnapshotElement)]](repeating: [], count: sections + 1)
        for s in 0..<sections {
            for i in 0..<itemsPerSection {
                let k = s * itemsPerSection + i
                let key = Double(i)
                switch fate[k] {
                case 1: continue
                case 2: bItems[s].append((Double.random(in: 0..<Double(itemsPerSection), using: &rng), aContents[s].items[i]))
                case 3:
                    let target = survivors.randomElement(using: &rng)!
                    bItems[target].append((Double.random(in: 0..<Double(itemsPerSection), using: &rng), aContents[s].items[i]))
                case 4: bItems[s].append((key, item(k, version: 1)))
                default: bItems[s].append((key, aContents[s].items[i]))
                }
            }
        }
        for j in 0..<quarter {
            // Ten of the new items go to the new section, the rest anywhere.
            let target = j < 10 ? sections : survivors.randomElement(using: &rng)!
            bItems[target].append((Double.random(in: 0..<Double(itemsPerSection), using: &rng), item(n + j)))
        }
        let bContents: [(section: SnapshotElement, items: [SnapshotElement])] = bSections.map { section in
            (SnapshotElement(section.id, payload: section.payload), bItems[section.slot].sorted { $0.key < $1.key }.map(\.element))
        }
        let decoded: [(section: SnapshotElement, items: [SnapshotElement])] = bContents.map { (Self.fresh($0.section), $0.items.map(Self.fresh)) }
        return (try! RoomSnapshot(aContents, limits: .unlimited), try! RoomSnapshot(decoded, limits: .unlimited))
    }

    /// One section holding an outline of `n` items, at most `levels` deep: item i hangs under a
    /// random earlier item (or is a root), its place among its siblings a random key. `b` deletes
    /// `churnPercent / 4` % of the items (leaves), inserts as many under random parents, moves as
    /// many subtrees (half to a new place among their siblings, half under another parent or to
    /// the roots, never into their own subtree nor deeper than `levels`) and updates as many
    /// payloads.
    static func forest(nodes n: Int, levels: Int, churnPercent: Int, seed: UInt64) -> (RoomSnapshot, RoomSnapshot) {
        var rng = SplitMix64(seed: seed)
        let k = n * churnPercent / 400
        let total = n + k
        var parent = [Int](repeating: -1, count: total)
        var key = (0..<total).map { _ in Double.random(in: 0..<1, using: &rng) }
        var children = [[Int]](repeating: [], count: total)
        var alive = [Bool](repeating: false, count: total)
        var version = [UInt64](repeating: 0, count: total)
        func level(_ x: Int) -> Int {
            var depth = 0, p = parent[x]
            while p >= 0 { depth += 1; p = parent[p] }
            return depth
        }
        func height(_ x: Int) -> Int { children[x].map { height($0) + 1 }.max() ?? 0 }
        func attach(_ x: Int, to p: Int) {
            parent[x] = p
            if p >= 0 { children[p].append(x) }
        }
        func detach(_ x: Int) {
            if parent[x] >= 0 { children[parent[x]].removeAll { $0 == x } }
            parent[x] = -1
        }
        for i in 0..<n {
            alive[i] = true
            let p = i > 0 && Int.random(in: 0..<100, using: &rng) < 85 ? Int.random(in: 0..<i, using: &rng) : -1
            attach(i, to: p >= 0 && level(p) < levels - 1 ? p : -1)
        }
        func build(fresh: Bool) -> RoomSnapshot {
            var elements: [SnapshotElement] = []
            var depths: [Int] = []
            var stack = (0..<total).filter { alive[$0] && parent[$0] < 0 }.sorted { key[$0] > key[$1] }.map { ($0, 0) }
            while let (x, depth) = stack.popLast() {
                let element = item(x, version: version[x])
                elements.append(fresh ? Self.fresh(element) : element)
                depths.append(depth)
                stack += children[x].sorted { key[$0] > key[$1] }.map { ($0, depth + 1) }
            }
            var s = try! RoomSnapshot([(SnapshotElement(SnapshotIdentifier("forest")), elements)], limits: .unlimited)
            try! s.setOutlineLevels(depths, maxOutlineDepth: levels)
            return s
        }
        let a = build(fresh: false)

        var order = Array(0..<n)
        order.shuffle(using: &rng)
        var changed = Set<Int>()
        // Deletes: leaves.
        var deleted = 0
        for x in order where deleted < k && children[x].isEmpty {
            detach(x)
            alive[x] = false
            changed.insert(x)
            deleted += 1
        }
        // Subtree moves: half among the siblings, half elsewhere.
        var moved = 0
        for x in order where moved < k && !changed.contains(x) {
            if moved % 2 == 0 {
                key[x] = Double.random(in: 0..<1, using: &rng)
            } else {
                let h = height(x)
                var target = -1
                for _ in 0..<20 {
                    let q = Int.random(in: 0..<n, using: &rng)
                    guard alive[q], level(q) + 1 + h < levels else { continue }
                    var up = q
                    while up >= 0, up != x { up = parent[up] }
                    if up != x { target = q; break }
                }
                detach(x)
                attach(x, to: target)
                key[x] = Double.random(in: 0..<1, using: &rng)
            }
            changed.insert(x)
            moved += 1
        }
        // Updates.
        var updated = 0
        for x in order where updated < k && !changed.contains(x) && alive[x] {
            version[x] = 1
            updated += 1
        }
        // Inserts under random parents with room below them.
        for j in 0..<k {
            let x = n + j
            alive[x] = true
            let q = Int.random(in: 0..<n, using: &rng)
            attach(x, to: alive[q] && level(q) < levels - 1 && Int.random(in: 0..<100, using: &rng) < 85 ? q : -1)
        }
        return (a, build(fresh: true))
    }
}
