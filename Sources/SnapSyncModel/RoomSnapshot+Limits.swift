// Checking a whole snapshot against content limits: for a snapshot built without them, such as a
// room recovered from the store under limits lowered since it was written.

extension RoomSnapshot {
    /// The first content limit (PROTOCOL.md §12) this snapshot breaks, or `nil`, in the order a
    /// receiver checks a `snapshot` field (§4): the encoding's size first, then the sections in
    /// order, each followed by its items; for each element its identifier, its payload, then the
    /// section or item count it would take over the limit; then the first item, in that order,
    /// whose level is `maxOutlineDepth` or more.
    /// - Complexity: O(sections + items), without copying any identifier or payload except the
    ///   one named in the violation.
    public func firstLimitViolation(_ limits: SnapshotLimits) -> BatchError.Violation? {
        if canonicalByteCount > limits.maxSnapshotBytes { return .snapshotTooLarge(limit: limits.maxSnapshotBytes) }
        var sectionCount = 0, itemCount = 0
        var s = firstSection
        while s != Self.none {
            let node = sectionNodes[Int(s)]
            if node.id.count > limits.maxIdentifierBytes { return .identifierTooLong(node.id, limit: limits.maxIdentifierBytes) }
            if node.payload.count > limits.maxPayloadBytes {
                return .payloadTooLarge(node.id, size: node.payload.count, limit: limits.maxPayloadBytes)
            }
            sectionCount += 1
            if sectionCount > limits.maxSections { return .tooManySections(limit: limits.maxSections) }
            let itemViolation: BatchError.Violation? = withItems { items in
                var i = node.firstItem
                while i != Self.none {
                    if items.idCount(i) > limits.maxIdentifierBytes { return .identifierTooLong(items.id(i), limit: limits.maxIdentifierBytes) }
                    let payloadCount = items.payloadCount(i)
                    if payloadCount > limits.maxPayloadBytes {
                        return .payloadTooLarge(items.id(i), size: payloadCount, limit: limits.maxPayloadBytes)
                    }
                    itemCount += 1
                    if itemCount > limits.maxItems { return .tooManyItems(limit: limits.maxItems) }
                    i = items[Int(i)].next
                }
                return nil
            }
            if let itemViolation { return itemViolation }
            s = node.next
        }
        if nestedItemCount > 0 {
            s = firstSection
            while s != Self.none {
                var i = sectionNodes[Int(s)].firstItem
                while i != Self.none {
                    if levelOfSlot(i) >= limits.maxOutlineDepth { return .outlineTooDeep(itemIdentifier(at: i), limit: limits.maxOutlineDepth) }
                    i = itemNodes[Int(i)].next
                }
                s = sectionNodes[Int(s)].next
            }
        }
        return nil
    }
}
