// Random operations and snapshots for the property tests, all driven by a seeded SplitMix64.

import SnapSyncTestSupport
import SnapSyncModel

/// Draws operations that mostly name existing identifiers (so most succeed and the state gets
/// interesting) and sometimes unknown, duplicate, self-anchored or oversized ones (so every
/// rejection path runs too).
struct RandomOperations {
    var rng: SplitMix64
    var fresh = 0

    init(seed: UInt64) { rng = SplitMix64(seed: seed) }

    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &rng) < percent }

    mutating func payload() -> SnapshotPayload {
        switch Int.random(in: 0..<10, using: &rng) {
        case 0..<4: return .empty
        case 4..<8: return SnapshotPayload(String(repeating: "p", count: Int.random(in: 1...4, using: &rng)))
        default: return SnapshotPayload(String(repeating: "q", count: Int.random(in: 5...12, using: &rng)))
        }
    }

    /// A new identifier, now and then the empty one (an identifier like any other, PROTOCOL.md
    /// §2: once it exists, drawing it again is a duplicate) or one over the tight limits.
    mutating func freshID(_ prefix: String) -> SnapshotIdentifier {
        fresh += 1
        if chance(3) { return SnapshotIdentifier("") }
        return chance(3) ? SnapshotIdentifier("\(prefix)-much-too-long-\(fresh)") : SnapshotIdentifier("\(prefix)\(fresh)")
    }

    mutating func section(in model: ReferenceModel) -> SnapshotIdentifier {
        if !model.sections.isEmpty, chance(94) { return model.sections.randomElement(using: &rng)!.id }
        return chance(50) ? freshID("s") : SnapshotIdentifier("s-unknown")
    }

    mutating func item(in model: ReferenceModel) -> SnapshotIdentifier {
        let all = model.sections.flatMap { $0.items }
        if !all.isEmpty, chance(94) { return all.randomElement(using: &rng)!.id }
        return chance(50) ? freshID("i") : SnapshotIdentifier("i-unknown")
    }

    mutating func newSections(in model: ReferenceModel) -> [SnapshotElement] {
        (0..<Int.random(in: 0...3, using: &rng)).map { _ in
            SnapshotElement(chance(4) ? section(in: model) : freshID("s"), payload: payload())
        }
    }

    mutating func newItems(in model: ReferenceModel) -> [SnapshotElement] {
        (0..<Int.random(in: 0...4, using: &rng)).map { _ in
            SnapshotElement(chance(4) ? item(in: model) : freshID("i"), payload: payload())
        }
    }

    mutating func placement(_ anchor: SnapshotIdentifier) -> SnapshotOperation.Placement { chance(50) ? .before(anchor) : .after(anchor) }

    mutating func operation(in model: ReferenceModel) -> SnapshotOperation {
        switch Int.random(in: 0..<100, using: &rng) {
        case 0..<8: return .appendSections(newSections(in: model))
        case 8..<14: return .insertSections(newSections(in: model), placement(section(in: model)))
        case 14..<19: return .deleteSections((0..<Int.random(in: 1...2, using: &rng)).map { _ in section(in: model) })
        case 19..<26:
            let s = section(in: model)
            return .moveSection(s, placement(chance(5) ? s : section(in: model)))
        case 26..<30: return .updateSections((0..<Int.random(in: 1...2, using: &rng)).map { _ in SnapshotElement(section(in: model), payload: payload()) })
        case 30..<45: return .appendItems(newItems(in: model), toSection: chance(25) ? nil : section(in: model))
        case 45..<57: return .insertItems(newItems(in: model), placement(item(in: model)))
        case 57..<66: return .deleteItems((0..<Int.random(in: 1...3, using: &rng)).map { _ in item(in: model) })
        case 66..<68: return .deleteAllItems
        case 68..<82:
            let i = item(in: model)
            return .moveItem(i, placement(chance(5) ? i : item(in: model)))
        case 82..<90: return .moveItemToSection(item(in: model), section: section(in: model))
        default:
            return .updateItems(
                (0..<Int.random(in: 1...3, using: &rng)).map { _ in SnapshotElement(item(in: model), payload: payload()) },
                chance(50) ? .reload : .reconfigure)
        }
    }

    /// A batch of 1 to 4 operations, generated against the model as it would evolve, so later
    /// operations can name what earlier ones created.
    mutating func batch(for model: ReferenceModel, limits: SnapshotLimits) -> [SnapshotOperation] {
        var evolving = model
        var ops: [SnapshotOperation] = []
        for _ in 0..<Int.random(in: 1...5, using: &rng) {
            let op = operation(in: evolving)
            ops.append(op)
            try? evolving.apply([op], limits: limits)
        }
        return ops
    }

    /// A random snapshot over a small universe of identifiers, so that two draws share many
    /// sections and items in different places: every diff path gets exercised.
    mutating func snapshot(sections maxSections: Int, items maxItems: Int, universe: Int) -> RoomSnapshot {
        // SnapshotIdentifier 0 of each universe is the empty one.
        var sectionIDs = (0..<maxSections).map { SnapshotIdentifier($0 == 0 ? "" : "s\($0)") }.shuffled(using: &rng)
        sectionIDs = Array(sectionIDs.prefix(Int.random(in: 0...maxSections, using: &rng)))
        var itemIDs = (0..<universe).map { SnapshotIdentifier($0 == 0 ? "" : "i\($0)") }.shuffled(using: &rng)
        itemIDs = Array(itemIDs.prefix(sectionIDs.isEmpty ? 0 : Int.random(in: 0...maxItems, using: &rng)))
        var contents: [(section: SnapshotElement, items: [SnapshotElement])] = sectionIDs.map { (SnapshotElement($0, payload: smallPayload()), []) }
        for id in itemIDs {
            contents[Int.random(in: 0..<contents.count, using: &rng)].items.append(SnapshotElement(id, payload: smallPayload()))
        }
        return try! RoomSnapshot(contents)
    }

    /// Two values only, so that equal payloads are common and updates are a minority.
    mutating func smallPayload() -> SnapshotPayload { chance(70) ? .empty : "x" }
}
