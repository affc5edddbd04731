// Shared helpers for the model tests: a seeded PRNG, a naive reference model, and builders.

import SnapSyncTestSupport
import Testing
@testable import SnapSyncModel

extension SnapshotElement {
    /// `"a" = "p"` in tests: an element with a payload.
    init(_ id: String, _ payload: String) { self.init(SnapshotIdentifier(id), payload: SnapshotPayload(payload)) }
}

/// Builds a snapshot from `[(section, [items])]` identifiers, with empty payloads.
func snapshot(_ sections: [(String, [String])]) -> RoomSnapshot {
    try! RoomSnapshot(sections.map { (SnapshotElement(SnapshotIdentifier($0.0)), $0.1.map { SnapshotElement(SnapshotIdentifier($0)) }) })
}

/// The snapshot as plain identifiers, for readable expectations.
func layout(_ s: RoomSnapshot) -> [[String]] {
    s.sectionIdentifiers.map { section in [section.string!] + s.itemIdentifiers(inSection: section)!.map { $0.string! } }
}

/// Applies a batch that must fail, and checks the error and that nothing changed.
func expectRejected(
    _ batch: [SnapshotOperation], on snapshot: RoomSnapshot, limits: SnapshotLimits = .default,
    index: Int, _ violation: BatchError.Violation, sourceLocation: SourceLocation = #_sourceLocation
) {
    var s = snapshot
    do {
        try s.apply(batch, limits: limits)
        Issue.record("batch was accepted, expected \(violation) at \(index)", sourceLocation: sourceLocation)
    } catch {
        #expect(error == BatchError(operationIndex: index, violation: violation), sourceLocation: sourceLocation)
    }
    #expect(s == snapshot, "a rejected batch changed the snapshot", sourceLocation: sourceLocation)
    #expect(throws: Never.self, sourceLocation: sourceLocation) { try s.checkInvariants() }
    #expect(s.canonicalByteCount == snapshot.canonicalByteCount, sourceLocation: sourceLocation)
}

/// Applies a batch that must succeed, then checks the invariants.
func applied(
    _ batch: [SnapshotOperation], to snapshot: RoomSnapshot, limits: SnapshotLimits = .default,
    sourceLocation: SourceLocation = #_sourceLocation
) -> RoomSnapshot {
    var s = snapshot
    #expect(throws: Never.self, sourceLocation: sourceLocation) { try s.apply(batch, limits: limits) }
    #expect(throws: Never.self, sourceLocation: sourceLocation) { try s.checkInvariants() }
    return s
}

/// A deliberately naive snapshot: arrays of arrays, linear searches, copied on every batch. It
/// shares no code with `RoomSnapshot`, so agreeing with it means something. Outlines are a level per
/// item, in depth-first order (PROTOCOL.md §4): a subtree is the item and the following items of
/// greater level.
struct ReferenceModel: Equatable {
    struct Section: Equatable {
        var id: SnapshotIdentifier
        var payload: SnapshotPayload
        var items: [SnapshotElement]
        var levels: [Int] = []

        init(id: SnapshotIdentifier, payload: SnapshotPayload, items: [SnapshotElement], levels: [Int]? = nil) {
            self.id = id
            self.payload = payload
            self.items = items
            self.levels = levels ?? items.map { _ in 0 }
        }

        /// End (exclusive) of the subtree starting at `i`.
        func subtreeEnd(_ i: Int) -> Int {
            var end = i + 1
            while end < items.count, levels[end] > levels[i] { end += 1 }
            return end
        }
    }
    var sections: [Section] = []

    init() {}
    init(_ snapshot: RoomSnapshot) {
        for section in snapshot.sections {
            let items = Array(snapshot.items(inSection: section.id))
            sections.append(Section(id: section.id, payload: section.payload, items: items, levels: items.map { snapshot.level(of: $0.id)! }))
        }
    }

    var itemCount: Int { sections.reduce(0) { $0 + $1.items.count } }

    func sectionIndex(_ id: SnapshotIdentifier) -> Int? { sections.firstIndex { $0.id == id } }
    func itemPath(_ id: SnapshotIdentifier) -> (Int, Int)? {
        for (s, section) in sections.enumerated() {
            if let i = section.items.firstIndex(where: { $0.id == id }) { return (s, i) }
        }
        return nil
    }

    /// Protocol/PROTOCOL.md §4, computed from scratch.
    var encodedSize: Int {
        func varint(_ n: Int) -> Int { var n = n, size = 1; while n >= 0x80 { n >>= 7; size += 1 }; return size }
        func bytes(_ n: Int) -> Int { varint(n) + n }
        var total = varint(sections.count)
        for section in sections {
            total += bytes(section.id.count) + bytes(section.payload.count) + varint(section.items.count)
            for item in section.items { total += bytes(item.id.count) + bytes(item.payload.count) }
        }
        let levels = sections.flatMap(\.levels)
        if levels.contains(where: { $0 > 0 }) { total += levels.reduce(0) { $0 + varint($1) } }
        return total
    }

    /// The same rules as `RoomSnapshot.apply`, in the same order of checks, written the obvious way.
    mutating func apply(_ batch: [SnapshotOperation], limits: SnapshotLimits) throws(BatchError) {
        var copy = self
        for (index, op) in batch.enumerated() {
            let before = copy.encodedSize
            do {
                try copy.applyOne(op, limits: limits)
            } catch {
                throw BatchError(operationIndex: index, violation: error)
            }
            let after = copy.encodedSize
            if after > before, after > limits.maxSnapshotBytes {
                throw BatchError(operationIndex: index, violation: .snapshotTooLarge(limit: limits.maxSnapshotBytes))
            }
        }
        self = copy
    }

    private func checkPayload(_ e: SnapshotElement, _ limits: SnapshotLimits) throws(BatchError.Violation) {
        if e.payload.count > limits.maxPayloadBytes { throw .payloadTooLarge(e.id, size: e.payload.count, limit: limits.maxPayloadBytes) }
    }
    private func checkNewSection(_ e: SnapshotElement, _ limits: SnapshotLimits) throws(BatchError.Violation) {
        if e.id.count > limits.maxIdentifierBytes { throw .identifierTooLong(e.id, limit: limits.maxIdentifierBytes) }
        try checkPayload(e, limits)
        if sectionIndex(e.id) != nil { throw .duplicateSection(e.id) }
        if sections.count >= limits.maxSections { throw .tooManySections(limit: limits.maxSections) }
    }
    private func checkNewItem(_ e: SnapshotElement, _ limits: SnapshotLimits) throws(BatchError.Violation) {
        if e.id.count > limits.maxIdentifierBytes { throw .identifierTooLong(e.id, limit: limits.maxIdentifierBytes) }
        try checkPayload(e, limits)
        if itemPath(e.id) != nil { throw .duplicateItem(e.id) }
        if itemCount >= limits.maxItems { throw .tooManyItems(limit: limits.maxItems) }
    }

    private mutating func applyOne(_ op: SnapshotOperation, limits: SnapshotLimits) throws(BatchError.Violation) {
        switch op {
        case .appendSections(let new):
            for e in new {
                try checkNewSection(e, limits)
                sections.append(Section(id: e.id, payload: e.payload, items: []))
            }
        case .insertSections(let new, let placement):
            guard let anchor = sectionIndex(placement.anchor) else { throw .anchorSectionNotFound(placement.anchor) }
            var at = anchor
            if case .after = placement { at += 1 }
            for e in new {
                try checkNewSection(e, limits)
                sections.insert(Section(id: e.id, payload: e.payload, items: []), at: at)
                at += 1
            }
        case .deleteSections(let ids):
            for id in ids {
                guard let s = sectionIndex(id) else { throw .sectionNotFound(id) }
                sections.remove(at: s)
            }
        case .moveSection(let id, let placement):
            guard let s = sectionIndex(id) else { throw .sectionNotFound(id) }
            guard placement.anchor != id else { throw .anchorIsSelf(id) }
            guard sectionIndex(placement.anchor) != nil else { throw .anchorSectionNotFound(placement.anchor) }
            let moving = sections.remove(at: s)
            var at = sectionIndex(placement.anchor)!
            if case .after = placement { at += 1 }
            sections.insert(moving, at: at)
        case .updateSections(let elements):
            for e in elements {
                guard let s = sectionIndex(e.id) else { throw .sectionNotFound(e.id) }
                try checkPayload(e, limits)
                sections[s].payload = e.payload
            }
        case .appendItems(let new, let sectionID):
            let s: Int
            if let sectionID {
                guard let found = sectionIndex(sectionID) else { throw .sectionNotFound(sectionID) }
                s = found
            } else {
                guard !sections.isEmpty else { throw .noSections }
                s = sections.count - 1
            }
            for e in new {
                try checkNewItem(e, limits)
                sections[s].items.append(e)
                sections[s].levels.append(0)
            }
        case .insertItems(let new, let placement):
            guard let (s, anchor) = itemPath(placement.anchor) else { throw .anchorItemNotFound(placement.anchor) }
            var at = anchor
            if case .after = placement { at = sections[s].subtreeEnd(anchor) }
            let level = sections[s].levels[anchor]
            for e in new {
                try checkNewItem(e, limits)
                sections[s].items.insert(e, at: at)
                sections[s].levels.insert(level, at: at)
                at += 1
            }
        case .deleteItems(let ids):
            for id in ids {
                guard let (s, i) = itemPath(id) else { throw .itemNotFound(id) }
                let end = sections[s].subtreeEnd(i)
                sections[s].items.removeSubrange(i..<end)
                sections[s].levels.removeSubrange(i..<end)
            }
        case .deleteAllItems:
            sections = []
        case .moveItem(let id, let placement):
            guard let (s, i) = itemPath(id) else { throw .itemNotFound(id) }
            guard placement.anchor != id else { throw .anchorIsSelf(id) }
            guard let (t, a) = itemPath(placement.anchor) else { throw .anchorItemNotFound(placement.anchor) }
            if s == t, a > i, a < sections[s].subtreeEnd(i) { throw .moveIntoOwnSubtree(id) }
            let level = sections[t].levels[a]
            let (moving, relative) = removeSubtree(s, i)
            if level + relative.max()! >= limits.maxOutlineDepth {
                throw .outlineTooDeep(id, limit: limits.maxOutlineDepth)  // `self` is a copy: discarded
            }
            let (t2, anchor) = itemPath(placement.anchor)!
            var at = anchor
            if case .after = placement { at = sections[t2].subtreeEnd(anchor) }
            sections[t2].items.insert(contentsOf: moving, at: at)
            sections[t2].levels.insert(contentsOf: relative.map { $0 + level }, at: at)
        case .moveItemToSection(let id, let sectionID):
            guard let (s, i) = itemPath(id) else { throw .itemNotFound(id) }
            guard let t = sectionIndex(sectionID) else { throw .sectionNotFound(sectionID) }
            let (moving, relative) = removeSubtree(s, i)
            sections[t].items.append(contentsOf: moving)
            sections[t].levels.append(contentsOf: relative)
        case .appendChildren(let new, let parentID):
            guard let (s, p) = itemPath(parentID) else { throw .parentNotFound(parentID) }
            let level = sections[s].levels[p] + 1
            for e in new {
                try checkNewItem(e, limits)
                if level >= limits.maxOutlineDepth { throw .outlineTooDeep(e.id, limit: limits.maxOutlineDepth) }
                let (_, parent) = itemPath(parentID)!
                let at = sections[s].subtreeEnd(parent)
                sections[s].items.insert(e, at: at)
                sections[s].levels.insert(level, at: at)
            }
        case .moveItemToParent(let id, let parentID):
            guard let (s, i) = itemPath(id) else { throw .itemNotFound(id) }
            guard let (t, p) = itemPath(parentID) else { throw .parentNotFound(parentID) }
            if s == t, p >= i, p < sections[s].subtreeEnd(i) { throw .moveIntoOwnSubtree(id) }
            let level = sections[t].levels[p] + 1
            let (moving, relative) = removeSubtree(s, i)
            if level + relative.max()! >= limits.maxOutlineDepth { throw .outlineTooDeep(id, limit: limits.maxOutlineDepth) }
            let (t2, parent) = itemPath(parentID)!
            let at = sections[t2].subtreeEnd(parent)
            sections[t2].items.insert(contentsOf: moving, at: at)
            sections[t2].levels.insert(contentsOf: relative.map { $0 + level }, at: at)
        case .updateItems(let elements, _):
            for e in elements {
                guard let (s, i) = itemPath(e.id) else { throw .itemNotFound(e.id) }
                try checkPayload(e, limits)
                sections[s].items[i].payload = e.payload
            }
        }
    }
}

extension ReferenceModel {
    /// Takes out the subtree at item `i` of section `s`: its elements, and levels relative to
    /// its root (so the root's is 0).
    mutating func removeSubtree(_ s: Int, _ i: Int) -> ([SnapshotElement], [Int]) {
        let end = sections[s].subtreeEnd(i)
        let moving = Array(sections[s].items[i..<end])
        let relative = sections[s].levels[i..<end].map { $0 - sections[s].levels[i] }
        sections[s].items.removeSubrange(i..<end)
        sections[s].levels.removeSubrange(i..<end)
        return (moving, relative)
    }
}

/// Compares a snapshot with the reference model, through the public queries only.
func matches(_ snapshot: RoomSnapshot, _ model: ReferenceModel) -> Bool {
    ReferenceModel(snapshot) == model
        && snapshot.numberOfSections == model.sections.count
        && snapshot.numberOfItems == model.itemCount
        && snapshot.canonicalByteCount == model.encodedSize
}
