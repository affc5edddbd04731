// Resolving a change to index paths: one walk over the old and the new snapshot.
//
// Sections present in both are paired by identifier; of those, a longest run that kept its order
// stays, the rest move. Within each surviving pair of sections the items are compared in order
// first: a section whose item identifiers did not change (the common case: a DIFF touches a few
// sections) costs only that comparison, and `SnapshotIdentifier`/`SnapshotPayload` compare their shared storage
// first, so an untouched item of a copy-on-write snapshot costs a pointer comparison. Only the
// items of sections that changed go through hash maps and a longest-increasing-subsequence pass.
//
// Reloads are placed last (`placeReloads`): UIKit puts a reload where deletes and inserts alone
// would, so one that a move shifts becomes a delete plus an insert (see `BatchUpdates`).
//
// Complexity: O(n) comparisons for n items, plus O(d log d) for the d items of sections whose
// item list changed (hashing and the longest increasing subsequence). Memory: O(sections + d).

extension BatchUpdates {
    /// Resolves the change that turned `old` into `new`.
    ///
    /// - Parameters:
    ///   - old: the rows before the change.
    ///   - new: the rows after it.
    ///   - operations: the batches that made the change, when known (a DIFF, a catch-up).
    ///     They say which items and sections were updated and whether an item update is a reload
    ///     or a reconfigure. Content changes they do not name (a resync has no operations) are
    ///     found by comparing payloads and reported as reloads.
    public init(from old: RoomSnapshot, to new: RoomSnapshot, operations: [SnapshotOperation] = []) {
        self.init()
        var itemKinds: [SnapshotIdentifier: SnapshotOperation.UpdateKind] = [:]
        var updatedSections: Set<SnapshotIdentifier> = []
        for operation in operations {
            switch operation {
            case .updateItems(let elements, let kind):
                // A reload replaces the cell, so it wins over a reconfigure of the same item.
                for element in elements where kind == .reload || itemKinds[element.id] == nil {
                    itemKinds[element.id] = kind
                }
            case .updateSections(let elements):
                for element in elements { updatedSections.insert(element.id) }
            default:
                break
            }
        }
        var resolver = Resolver(old: old, new: new, itemKinds: itemKinds, updatedSections: updatedSections)
        resolver.resolveSections(into: &self)
        resolver.resolveItems(into: &self)
        deletedSections.sort()
        insertedSections.sort()
        movedSections.sort { $0.to < $1.to }
        reloadedSections.sort()
        deletedItems.sort()
        insertedItems.sort()
        movedItems.sort { $0.to < $1.to }
        reloadedItems.sort()
        var reconfigured = Array(zip(reconfiguredItems, reconfiguredItemsAfterUpdate))
        reconfigured.sort { $0.0 < $1.0 }
        reconfiguredItems = reconfigured.map(\.0)
        reconfiguredItemsAfterUpdate = reconfigured.map(\.1)
        reloadedItemIdentifiers.sort()
        reconfiguredItemIdentifiers.sort()
        reloadedSectionIdentifiers.sort()
    }
}

private struct Resolver {
    let old: RoomSnapshot
    let new: RoomSnapshot
    let itemKinds: [SnapshotIdentifier: SnapshotOperation.UpdateKind]
    let updatedSections: Set<SnapshotIdentifier>

    let oldSections: [SnapshotElement]
    let newSections: [SnapshotElement]
    /// For each old section index, the new index of the same section when it survives with its
    /// identity and content (moved or not); `nil` when deleted or reloaded: its items go with it.
    var keptOld: [Int?]
    /// For each new section index, the old index of the same section when it survives (see
    /// `keptOld`); `nil` when inserted or reloaded.
    var keptNewFrom: [Int?]
    func keptNew(_ j: Int) -> Bool { keptNewFrom[j] != nil }
    /// Some section moves in this batch: UIKit would misplace any reload (see `placeReloads`).
    var sectionsMove = false
    /// Items that stay in place (in their order) and are reloaded: old and new index path.
    var reloads: [(from: ItemIndexPath, to: ItemIndexPath)] = []

    init(old: RoomSnapshot, new: RoomSnapshot, itemKinds: [SnapshotIdentifier: SnapshotOperation.UpdateKind], updatedSections: Set<SnapshotIdentifier>) {
        self.old = old
        self.new = new
        self.itemKinds = itemKinds
        self.updatedSections = updatedSections
        oldSections = Array(old.sections)
        newSections = Array(new.sections)
        keptOld = Array(repeating: nil, count: oldSections.count)
        keptNewFrom = Array(repeating: nil, count: newSections.count)
    }

    mutating func resolveSections(into updates: inout BatchUpdates) {
        var newIndex: [SnapshotIdentifier: Int] = [:]
        newIndex.reserveCapacity(newSections.count)
        for (j, section) in newSections.enumerated() { newIndex[section.id] = j }
        var common: [(old: Int, new: Int)] = []
        for (i, section) in oldSections.enumerated() {
            if let j = newIndex[section.id] { common.append((i, j)) } else { updates.deletedSections.append(i) }
        }
        for (j, section) in newSections.enumerated() where !old.contains(section: section.id) {
            updates.insertedSections.append(j)
        }
        let stays = longestIncreasingSubsequence(common.map(\.new))
        let changed = common.map { pair in
            updatedSections.contains(oldSections[pair.old].id) || oldSections[pair.old].payload != newSections[pair.new].payload
        }
        // A move whose old and new index are equal crashes UIKit when an item also leaves that
        // section (openradar 48941906): such a section is a delete plus an insert instead.
        func isMove(_ k: Int) -> Bool { !stays[k] && !changed[k] && common[k].old != common[k].new }
        sectionsMove = common.indices.contains(where: isMove)
        for (k, pair) in common.enumerated() {
            if changed[k] { updates.reloadedSectionIdentifiers.append(oldSections[pair.old].id) }
            if stays[k] && !changed[k] {
                keptOld[pair.old] = pair.new
                keptNewFrom[pair.new] = pair.old
            } else if isMove(k) {
                updates.movedSections.append(BatchUpdates.Move(from: pair.old, to: pair.new))
                keptOld[pair.old] = pair.new
                keptNewFrom[pair.new] = pair.old
            } else if stays[k] && !sectionsMove {
                // UIKit places a reloaded section by the batch's deletes and inserts, not its
                // moves; with no section moving that is where the section ends up.
                updates.reloadedSections.append(pair.old)
            } else {
                // Moved and changed, or reloaded while other sections move, or a move onto its
                // own index: UIKit refuses or misplaces these, a delete plus an insert it takes.
                updates.deletedSections.append(pair.old)
                updates.insertedSections.append(pair.new)
            }
        }
    }

    /// What an item of a changed section was in the old snapshot.
    struct OldItem {
        var path: ItemIndexPath
        var payload: SnapshotPayload
        /// Its section survives (see `keptOld`), so the item can be deleted or moved on its own.
        var inKeptSection: Bool
    }

    mutating func resolveItems(into updates: inout BatchUpdates) {
        // 1. Surviving pairs whose item identifiers are unchanged only report content updates.
        var cleanOld = Array(repeating: false, count: oldSections.count)
        var cleanNew = Array(repeating: false, count: newSections.count)
        for (i, kept) in keptOld.enumerated() {
            guard let j = kept else { continue }
            if compareClean(oldSection: i, newSection: j, into: &updates) {
                cleanOld[i] = true
                cleanNew[j] = true
            }
        }

        // 2. Every other section's items, keyed by identifier. Items of clean pairs cannot appear
        //    here: a clean pair holds the same identifiers on both sides.
        var oldItems: [SnapshotIdentifier: OldItem] = [:]
        for (i, section) in oldSections.enumerated() where !cleanOld[i] {
            for (k, item) in old.items(inSection: section.id).enumerated() {
                oldItems[item.id] = OldItem(
                    path: ItemIndexPath(item: k, section: i), payload: item.payload,
                    inKeptSection: keptOld[i] != nil)
            }
        }

        // 3. Walk the new side. Items staying in the same surviving section are collected per
        //    section for the order pass; everything else is decided here.
        for (j, section) in newSections.enumerated() where !cleanNew[j] {
            var stayers: [(old: Int, new: Int, id: SnapshotIdentifier, kind: SnapshotOperation.UpdateKind?)] = []
            for (k, item) in new.items(inSection: section.id).enumerated() {
                let to = ItemIndexPath(item: k, section: j)
                guard let before = oldItems[item.id] else {
                    if keptNew(j) { updates.insertedItems.append(to) }
                    continue
                }
                let kind = updateKind(of: item.id, old: before.payload, new: item.payload)
                if let kind { record(item.id, kind, into: &updates) }
                switch (before.inKeptSection, keptNew(j)) {
                case (true, true):
                    if keptOld[before.path.section] == j {
                        stayers.append((before.path.item, k, item.id, kind))
                    } else if kind != .reload {
                        // A reconfigure runs after the batch, at the new path: the cell moves and is kept.
                        updates.movedItems.append(BatchUpdates.Move(from: before.path, to: to))
                        if kind == .reconfigure { reconfigure(from: before.path, to: to, into: &updates) }
                    } else {
                        updates.deletedItems.append(before.path)
                        updates.insertedItems.append(to)
                    }
                case (true, false):
                    // Into an inserted or reloaded section, which brings its items itself.
                    updates.deletedItems.append(before.path)
                case (false, true):
                    // Out of a deleted or reloaded section, which took its items with it.
                    updates.insertedItems.append(to)
                case (false, false):
                    break
                }
            }
            guard let i = keptNewFrom[j] else { continue }
            let stays = longestIncreasingSubsequence(stayers.map(\.old))
            for (s, stayer) in stayers.enumerated() {
                let from = ItemIndexPath(item: stayer.old, section: i), to = ItemIndexPath(item: stayer.new, section: j)
                switch (stays[s], stayer.kind) {
                case (true, nil):
                    break
                case (true, .reload?):
                    reloads.append((from, to))
                case (true, .reconfigure?):
                    reconfigure(from: from, to: to, into: &updates)
                case (false, nil):
                    updates.movedItems.append(BatchUpdates.Move(from: from, to: to))
                case (false, .reconfigure?):
                    updates.movedItems.append(BatchUpdates.Move(from: from, to: to))
                    reconfigure(from: from, to: to, into: &updates)
                case (false, .reload?):
                    // UIKit refuses to move and reload one item in a batch.
                    updates.deletedItems.append(from)
                    updates.insertedItems.append(to)
                }
            }
        }

        // 4. Items gone from the snapshot, deleted one by one where their section survives.
        for (id, before) in oldItems where before.inKeptSection && !new.contains(item: id) {
            updates.deletedItems.append(before.path)
        }

        placeReloads(into: &updates)
    }

    /// UIKit performs a reload inside a batch as a delete plus an insert at the old index path
    /// shifted by the batch's deletes and inserts, ignoring its moves. So a reload stays a reload
    /// only when no section moves and no item moves into, out of or within its section: then that
    /// spot is where the item ends up. Any other reload is a delete plus an insert.
    /// - Complexity: O(moves + reloads).
    func placeReloads(into updates: inout BatchUpdates) {
        var touched = Set<Int>()
        for move in updates.movedItems {
            touched.insert(move.from.section)
            if let i = keptNewFrom[move.to.section] { touched.insert(i) }
        }
        for reload in reloads {
            if sectionsMove || touched.contains(reload.from.section) {
                updates.deletedItems.append(reload.from)
                updates.insertedItems.append(reload.to)
            } else {
                updates.reloadedItems.append(reload.from)
            }
        }
    }

    func reconfigure(from: ItemIndexPath, to: ItemIndexPath, into updates: inout BatchUpdates) {
        updates.reconfiguredItems.append(from)
        updates.reconfiguredItemsAfterUpdate.append(to)
    }

    /// Compares a surviving pair of sections item by item. When the identifiers match in order
    /// the pair is clean: its content updates are recorded and `true` is returned. Otherwise
    /// nothing is recorded.
    /// - Complexity: O(items in the sections), comparing bytes in place
    ///   (`RoomSnapshot.payloadChanges(inSection:comparedTo:marking:)`); identifiers are copied only
    ///   for the items reported.
    mutating func compareClean(oldSection i: Int, newSection j: Int, into updates: inout BatchUpdates) -> Bool {
        let id = oldSections[i].id
        // Items named by an update operation are reported whatever their payloads (a
        // reconfigure may keep the payload); any other item when its payload changed.
        guard let changes = old.payloadChanges(inSection: id, comparedTo: new, marking: itemKinds.keys) else { return false }
        for (k, itemID) in changes {
            let kind = itemKinds[itemID] ?? .reload
            record(itemID, kind, into: &updates)
            switch kind {
            case .reload:
                reloads.append((ItemIndexPath(item: k, section: i), ItemIndexPath(item: k, section: j)))
            case .reconfigure:
                reconfigure(from: ItemIndexPath(item: k, section: i), to: ItemIndexPath(item: k, section: j), into: &updates)
            }
        }
        return true
    }

    /// How an item present on both sides changed: the kind its update operations named, else a
    /// reload when the payload differs, else `nil`.
    func updateKind(of id: SnapshotIdentifier, old: SnapshotPayload, new: SnapshotPayload) -> SnapshotOperation.UpdateKind? {
        if !itemKinds.isEmpty, let kind = itemKinds[id] { return kind }
        return old == new ? nil : .reload
    }

    func record(_ id: SnapshotIdentifier, _ kind: SnapshotOperation.UpdateKind, into updates: inout BatchUpdates) {
        switch kind {
        case .reload: updates.reloadedItemIdentifiers.append(id)
        case .reconfigure: updates.reconfiguredItemIdentifiers.append(id)
        }
    }
}

/// Marks one longest strictly increasing subsequence of `values` (patience sorting).
/// - Complexity: O(m) when `values` is already increasing (nothing moved), else O(m log m).
func longestIncreasingSubsequence(_ values: [Int]) -> [Bool] {
    if zip(values, values.dropFirst()).allSatisfy({ $0 < $1 }) {
        return Array(repeating: true, count: values.count)
    }
    // tails[l]: index into `values` of the smallest tail of an increasing run of length l + 1.
    var tails: [Int] = []
    var previous = Array(repeating: -1, count: values.count)
    for (index, value) in values.enumerated() {
        var low = 0, high = tails.count
        while low < high {
            let mid = (low + high) / 2
            if values[tails[mid]] < value { low = mid + 1 } else { high = mid }
        }
        if low > 0 { previous[index] = tails[low - 1] }
        if low == tails.count { tails.append(index) } else { tails[low] = index }
    }
    var marks = Array(repeating: false, count: values.count)
    var index = tails.last ?? -1
    while index >= 0 {
        marks[index] = true
        index = previous[index]
    }
    return marks
}
