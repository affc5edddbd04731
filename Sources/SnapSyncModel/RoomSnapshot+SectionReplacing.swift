// Replacing one section's items with a section snapshot: `dataSource.apply(_:to:)` of UIKit, and
// the server side of REPLACE_SECTION (Protocol/PROTOCOL.md).
//
// The batch is the diff of that section alone (its items in the room, as a one-section snapshot,
// to the new items under the same section), so it names no other section and no item outside
// this one, and keeps the diff's properties: identities kept, minimal moves, every prefix within
// the limits. Only the size bound is the room's, not the section's: when it could cross
// `maxSnapshotBytes`, or the depth bound `maxOutlineDepth`, the batch is checked by applying it
// to a copy of the room; when it fails, the flattened batch (`flattenedDifference(to:)`: every
// item that changes parent first moved up to the roots, every identity kept) is checked, and
// only when that fails too, a fallback deletes the section's items and appends the new ones
// (each prefix shrinks, then grows towards the result; PROTOCOL.md §11.21's one exception).

extension RoomSnapshot {
    /// The batch that makes `section`'s items exactly `new`'s, hierarchy included, touching
    /// nothing else: items that leave the section are deleted, items of `new` already in it keep
    /// their identity. Every prefix applies under `limits` when the room and the result are
    /// within them.
    ///
    /// - Throws: `BatchError` with `operationIndex` 0: `sectionNotFound`; for the first item of
    ///   `new` (in order) that breaks a rule, `identifierTooLong`, `payloadTooLarge`,
    ///   `duplicateItem` (the item is in another section of the room: UIKit crashes there), or
    ///   `outlineTooDeep`; then `tooManyItems` and `snapshotTooLarge` for the result.
    /// - Complexity: O(items in the section + |new| + Σ k log k) as `difference(to:)`, plus one
    ///   hash lookup per item of `new` in the room; when a bound could cross a limit, O(n) more
    ///   to check the batch on a copy of the room.
    public func operations(replacingSection section: SnapshotIdentifier, with new: SectionSnapshot, limits: SnapshotLimits) throws(BatchError)
        -> [SnapshotOperation]
    {
        func fail(_ violation: BatchError.Violation) -> BatchError { BatchError(operationIndex: 0, violation: violation) }
        guard let s = sectionIndex[section] else { throw fail(.sectionNotFound(section)) }
        let newStorage = new.storage
        let violation: BatchError.Violation? = newStorage.withItems { items in
            var i = newStorage.sectionNodes[Int(newStorage.firstSection)].firstItem
            while i != Self.none {
                let node = items[Int(i)]
                if items.idCount(i) > limits.maxIdentifierBytes { return .identifierTooLong(items.id(i), limit: limits.maxIdentifierBytes) }
                if items.payloadCount(i) > limits.maxPayloadBytes {
                    return .payloadTooLarge(items.id(i), size: items.payloadCount(i), limit: limits.maxPayloadBytes)
                }
                let id = items.idBytes(i)
                if let slot = withItems({ itemIndex.find(id, tag: SlotIndex.tag(of: id), in: $0) }), itemNodes[Int(slot)].section != s {
                    return .duplicateItem(items.id(i))
                }
                if newStorage.levelOfSlot(i) >= limits.maxOutlineDepth { return .outlineTooDeep(items.id(i), limit: limits.maxOutlineDepth) }
                i = node.next
            }
            return nil
        }
        if let violation { throw fail(violation) }

        let sectionElement = SnapshotElement(section, payload: sectionNodes[Int(s)].payload)
        var old = sectionSnapshot(of: section)!.storage
        old.renameOnlySection(to: sectionElement)
        var target = newStorage
        target.renameOnlySection(to: sectionElement)

        // The result, from the running counts: O(1).
        let resultItems = numberOfItems - old.numberOfItems + target.numberOfItems
        if resultItems > limits.maxItems { throw fail(.tooManyItems(limit: limits.maxItems)) }
        let resultBody = encodedBodyBytes - old.encodedBodyBytes + target.encodedBodyBytes
        let resultNested = nestedItemCount - old.nestedItemCount + target.nestedItemCount
        let resultLevels = resultNested > 0 ? resultItems + levelExtraBytes - old.levelExtraBytes + target.levelExtraBytes : 0
        let resultSize = Self.varintSize(numberOfSections) + resultBody + resultLevels
        if resultSize > limits.maxSnapshotBytes { throw fail(.snapshotTooLarge(limit: limits.maxSnapshotBytes)) }

        let forest = old.isOutline || target.isOutline
        let (ops, varintExcess, deepest) = old.withItems { aItems in
            target.withItems { bItems in
                var differ = Differ(a: old, b: target, aItems: aItems, bItems: bItems)
                let ops = forest ? differ.runForest() : differ.run()
                return (ops, differ.varintExcess, differ.deepestLevelBound)
            }
        }
        // Intermediate states: the body as in `difference(to:limits:)`; the levels part, once
        // any item of the room is nested, one varint per item at a level under the deeper of
        // this section's bound and the room's limit.
        let levelsBound =
            isOutline || forest ? max(numberOfItems, resultItems) * Self.varintSize(max(deepest, min(limits.maxOutlineDepth, Int(Int32.max)))) : 0
        let sizeBound = Self.varintSize(numberOfSections) + max(encodedBodyBytes, resultBody + varintExcess) + levelsBound
        if sizeBound <= limits.maxSnapshotBytes, deepest < limits.maxOutlineDepth { return ops }
        var check = self
        if (try? check.apply(ops, limits: limits)) != nil { return ops }
        // Near the depth limit: flatten first, which keeps every identity.
        if let flat = old.flattenedDifference(to: target) {
            check = self
            if (try? check.apply(flat, limits: limits)) != nil { return flat }
        }
        // Delete the section's roots (each with its subtree), then append the new items.
        var rebuild: [SnapshotOperation] = []
        if let roots = rootItems(inSection: section), !roots.isEmpty { rebuild.append(.deleteItems(roots)) }
        for op in target.rebuildOutline().dropFirst(2) {
            if case .appendItems(let run, _) = op { rebuild.append(.appendItems(run, toSection: section)) } else { rebuild.append(op) }
        }
        return rebuild
    }

    /// Gives the only section of a one-section snapshot another identifier and payload. O(1)
    mutating func renameOnlySection(to element: SnapshotElement) {
        let slot = firstSection
        let node = sectionNodes[Int(slot)]
        sectionIndex.removeValue(forKey: node.id)
        sectionIndex[element.id] = slot
        encodedBodyBytes += Self.encodedSize(id: element.id, payload: element.payload) - Self.encodedSize(id: node.id, payload: node.payload)
        sectionNodes[Int(slot)].id = element.id
        sectionNodes[Int(slot)].payload = element.payload
    }
}
