// Applying operations: atomically, in order, with every UIKit crash condition answered by a
// typed error.
//
// Atomicity without copying: each primitive change appends its inverse to an undo log; if an
// operation fails, the log is replayed backwards. A failed batch therefore costs O(work done so
// far), never an O(n) copy of the snapshot, and a successful one costs only its own work.
//
// Undo entries name neighbours by identifier, not slot, because slots can be reused. Replaying in
// reverse order guarantees each named neighbour exists again when its entry is undone. In an
// outline, an entry also names the item's parent, which (recorded in that order) is back before
// its children: a removed subtree is recorded from its last item to its root, each after its list
// predecessor, so it comes back root first; a moved subtree keeps its inner shape, so restoring
// its root's place and shifting the levels below restores it.

extension RoomSnapshot {
    /// Applies a batch atomically: every operation in order, or none.
    ///
    /// - Throws: `BatchError` naming the first failing operation; the snapshot is then unchanged.
    /// - Complexity: O(total elements named by the batch) (expected, hashing), plus O(items in
    ///   the section) for each deleted section; `deleteAllItems` is O(1) here and O(n) to free
    ///   later. The size limit is checked in O(1) per operation. A failed batch costs O(work done
    ///   before the failure) to roll back. No copy of the snapshot is made unless its storage is
    ///   shared with another copy (copy-on-write: the first mutation of a shared copy is O(n)).
    public mutating func apply(_ batch: [SnapshotOperation], limits: SnapshotLimits = .default) throws(BatchError) {
        var undo: [Undo] = []
        try apply(batch, limits: limits, undo: &undo)
    }

    /// `apply(_:limits:)`, leaving in `undo` (empty on entry) the inverse of every primitive
    /// change when the batch succeeds: `rollBack(undo)` then gives back the snapshot as it was.
    mutating func apply(_ batch: [SnapshotOperation], limits: SnapshotLimits, undo: inout [Undo]) throws(BatchError) {
        for index in batch.indices {
            do throws(BatchError.Violation) {
                let before = encodedBodyBytes, beforeLevels = levelsPartBytes
                try applyOne(batch[index], limits: limits, undo: &undo)
                // Checked per operation (O(1), from the running count), so the error names the
                // operation that crossed the limit. Only growth is refused: a batch that shrinks
                // a snapshot already over a lowered limit must still go through.
                if encodedBodyBytes > before || levelsPartBytes > beforeLevels, canonicalByteCount > limits.maxSnapshotBytes {
                    throw .snapshotTooLarge(limit: limits.maxSnapshotBytes)
                }
            } catch {
                rollBack(undo)
                dropOutlineIfFlat()
                throw BatchError(operationIndex: index, violation: error)
            }
        }
        dropOutlineIfFlat()
    }

    /// Applies one operation atomically. See `apply(_:limits:)`.
    /// - Complexity: that of the operation (see `apply(_:limits:)`).
    public mutating func apply(_ operation: SnapshotOperation, limits: SnapshotLimits = .default) throws(BatchError) {
        try apply([operation], limits: limits)
    }
}

// MARK: - UIKit-named mutators

/// `RoomSnapshot` gets UIKit's mutator names (`appendItems(_:toSection:)`, `moveItem(_:beforeItem:)`,
/// ...) from `SnapshotMutating`; each call is a batch of one operation, checked against
/// `SnapshotLimits.default` unless the call names other limits.
extension RoomSnapshot: SnapshotMutating {
    public var defaultLimits: SnapshotLimits { .default }
}

// MARK: - One operation

extension RoomSnapshot {
    @usableFromInline enum Undo: Sendable {
        case removeSection(SnapshotIdentifier)
        case restoreSection(SnapshotElement, after: SnapshotIdentifier?)
        case moveSectionBack(SnapshotIdentifier, after: SnapshotIdentifier?)
        case restoreSectionPayload(SnapshotIdentifier, SnapshotPayload)
        case removeItem(SnapshotIdentifier)
        case restoreItem(SnapshotElement, section: SnapshotIdentifier, after: SnapshotIdentifier?, parent: SnapshotIdentifier?)
        /// Puts the item back with its subtree, under `parent` (`nil`: a root).
        case moveItemBack(SnapshotIdentifier, section: SnapshotIdentifier, after: SnapshotIdentifier?, parent: SnapshotIdentifier?)
        case restoreItemPayload(SnapshotIdentifier, SnapshotPayload)
        /// `deleteAllItems` moves the old storage here instead of walking it: O(1).
        case restoreAll(RoomSnapshot)
    }

    mutating func applyOne(_ op: SnapshotOperation, limits: SnapshotLimits, undo: inout [Undo]) throws(BatchError.Violation) {
        switch op {
        case .appendSections(let sections):
            for section in sections {
                try checkNewSection(section, limits: limits)
                let slot = allocateSection(section)
                linkSection(slot, after: lastSection)
                undo.append(.removeSection(section.id))
            }

        case .insertSections(let sections, let placement):
            guard let anchor = sectionIndex[placement.anchor] else { throw .anchorSectionNotFound(placement.anchor) }
            var after: Slot
            switch placement {
            case .before: after = sectionNodes[Int(anchor)].prev
            case .after: after = anchor
            }
            for section in sections {
                try checkNewSection(section, limits: limits)
                let slot = allocateSection(section)
                linkSection(slot, after: after)
                undo.append(.removeSection(section.id))
                after = slot
            }

        case .deleteSections(let ids):
            for id in ids {
                guard let slot = sectionIndex[id] else { throw .sectionNotFound(id) }
                if outline.isEmpty {
                    // Items first, head to tail, each recorded as "at the head": undone in reverse
                    // order they come back tail first, each at the head, which rebuilds the order.
                    var item = sectionNodes[Int(slot)].firstItem
                    while item != Self.none {
                        let next = itemNodes[Int(item)].next
                        undo.append(
                            .restoreItem(SnapshotElement(itemIdentifier(at: item), payload: itemPayload(at: item)), section: id, after: nil, parent: nil))
                        unlinkItem(item)
                        freeItem(item)
                        item = next
                    }
                } else {
                    // Tail to head, each after its predecessor: undone head first, parents
                    // before their children.
                    var item = sectionNodes[Int(slot)].lastItem
                    while item != Self.none {
                        let prev = itemNodes[Int(item)].prev
                        recordRemoval(item, section: id, undo: &undo)
                        unlinkItem(item)
                        freeItem(item)
                        item = prev
                    }
                }
                let node = sectionNodes[Int(slot)]
                undo.append(.restoreSection(SnapshotElement(id, payload: node.payload), after: sectionID(node.prev)))
                unlinkSection(slot)
                freeSection(slot)
            }

        case .moveSection(let id, let placement):
            guard let slot = sectionIndex[id] else { throw .sectionNotFound(id) }
            guard placement.anchor != id else { throw .anchorIsSelf(id) }
            guard let anchor = sectionIndex[placement.anchor] else { throw .anchorSectionNotFound(placement.anchor) }
            undo.append(.moveSectionBack(id, after: sectionID(sectionNodes[Int(slot)].prev)))
            unlinkSection(slot)
            switch placement {
            case .before: linkSection(slot, after: sectionNodes[Int(anchor)].prev)
            case .after: linkSection(slot, after: anchor)
            }

        case .updateSections(let sections):
            for section in sections {
                guard let slot = sectionIndex[section.id] else { throw .sectionNotFound(section.id) }
                try checkPayload(section, limits: limits)
                undo.append(.restoreSectionPayload(section.id, sectionNodes[Int(slot)].payload))
                setSectionPayload(slot, section.payload)
            }

        case .appendItems(let items, let sectionID):
            let section: Slot
            if let sectionID {
                guard let slot = sectionIndex[sectionID] else { throw .sectionNotFound(sectionID) }
                section = slot
            } else {
                guard lastSection != Self.none else { throw .noSections }
                section = lastSection
            }
            for item in items {
                try checkNewItem(item, limits: limits)
                let slot = allocateItem(item)
                linkItem(slot, section: section, after: sectionNodes[Int(section)].lastItem)
                undo.append(.removeItem(item.id))
            }

        case .insertItems(let items, let placement):
            guard let anchor = itemSlot(placement.anchor) else { throw .anchorItemNotFound(placement.anchor) }
            let section = itemNodes[Int(anchor)].section
            var after: Slot
            switch placement {
            case .before: after = itemNodes[Int(anchor)].prev
            case .after: after = subtreeEnd(anchor)
            }
            // Siblings of the anchor: its parent and level (a root's in a flat section).
            let parent = parentSlot(anchor), level = levelOfSlot(anchor)
            for item in items {
                try checkNewItem(item, limits: limits)
                let slot = allocateItem(item)
                linkItem(slot, section: section, after: after)
                setPlace(slot, parent: parent, level: level)
                undo.append(.removeItem(item.id))
                after = slot
            }

        case .appendChildren(let items, let parentID):
            guard let parent = itemSlot(parentID) else { throw .parentNotFound(parentID) }
            let level = levelOfSlot(parent) + 1
            let section = itemNodes[Int(parent)].section
            var after = subtreeEnd(parent)
            for item in items {
                try checkNewItem(item, limits: limits)
                // After the element's own checks (PROTOCOL.md §6): all elements share the level.
                if level >= limits.maxOutlineDepth { throw .outlineTooDeep(item.id, limit: limits.maxOutlineDepth) }
                let slot = allocateItem(item)
                linkItem(slot, section: section, after: after)
                setPlace(slot, parent: parent, level: level)
                undo.append(.removeItem(item.id))
                after = slot
            }

        case .deleteItems(let ids):
            guard !outline.isEmpty else {
                for id in ids {
                    guard let slot = itemSlot(id) else { throw .itemNotFound(id) }
                    let node = itemNodes[Int(slot)]
                    undo.append(
                        .restoreItem(
                            SnapshotElement(id, payload: itemPayload(at: slot)),
                            section: sectionNodes[Int(node.section)].id, after: itemID(node.prev), parent: nil))
                    unlinkItem(slot)
                    freeItem(slot)
                }
                return
            }
            // Each id goes with its subtree, one id after the other (PROTOCOL.md §5): an id that
            // is no longer there, because it was named twice or went with an earlier id's
            // subtree, is `itemNotFound`, as an unknown one.
            for id in ids {
                guard let slot = itemSlot(id) else { throw .itemNotFound(id) }
                let sectionID = sectionNodes[Int(itemNodes[Int(slot)].section)].id
                var item = subtreeEnd(slot)
                while true {
                    let prev = itemNodes[Int(item)].prev
                    recordRemoval(item, section: sectionID, undo: &undo)
                    unlinkItem(item)
                    freeItem(item)
                    if item == slot { break }
                    item = prev
                }
            }

        case .deleteAllItems:
            let old = self
            self = RoomSnapshot()
            undo.append(.restoreAll(old))

        case .moveItem(let id, let placement):
            guard let slot = itemSlot(id) else { throw .itemNotFound(id) }
            guard placement.anchor != id else { throw .anchorIsSelf(id) }
            guard let anchor = itemSlot(placement.anchor) else { throw .anchorItemNotFound(placement.anchor) }
            guard !outline.isEmpty else {
                recordItemPosition(id, slot, undo: &undo)
                unlinkItem(slot)
                let section = itemNodes[Int(anchor)].section
                switch placement {
                case .before: linkItem(slot, section: section, after: itemNodes[Int(anchor)].prev)
                case .after: linkItem(slot, section: section, after: anchor)
                }
                return
            }
            if isInSubtree(anchor, of: slot) { throw .moveIntoOwnSubtree(id) }
            let level = levelOfSlot(anchor)
            if level + subtreeHeight(slot) >= limits.maxOutlineDepth { throw .outlineTooDeep(id, limit: limits.maxOutlineDepth) }
            recordItemPosition(id, slot, undo: &undo)
            let subtree = detachSubtree(slot)
            // After the detach: the anchor's subtree may have held the moved one.
            let after: Slot
            switch placement {
            case .before: after = itemNodes[Int(anchor)].prev
            case .after: after = subtreeEnd(anchor)
            }
            attachSubtree(subtree, section: itemNodes[Int(anchor)].section, after: after, parent: parentSlot(anchor), level: level)

        case .moveItemToSection(let id, let sectionID):
            guard let slot = itemSlot(id) else { throw .itemNotFound(id) }
            guard let section = sectionIndex[sectionID] else { throw .sectionNotFound(sectionID) }
            recordItemPosition(id, slot, undo: &undo)
            guard !outline.isEmpty else {
                unlinkItem(slot)
                linkItem(slot, section: section, after: sectionNodes[Int(section)].lastItem)
                return
            }
            let subtree = detachSubtree(slot)
            attachSubtree(subtree, section: section, after: sectionNodes[Int(section)].lastItem, parent: Self.none, level: 0)

        case .moveItemToParent(let id, let parentID):
            guard let slot = itemSlot(id) else { throw .itemNotFound(id) }
            guard let parent = itemSlot(parentID) else { throw .parentNotFound(parentID) }
            if isInSubtree(parent, of: slot) { throw .moveIntoOwnSubtree(id) }
            let level = levelOfSlot(parent) + 1
            if level + subtreeHeight(slot) >= limits.maxOutlineDepth { throw .outlineTooDeep(id, limit: limits.maxOutlineDepth) }
            recordItemPosition(id, slot, undo: &undo)
            let subtree = detachSubtree(slot)
            attachSubtree(subtree, section: itemNodes[Int(parent)].section, after: subtreeEnd(parent), parent: parent, level: level)

        case .updateItems(let items, _):
            for item in items {
                guard let slot = itemSlot(item.id) else { throw .itemNotFound(item.id) }
                try checkPayload(item, limits: limits)
                undo.append(.restoreItemPayload(item.id, itemPayload(at: slot)))
                setItemPayload(slot, item.payload)
            }
        }
    }

    /// `id` is the operation's own identifier value: copying it out of the arena would cost an
    /// allocation per move.
    private func recordItemPosition(_ id: SnapshotIdentifier, _ slot: Slot, undo: inout [Undo]) {
        let node = itemNodes[Int(slot)]
        undo.append(.moveItemBack(id, section: sectionNodes[Int(node.section)].id, after: itemID(node.prev), parent: itemID(parentSlot(slot))))
    }

    /// The entry that brings a removed item back after its current list predecessor, under its
    /// current parent. Removing a subtree from its last item up keeps both present when recorded.
    private func recordRemoval(_ slot: Slot, section: SnapshotIdentifier, undo: inout [Undo]) {
        undo.append(
            .restoreItem(
                SnapshotElement(itemIdentifier(at: slot), payload: itemPayload(at: slot)), section: section,
                after: itemID(itemNodes[Int(slot)].prev), parent: itemID(parentSlot(slot))))
    }

    private func checkNewSection(_ section: SnapshotElement, limits: SnapshotLimits) throws(BatchError.Violation) {
        if section.id.count > limits.maxIdentifierBytes { throw .identifierTooLong(section.id, limit: limits.maxIdentifierBytes) }
        try checkPayload(section, limits: limits)
        if sectionIndex[section.id] != nil { throw .duplicateSection(section.id) }
        if sectionIndex.count >= limits.maxSections { throw .tooManySections(limit: limits.maxSections) }
    }

    private func checkNewItem(_ item: SnapshotElement, limits: SnapshotLimits) throws(BatchError.Violation) {
        if item.id.count > limits.maxIdentifierBytes { throw .identifierTooLong(item.id, limit: limits.maxIdentifierBytes) }
        try checkPayload(item, limits: limits)
        if itemSlot(item.id) != nil { throw .duplicateItem(item.id) }
        if itemIndex.count >= limits.maxItems { throw .tooManyItems(limit: limits.maxItems) }
    }

    private func checkPayload(_ element: SnapshotElement, limits: SnapshotLimits) throws(BatchError.Violation) {
        if element.payload.count > limits.maxPayloadBytes {
            throw .payloadTooLarge(element.id, size: element.payload.count, limit: limits.maxPayloadBytes)
        }
    }

    private func sectionID(_ slot: Slot) -> SnapshotIdentifier? { slot == Self.none ? nil : sectionNodes[Int(slot)].id }
    private func itemID(_ slot: Slot) -> SnapshotIdentifier? { slot == Self.none ? nil : itemIdentifier(at: slot) }
}

// MARK: - Roll back

extension RoomSnapshot {
    /// Replays the undo log backwards. Every entry was recorded against the state it restores,
    /// so lookups here cannot fail; a failure would be a bug in `applyOne`, hence the force unwraps.
    mutating func rollBack(_ undo: [Undo]) {
        for entry in undo.reversed() {
            switch entry {
            case .removeSection(let id):
                let slot = sectionIndex[id]!
                unlinkSection(slot)
                freeSection(slot)
            case .restoreSection(let section, let after):
                let slot = allocateSection(section)
                linkSection(slot, after: after.map { sectionIndex[$0]! } ?? Self.none)
            case .moveSectionBack(let id, let after):
                let slot = sectionIndex[id]!
                unlinkSection(slot)
                linkSection(slot, after: after.map { sectionIndex[$0]! } ?? Self.none)
            case .restoreSectionPayload(let id, let payload):
                setSectionPayload(sectionIndex[id]!, payload)
            case .removeItem(let id):
                let slot = itemSlot(id)!
                unlinkItem(slot)
                freeItem(slot)
            case .restoreItem(let item, let section, let after, let parent):
                let slot = allocateItem(item)
                linkItem(slot, section: sectionIndex[section]!, after: after.map { itemSlot($0)! } ?? Self.none)
                if let parent {
                    let parentSlot = itemSlot(parent)!
                    setPlace(slot, parent: parentSlot, level: levelOfSlot(parentSlot) + 1)
                }
            case .moveItemBack(let id, let section, let after, let parent):
                let slot = itemSlot(id)!
                // A flat room may go back to being an outline: the batch undone (`undo(_:)`,
                // after `dropOutlineIfFlat`) may have moved its last nested item to the roots.
                if outline.isEmpty && parent == nil {
                    unlinkItem(slot)
                    linkItem(slot, section: sectionIndex[section]!, after: after.map { itemSlot($0)! } ?? Self.none)
                } else {
                    let subtree = detachSubtree(slot)
                    let parentSlot = parent.map { itemSlot($0)! } ?? Self.none
                    attachSubtree(
                        subtree, section: sectionIndex[section]!, after: after.map { itemSlot($0)! } ?? Self.none,
                        parent: parentSlot, level: parentSlot == Self.none ? 0 : levelOfSlot(parentSlot) + 1)
                }
            case .restoreItemPayload(let id, let payload):
                setItemPayload(itemSlot(id)!, payload)
            case .restoreAll(let old):
                self = old
            }
        }
    }
}

// MARK: - Primitives (all O(1))

// Every change of content or of a section's item count goes through these, which is what keeps
// `encodedBodyBytes` exact (checked by `checkInvariants()`).

extension RoomSnapshot {
    /// Bytes of an unsigned LEB128 varint (Protocol/PROTOCOL.md §2). O(1).
    @inlinable static func varintSize(_ value: Int) -> Int {
        let bits = Int.bitWidth - UInt(truncatingIfNeeded: value).leadingZeroBitCount
        return bits == 0 ? 1 : (bits + 6) / 7
    }

    /// `id bytes, payload bytes`: the encoded size of an element.
    @inlinable static func encodedSize(id: SnapshotIdentifier, payload: SnapshotPayload) -> Int {
        encodedSize(idCount: id.count, payloadCount: payload.count)
    }

    @inlinable static func encodedSize(idCount: Int, payloadCount: Int) -> Int {
        varintSize(idCount) + idCount + varintSize(payloadCount) + payloadCount
    }

    mutating func setSectionPayload(_ slot: Slot, _ payload: SnapshotPayload) {
        let old = sectionNodes[Int(slot)].payload.count
        encodedBodyBytes += Self.varintSize(payload.count) + payload.count - Self.varintSize(old) - old
        sectionNodes[Int(slot)].payload = payload
    }

    mutating func setItemPayload(_ slot: Slot, _ payload: SnapshotPayload) {
        let old = withItems { $0.payloadCount(slot) }
        encodedBodyBytes += Self.varintSize(payload.count) + payload.count - Self.varintSize(old) - old
        storeItemPayload(slot, payload)
    }

    mutating func allocateSection(_ section: SnapshotElement) -> Slot {
        let node = SectionNode(
            id: section.id, payload: section.payload, prev: Self.none, next: Self.none,
            firstItem: Self.none, lastItem: Self.none, itemCount: 0)
        let slot: Slot
        if let free = freeSections.popLast() {
            slot = free
            sectionNodes[Int(slot)] = node
        } else {
            slot = Slot(sectionNodes.count)
            sectionNodes.append(node)
        }
        sectionIndex[section.id] = slot
        // The element, and the item count varint of an empty section (one byte).
        encodedBodyBytes += Self.encodedSize(id: section.id, payload: section.payload) + 1
        return slot
    }

    /// The section must be unlinked and empty.
    mutating func freeSection(_ slot: Slot) {
        sectionIndex.removeValue(forKey: sectionNodes[Int(slot)].id)
        encodedBodyBytes -=
            Self.encodedSize(id: sectionNodes[Int(slot)].id, payload: sectionNodes[Int(slot)].payload)
            + Self.varintSize(sectionNodes[Int(slot)].itemCount)
        // Drop the bytes now; the slot keeps only its shape until reused.
        sectionNodes[Int(slot)].id = SnapshotIdentifier([])
        sectionNodes[Int(slot)].payload = .empty
        freeSections.append(slot)
    }

    /// Links an unlinked section after `after` (`none`: at the front).
    mutating func linkSection(_ slot: Slot, after: Slot) {
        let next = after == Self.none ? firstSection : sectionNodes[Int(after)].next
        sectionNodes[Int(slot)].prev = after
        sectionNodes[Int(slot)].next = next
        if after == Self.none { firstSection = slot } else { sectionNodes[Int(after)].next = slot }
        if next == Self.none { lastSection = slot } else { sectionNodes[Int(next)].prev = slot }
    }

    mutating func unlinkSection(_ slot: Slot) {
        let prev = sectionNodes[Int(slot)].prev, next = sectionNodes[Int(slot)].next
        if prev == Self.none { firstSection = next } else { sectionNodes[Int(prev)].next = next }
        if next == Self.none { lastSection = prev } else { sectionNodes[Int(next)].prev = prev }
        sectionNodes[Int(slot)].prev = Self.none
        sectionNodes[Int(slot)].next = Self.none
    }

    mutating func allocateItem(_ item: SnapshotElement) -> Slot {
        let node = ItemNode(offset: storeItemBytes(item), prev: Self.none, next: Self.none, section: Self.none)
        let slot: Slot
        if let free = freeItems.popLast() {
            slot = free
            itemNodes[Int(slot)] = node
        } else {
            slot = Slot(itemNodes.count)
            itemNodes.append(node)
        }
        itemIndex.insert(tag: SlotIndex.tag(of: item.id), slot: slot)
        encodedBodyBytes += Self.encodedSize(id: item.id, payload: item.payload)
        // A new item is a root; a reused slot's entry was reset by `freeItem`.
        if !outline.isEmpty, Int(slot) == outline.count { outline.append(.root) }
        return slot
    }

    /// The item must be unlinked.
    mutating func freeItem(_ slot: Slot) {
        // The record is the item's canonical encoding: its size is what the item adds to it.
        let (tag, record) = withItems { (SlotIndex.tag(of: $0.idBytes(slot)), $0.recordCount(slot)) }
        itemIndex.remove(tag: tag, slot: slot)
        encodedBodyBytes -= record
        releaseItemBytes(slot)
        if !outline.isEmpty { setPlace(slot, parent: Self.none, level: 0) }
        freeItems.append(slot)
    }

    /// Links an unlinked item into `section` after `after` (`none`: at the section's front).
    mutating func linkItem(_ slot: Slot, section: Slot, after: Slot) {
        let next = after == Self.none ? sectionNodes[Int(section)].firstItem : itemNodes[Int(after)].next
        itemNodes[Int(slot)].prev = after
        itemNodes[Int(slot)].next = next
        itemNodes[Int(slot)].section = section
        if after == Self.none { sectionNodes[Int(section)].firstItem = slot } else { itemNodes[Int(after)].next = slot }
        if next == Self.none { sectionNodes[Int(section)].lastItem = slot } else { itemNodes[Int(next)].prev = slot }
        let count = sectionNodes[Int(section)].itemCount
        encodedBodyBytes += Self.varintSize(count + 1) - Self.varintSize(count)
        sectionNodes[Int(section)].itemCount = count + 1
    }

    mutating func unlinkItem(_ slot: Slot) {
        let node = itemNodes[Int(slot)]
        if node.prev == Self.none { sectionNodes[Int(node.section)].firstItem = node.next } else { itemNodes[Int(node.prev)].next = node.next }
        if node.next == Self.none { sectionNodes[Int(node.section)].lastItem = node.prev } else { itemNodes[Int(node.next)].prev = node.prev }
        let count = sectionNodes[Int(node.section)].itemCount
        encodedBodyBytes += Self.varintSize(count - 1) - Self.varintSize(count)
        sectionNodes[Int(node.section)].itemCount = count - 1
        itemNodes[Int(slot)].prev = Self.none
        itemNodes[Int(slot)].next = Self.none
        itemNodes[Int(slot)].section = Self.none
    }
}
