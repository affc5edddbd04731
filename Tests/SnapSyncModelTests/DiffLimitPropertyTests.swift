// Property: every prefix of `a.difference(to: b, limits:)` applies under limits that `a`
// and `b` both meet, and every state it passes through is within them: a replica applying the
// DIFF op by op under the room's limits (PROTOCOL.md §5) never refuses it. Random snapshots are
// drawn, then the limits are set at (or one or two above) the larger of the two ends, so that
// every limit is tight.

import SnapSyncTestSupport
import Testing
import SnapSyncTestThreads
import SnapSyncModel

@Suite(.unitTests) struct DiffLimitPropertyTests {
    /// Sections and items from small universes (identifier 0 is the empty one), payloads of
    /// 0 to `maxPayload` bytes, so that payload updates grow and shrink.
    static func randomSnapshot(_ rng: inout SplitMix64, sections: Int, items: Int, universe: Int, maxPayload: Int) -> RoomSnapshot {
        func payload(_ rng: inout SplitMix64) -> SnapshotPayload {
            SnapshotPayload([UInt8](repeating: 0x70, count: Int.random(in: 0...maxPayload, using: &rng)))
        }
        let sectionIDs = (0..<sections).map { SnapshotIdentifier($0 == 0 ? "" : "s\($0)") }.shuffled(using: &rng)
            .prefix(Int.random(in: 0...sections, using: &rng))
        let itemIDs = (0..<universe).map { SnapshotIdentifier($0 == 0 ? "" : "i\($0)") }.shuffled(using: &rng)
            .prefix(sectionIDs.isEmpty ? 0 : Int.random(in: 0...items, using: &rng))
        var contents: [(section: SnapshotElement, items: [SnapshotElement])] = sectionIDs.map { (SnapshotElement($0, payload: payload(&rng)), []) }
        for id in itemIDs {
            contents[Int.random(in: 0..<contents.count, using: &rng)].items.append(SnapshotElement(id, payload: payload(&rng)))
        }
        return try! RoomSnapshot(contents, limits: .unlimited)
    }

    /// SnapshotLimits that `a` and `b` both meet, each at the larger end plus 0, 1 or 2.
    static func tightLimits(_ a: RoomSnapshot, _ b: RoomSnapshot, _ rng: inout SplitMix64) -> SnapshotLimits {
        func slack(_ rng: inout SplitMix64) -> Int { Int.random(in: 0...2, using: &rng) }
        let longestID = (a.sectionIdentifiers + a.itemIdentifiers + b.sectionIdentifiers + b.itemIdentifiers).map(\.count).max() ?? 0
        let largestPayload =
            [a, b].flatMap { s in s.sections.map(\.payload.count) + s.sectionIdentifiers.flatMap { Array(s.items(inSection: $0)).map(\.payload.count) } }.max()
            ?? 0
        return SnapshotLimits(
            maxIdentifierBytes: longestID, maxPayloadBytes: largestPayload,
            maxItems: max(a.numberOfItems, b.numberOfItems) + slack(&rng),
            maxSections: max(a.numberOfSections, b.numberOfSections) + slack(&rng),
            maxSnapshotBytes: max(a.canonicalByteCount, b.canonicalByteCount) + slack(&rng))
    }

    /// Applies `ops` one by one under `limits`, checking each prefix; returns the end state.
    static func applyPrefixes(_ ops: [SnapshotOperation], to a: RoomSnapshot, limits: SnapshotLimits, context: String) -> RoomSnapshot {
        var s = a
        for (k, op) in ops.enumerated() {
            do {
                try s.apply(op, limits: limits)
            } catch {
                Issue.record("\(context): op \(k) of \(ops.count) refused under \(limits): \(error)\n\(ops)")
                return s
            }
            #expect(s.numberOfSections <= limits.maxSections, "\(context): op \(k)")
            #expect(s.numberOfItems <= limits.maxItems, "\(context): op \(k)")
            #expect(s.canonicalByteCount <= limits.maxSnapshotBytes, "\(context): op \(k)")
        }
        return s
    }

    /// Small rooms: no section near 128 items, so the varint bound is zero and the limited batch
    /// is the plain minimal one.
    @Test(arguments: [UInt64(41), 42, 43, 44])
    func everyPrefixStaysWithinTheLimits(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        for round in 0..<500 {
            let a = Self.randomSnapshot(&rng, sections: 7, items: 30, universe: 40, maxPayload: 6)
            let b = Self.randomSnapshot(&rng, sections: 7, items: 30, universe: 40, maxPayload: 6)
            let limits = Self.tightLimits(a, b, &rng)
            let ops = a.difference(to: b, limits: limits)
            #expect(ops == a.difference(to: b), "seed \(seed), round \(round)")
            let end = Self.applyPrefixes(ops, to: a, limits: limits, context: "seed \(seed), round \(round)")
            #expect(end == b, "seed \(seed), round \(round)")
        }
    }

    /// Sections around 128 items, so that item-count varints change width mid-way and the
    /// rebuild fallback is taken now and then.
    @Test(arguments: [UInt64(51), 52])
    func everyPrefixStaysWithinTheLimitsAcrossVarintWidths(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        var rebuilds = 0
        for round in 0..<60 {
            let a = Self.randomSnapshot(&rng, sections: 3, items: 300, universe: 320, maxPayload: 2)
            var b = a
            // Move a few items between sections, so that counts cross 128 both ways.
            let ids = b.itemIdentifiers, sectionIDs = b.sectionIdentifiers
            if sectionIDs.count > 1 {
                for _ in 0..<Int.random(in: 1...6, using: &rng) {
                    let id = ids.randomElement(using: &rng)!
                    try b.apply(.moveItemToSection(id, section: sectionIDs.randomElement(using: &rng)!), limits: .unlimited)
                }
            }
            let limits = Self.tightLimits(a, b, &rng)
            let ops = a.difference(to: b, limits: limits)
            if ops.first == .deleteAllItems { rebuilds += 1 }
            let end = Self.applyPrefixes(ops, to: a, limits: limits, context: "seed \(seed), round \(round)")
            #expect(end == b, "seed \(seed), round \(round)")
        }
        #expect(rebuilds < 30, "the fallback is for rare cases, taken \(rebuilds) times in 60")
    }
}
