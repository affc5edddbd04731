// `operations(replacingSection:with:limits:)`: the batch touches only that section (and the items
// leaving it), reaches exactly the new items with their hierarchy, keeps identities with the
// fewest moves, and every prefix applies under limits the room and the result both meet.

import SnapSyncTestSupport
import Testing
import SnapSyncTestThreads
import SnapSyncModel

@Suite(.unitTests) struct SectionReplacingTests {
    /// The room with `section`'s items replaced by `new`'s, built without the function under test.
    static func expected(_ room: RoomSnapshot, _ section: SnapshotIdentifier, _ new: SectionSnapshot) -> RoomSnapshot {
        var result = try! RoomSnapshot(room.sections.map { s in (s, s.id == section ? new.elements : Array(room.items(inSection: s.id))) }, limits: .unlimited)
        let levels = room.sectionIdentifiers.flatMap { s in s == section ? new.levels : room.itemIdentifiers(inSection: s)!.map { room.level(of: $0)! } }
        try! result.setOutlineLevels(levels, maxOutlineDepth: .max)
        return result
    }

    /// A random section snapshot drawing from the room's section, other items (which must be
    /// refused) and new ones.
    static func randomSection(_ random: inout RandomOperations, from room: RoomSnapshot, section: SnapshotIdentifier, allowForeign: Bool) -> SectionSnapshot {
        var pool = room.itemIdentifiers(inSection: section)!.shuffled(using: &random.rng)
        pool = Array(pool.prefix(Int.random(in: 0...pool.count, using: &random.rng)))
        if allowForeign, let foreign = room.itemIdentifiers.filter({ room.sectionIdentifier(containingItem: $0) != section }).randomElement(using: &random.rng)
        {
            pool.append(foreign)
        }
        for n in 0..<Int.random(in: 0...4, using: &random.rng) { pool.append(SnapshotIdentifier("new\(n)")) }
        pool.shuffle(using: &random.rng)
        var result = SectionSnapshot()
        for id in pool {
            let element = SnapshotElement(id, payload: random.chance(30) ? "x" : .empty)
            if let parent = result.items.randomElement(using: &random.rng), random.chance(60), result.level(of: parent)! < 3 {
                try! result.append([element], to: parent)
            } else {
                try! result.append([element])
            }
        }
        return result
    }

    @Test(arguments: [UInt64(101), 102, 103])
    func touchesOnlyTheSectionAndReachesTheNewItems(seed: UInt64) throws {
        var random = RandomOperations(seed: seed)
        var checked = 0, refused = 0
        for round in 0..<300 {
            let room = random.forest(sections: 4, items: 30, universe: 40)
            guard let section = room.sectionIdentifiers.randomElement(using: &random.rng) else { continue }
            let new = Self.randomSection(&random, from: room, section: section, allowForeign: random.chance(15))
            let foreign = new.items.first { room.contains(item: $0) && room.sectionIdentifier(containingItem: $0) != section }
            let ops: [SnapshotOperation]
            do {
                ops = try room.operations(replacingSection: section, with: new, limits: .unlimited)
            } catch {
                #expect(error == BatchError(operationIndex: 0, violation: .duplicateItem(foreign ?? "?")), "seed \(seed), round \(round)")
                refused += 1
                continue
            }
            #expect(foreign == nil, "seed \(seed), round \(round): \(foreign.map { "\($0)" } ?? "") was accepted")
            checked += 1
            let target = Self.expected(room, section, new)
            var result = room
            try result.apply(ops, limits: .unlimited)
            try result.checkInvariants()
            #expect(result == target, "seed \(seed), round \(round): \(ops)")
            // Only this section: every identifier an op names is the section, one of its items
            // before, or one of the new items.
            let allowed = Set(room.itemIdentifiers(inSection: section)! + new.items + [section])
            for op in ops { #expect(named(op).isSubset(of: allowed), "seed \(seed), round \(round): \(op)") }
            // The same batch as the whole-room diff, which has the same laws.
            #expect(itemMoves(ops) == minimalForestMoves(room, target).items, "seed \(seed), round \(round)")
            #expect(sectionMoves(ops) == 0)
        }
        #expect(checked > 200)
        #expect(refused > 10)
    }

    @Test(arguments: [UInt64(111), 112])
    func everyPrefixStaysWithinTheLimits(seed: UInt64) {
        var random = RandomOperations(seed: seed)
        for round in 0..<300 {
            let room = random.forest(sections: 3, items: 30, universe: 40, maxPayload: 5)
            guard let section = room.sectionIdentifiers.randomElement(using: &random.rng) else { continue }
            let new = Self.randomSection(&random, from: room, section: section, allowForeign: false)
            let target = Self.expected(room, section, new)
            var limits = DiffLimitPropertyTests.tightLimits(room, target, &random.rng)
            limits.maxOutlineDepth = max(deepestLevel(room), deepestLevel(target)) + 1 + Int.random(in: 0...1, using: &random.rng)
            guard let ops = try? room.operations(replacingSection: section, with: new, limits: limits) else {
                Issue.record("seed \(seed), round \(round): refused under limits both ends meet")
                continue
            }
            let end = DiffLimitPropertyTests.applyPrefixes(ops, to: room, limits: limits, context: "seed \(seed), round \(round)")
            #expect(end == target, "seed \(seed), round \(round)")
            // Near the depth limit too, every item that stays in the section keeps its identity:
            // never deleted (nor taken along by a delete: it would have to be inserted again),
            // never inserted.
            let staying = Set(room.itemIdentifiers(inSection: section)!).intersection(new.items)
            let touched = ops.reduce(into: Set<SnapshotIdentifier>()) { touched, op in
                switch op {
                case .deleteItems(let ids): touched.formUnion(ids)
                case .appendItems(let e, _), .insertItems(let e, _), .appendChildren(let e, _): touched.formUnion(e.map(\.id))
                default: break
                }
            }
            #expect(touched.isDisjoint(with: staying), "seed \(seed), round \(round): \(ops)")
        }
    }

    @Test func refusals() throws {
        let room = outline([("s1", [("a", 0), ("b", 1)]), ("s2", [("c", 0)])])
        func refused(
            _ section: SnapshotIdentifier, _ new: SectionSnapshot, limits: SnapshotLimits = .default, _ violation: BatchError.Violation,
            sourceLocation: SourceLocation = #_sourceLocation
        ) {
            #expect(throws: BatchError(operationIndex: 0, violation: violation), sourceLocation: sourceLocation) {
                try room.operations(replacingSection: section, with: new, limits: limits)
            }
        }
        refused("nope", SectionSnapshot(), .sectionNotFound("nope"))
        refused("s1", try SectionSnapshot(["a", "c"]), .duplicateItem("c"))
        refused("s1", try SectionSnapshot(["a", "b", "x", "y"]), limits: SnapshotLimits(maxItems: 4), .tooManyItems(limit: 4))
        refused(
            "s1", try SectionSnapshot(["a", "b", "x", "y"]), limits: SnapshotLimits(maxSnapshotBytes: room.canonicalByteCount),
            .snapshotTooLarge(limit: room.canonicalByteCount))
        var deep = try SectionSnapshot(["a"])
        try deep.append(["b"], to: "a")
        try deep.append(["d"], to: "b")
        refused("s1", deep, limits: SnapshotLimits(maxOutlineDepth: 2), .outlineTooDeep("d", limit: 2))
        // Equal content: no operations.
        #expect(try room.operations(replacingSection: "s1", with: room.sectionSnapshot(of: "s1")!, limits: .default).isEmpty)
        // Emptying a section deletes its roots, which take their children.
        #expect(try room.operations(replacingSection: "s1", with: SectionSnapshot(), limits: .default) == [.deleteItems(["a"])])
    }
}

/// Every identifier an operation names.
func named(_ op: SnapshotOperation) -> Set<SnapshotIdentifier> {
    switch op {
    case .appendSections(let e), .updateSections(let e), .updateItems(let e, _): Set(e.map(\.id))
    case .insertSections(let e, let p), .insertItems(let e, let p): Set(e.map(\.id) + [p.anchor])
    case .deleteSections(let ids), .deleteItems(let ids): Set(ids)
    case .moveSection(let id, let p), .moveItem(let id, let p): [id, p.anchor]
    case .appendItems(let e, let s): Set(e.map(\.id) + (s.map { [$0] } ?? []))
    case .deleteAllItems: []
    case .moveItemToSection(let id, let s): [id, s]
    case .appendChildren(let e, let parent): Set(e.map(\.id) + [parent])
    case .moveItemToParent(let id, let parent): [id, parent]
    }
}
