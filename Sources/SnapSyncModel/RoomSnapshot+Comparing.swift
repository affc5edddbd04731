// Comparing two versions of one section in place, for clients that turn a change into UIKit
// batch updates: the common case is a large section whose items stayed put while a few payloads
// changed, and walking it through `items(inSection:)` would copy every identifier and payload
// out of both arenas only to compare them.

extension RoomSnapshot {
    /// Compares section `section` of `self` with the same section of `newer`, item by item.
    ///
    /// - Returns: `nil` when the section is missing from either, or the two do not hold the same
    ///   item identifiers in the same order. Otherwise the items, in order, whose payloads
    ///   differ or whose identifiers are in `marked`, with their positions in the section.
    /// - Complexity: O(items in the section + bytes compared + `marked.count`); bytes are
    ///   compared in place, and only the returned identifiers are copied.
    public func payloadChanges(
        inSection section: SnapshotIdentifier, comparedTo newer: RoomSnapshot,
        marking marked: some Collection<SnapshotIdentifier> = [SnapshotIdentifier]()
    )
        -> [(position: Int, id: SnapshotIdentifier)]?
    {
        guard let a = sectionIndex[section], let b = newer.sectionIndex[section],
            sectionNodes[Int(a)].itemCount == newer.sectionNodes[Int(b)].itemCount
        else { return nil }
        let markedSlots = marked.isEmpty ? [] : Set(marked.compactMap { newer.itemSlot($0) })
        var changes: [(position: Int, id: SnapshotIdentifier)] = []
        let same = withItems { old in
            newer.withItems { new in
                var i = sectionNodes[Int(a)].firstItem, j = newer.sectionNodes[Int(b)].firstItem
                var position = 0
                while i != Self.none, j != Self.none {
                    guard Self.bytesEqual(old.idBytes(i), new.idBytes(j)) else { return false }
                    // Same identifier: the same payload exactly when the records are equal.
                    if !Self.bytesEqual(old.recordBytes(i), new.recordBytes(j)) || markedSlots.contains(j) {
                        changes.append((position, new.id(j)))
                    }
                    position += 1
                    i = old[Int(i)].next
                    j = new[Int(j)].next
                }
                return i == Self.none && j == Self.none
            }
        }
        return same ? changes : nil
    }
}
