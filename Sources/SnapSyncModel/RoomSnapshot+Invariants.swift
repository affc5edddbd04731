/// A broken internal invariant of `RoomSnapshot`: always a bug in SnapSync, never bad input.
public struct InvariantViolation: Error, CustomStringConvertible, Sendable {
    public var description: String

    /// A violation of an invariant of something built on snapshots (a room and its history).
    public init(description: String) {
        self.description = description
    }
}

extension RoomSnapshot {
    /// Proves the storage is consistent: identifiers are unique, both hash indexes agree with the
    /// linked lists, every link has its back link, per-section counts are right, free slots
    /// are neither linked nor indexed, the running encoded size matches the content, and every
    /// byte of the item arena is either one item's or counted as garbage. In an outline: every
    /// item's parent is an earlier item of the same section, one level up, and the nearest such
    /// (so the list is the forest's depth-first order and there is no cycle); roots are at level
    /// 0; the nested-item and level-byte counts match.
    /// Tests call it after every mutation.
    /// - Complexity: O(n log n) (the arena check sorts the items' places)
    public func checkInvariants() throws(InvariantViolation) {
        func fail(_ message: String) -> InvariantViolation { InvariantViolation(description: message) }
        var seenSections = Set<SnapshotIdentifier>()
        var seenItems = Set<SnapshotIdentifier>()
        var prevSection = Self.none
        var s = firstSection
        var sectionCount = 0
        var bodyBytes = 0
        var liveItemBytes = 0
        var places: [(start: Int, end: Int)] = []
        let outlined = !outline.isEmpty
        if outlined, outline.count != itemNodes.count { throw fail("outline holds \(outline.count) entries for \(itemNodes.count) item slots") }
        var nested = 0, levelExtra = 0
        /// path[l]: the current item's ancestor at level l (then the item itself).
        var path: [Slot] = []
        while s != Self.none {
            path.removeAll(keepingCapacity: true)
            let node = sectionNodes[Int(s)]
            bodyBytes += Self.encodedSize(id: node.id, payload: node.payload) + Self.varintSize(node.itemCount)
            guard seenSections.insert(node.id).inserted else { throw fail("section \(node.id) is linked twice") }
            guard sectionIndex[node.id] == s else { throw fail("section index of \(node.id) does not point at its slot") }
            guard node.prev == prevSection else { throw fail("section \(node.id) has a wrong back link") }
            var prevItem = Self.none
            var i = node.firstItem
            var count = 0
            while i != Self.none {
                let item = itemNodes[Int(i)]
                // Read with bounds checks: a node pointing outside the arena fails here, not
                // in the arena's unchecked reads.
                guard item.offset >= 0, let record = Self.checkedRecord(in: itemBytes, at: item.offset) else {
                    throw fail("item slot \(i) names a record at \(item.offset) that is not whole inside the arena of \(itemBytes.count) bytes")
                }
                let placeEnd = record.end + Int(item.slack)
                guard placeEnd <= itemBytes.count else {
                    throw fail("item slot \(i)'s place \(item.offset)..<\(placeEnd) ends outside the arena of \(itemBytes.count)")
                }
                let id = itemIdentifier(at: i)
                guard seenItems.insert(id).inserted else { throw fail("item \(id) is linked twice") }
                guard itemSlot(id) == i else { throw fail("item index of \(id) does not point at its slot") }
                guard item.prev == prevItem else { throw fail("item \(id) has a wrong back link") }
                guard item.section == s else { throw fail("item \(id) names the wrong section") }
                if outlined {
                    let place = outline[Int(i)]
                    let level = Int(place.level)
                    guard level >= 0, level <= path.count else {
                        throw fail("item \(id) is at level \(level) right after an item at level \(path.count - 1) in section \(node.id)")
                    }
                    path.removeSubrange(level...)
                    guard place.parent == (path.last ?? Self.none) else {
                        throw fail("item \(id) at level \(level) does not name the nearest earlier item one level up as its parent")
                    }
                    path.append(i)
                    if level > 0 { nested += 1 }
                    levelExtra += Self.varintSize(level) - 1
                }
                bodyBytes += Self.encodedSize(idCount: record.idCount, payloadCount: record.payloadCount)
                liveItemBytes += record.end - item.offset
                places.append((item.offset, placeEnd))
                prevItem = i
                i = item.next
                count += 1
            }
            guard node.lastItem == prevItem else { throw fail("section \(node.id) has a wrong last item") }
            guard node.itemCount == count else { throw fail("section \(node.id) counts \(node.itemCount) items but links \(count)") }
            prevSection = s
            s = node.next
            sectionCount += 1
        }
        guard lastSection == prevSection else { throw fail("wrong last section") }
        guard nestedItemCount == nested, levelExtraBytes == levelExtra else {
            throw fail("outline counts \(nestedItemCount) nested items and \(levelExtraBytes) extra level bytes, content has \(nested) and \(levelExtra)")
        }
        if outlined {
            guard freeItems.allSatisfy({ outline[Int($0)].level == 0 && outline[Int($0)].parent == Self.none }) else {
                throw fail("a free item slot keeps an outline place")
            }
        }
        guard sectionIndex.count == sectionCount else { throw fail("section index holds \(sectionIndex.count) entries, lists hold \(sectionCount)") }
        var indexed = 0
        var indexProblem: String?
        itemIndex.forEachEntry { tag, slot in
            indexed += 1
            guard slot >= 0, Int(slot) < itemNodes.count, itemNodes[Int(slot)].section != Self.none else {
                indexProblem = "item index points at slot \(slot), which holds no item"
                return
            }
            if tag != withItems({ SlotIndex.tag(of: $0.idBytes(slot)) }) { indexProblem = "item index has a stale hash for \(itemIdentifier(at: slot))" }
        }
        if let indexProblem { throw fail(indexProblem) }
        guard indexed == itemIndex.count else { throw fail("item index counts \(itemIndex.count) entries but holds \(indexed)") }
        guard itemIndex.count * 8 <= itemIndex.buckets.count * 7 || itemIndex.count == 0 else { throw fail("item index is over 7/8 full") }
        guard itemIndex.isInRobinHoodOrder() else { throw fail("item index is out of Robin Hood order") }
        guard itemIndex.count == seenItems.count else { throw fail("item index holds \(itemIndex.count) entries, lists hold \(seenItems.count)") }
        guard sectionNodes.count == sectionCount + freeSections.count else { throw fail("section slots leak") }
        guard itemNodes.count == seenItems.count + freeItems.count else { throw fail("item slots leak") }
        guard encodedBodyBytes == bodyBytes else { throw fail("running encoded size is \(encodedBodyBytes), content is \(bodyBytes) bytes") }
        guard freeItems.allSatisfy({ itemNodes[Int($0)].offset == -1 }) else { throw fail("a free item slot still names bytes") }
        guard liveItemBytes + itemGarbage == itemBytes.count else {
            throw fail("item arena holds \(itemBytes.count) bytes, but items name \(liveItemBytes) and \(itemGarbage) are counted as garbage")
        }
        places.sort { $0.start < $1.start }
        for k in places.indices.dropFirst() where places[k].start < places[k - 1].end {
            throw fail("two items share arena bytes at \(places[k].start)")
        }
        guard Set(freeItems).count == freeItems.count, Set(freeSections).count == freeSections.count else { throw fail("a slot is freed twice") }
    }

    /// The record at `start` read with every bound checked: its lengths and end, or nil when
    /// a length is malformed or the record does not end inside `bytes`.
    static func checkedRecord(in bytes: [UInt8], at start: Int) -> (idCount: Int, payloadCount: Int, end: Int)? {
        func varint(at index: Int) -> (value: Int, end: Int)? {
            var value = 0, shift = 0, k = index
            while k < bytes.count, shift < 35 {
                value |= Int(bytes[k] & 0x7F) << shift
                k += 1
                if bytes[k - 1] < 0x80 { return (value, k) }
                shift += 7
            }
            return nil
        }
        guard start < bytes.count, let id = varint(at: start), let payload = varint(at: id.end + id.value),
            payload.end + payload.value <= bytes.count
        else { return nil }
        return (id.value, payload.value, payload.end + payload.value)
    }
}
