import SnapSyncModel
import SnapSyncWire

// Cluster mode: a write is validated against the room's replica without changing it, and
// proposed to the room's log; the replica changes only when the log delivers the record
// (Room+Replica.swift). The checks are `mutate`'s, `replace`'s and `replaceSection`'s, in the
// same order, but the batch is applied to a copy of the snapshot: the copy is O(n) for a room of
// n items and sections (its arrays and indexes are copied on the first change), where the
// single-node path applies in place in O(ops). The copy is kept: when the log delivers this very
// record next, it becomes the room's snapshot in O(1) (`applyLogged(_:prepared:)`).
//
// Writes proposed together in one record (ReplicatedRoomEngine+Writes.swift) are validated one
// after the other, each against the state the ones before it lead to (`ProposalBase`), as the
// single node validates each write of a batch it commits with one fsync.

/// The state a write is validated against: the room's, or what the writes proposed before it in
/// the same record make of it.
struct ProposalBase {
    var snapshot: RoomSnapshot
    var version: UInt64
    /// What the earlier writes of the record add to the room's memory, as the room budget counts
    /// it (`RoomMemoryBudget.admit`): a write is admitted on top of them.
    var growth = 0

    /// The growth a write leading to `result` with a DIFF of `frameBytes` adds on top of this
    /// base's (what `RoomMemoryBudget.admit` is asked to admit for it).
    func growth(to result: RoomSnapshot, frameBytes: Int) -> Int {
        growth + result.canonicalByteCount - snapshot.canonicalByteCount + frameBytes
    }

    /// The base for the record's next write, once a write made `version` and `result`: the
    /// growth counts that write's own remembered frame and write id too, as the budget does.
    func after(_ version: UInt64, _ result: RoomSnapshot, frameBytes: Int) -> ProposalBase {
        ProposalBase(
            snapshot: result, version: version,
            growth: growth(to: result, frameBytes: frameBytes) + 2 * RoomMemoryBudget.bytesPerRememberedID)
    }
}

extension Room {
    /// A write validated against the replica.
    enum Proposal {
        /// To be proposed: the DIFF frame to `version` (this room's version + 1), its ops, the
        /// snapshot it leads to, and the write's fingerprint (nil without a write id), which the
        /// record carries.
        case write(version: UInt64, frame: [UInt8], ops: [SnapshotOperation], result: RoomSnapshot, fingerprint: UInt64?)
        /// Changes nothing: answered without the log, by `unchanged(writeID:fingerprint:)` (which
        /// remembers the write id) once the Hub knows the replica is not behind the log.
        case unchanged(fingerprint: UInt64)
        /// Answered without the log: `.duplicate` or `.rejected`.
        case settled(WriteOutcome)
    }

    /// Validates `request` as `mutate`, `replace` or `replaceSection` would, without changing the
    /// room.
    /// - Parameter scratch: a reusable buffer the DIFF is encoded into (emptied first).
    /// - Complexity: O(n) for the snapshot's copy, plus what the single-node method costs.
    /// - Parameter base: what the writes proposed before this one in the same record lead to;
    ///   nil: the room as it is.
    func propose(_ request: WriteRequest, writeID: [UInt8], after base: ProposalBase? = nil, scratch: inout [UInt8]) -> Proposal {
        let base = base ?? ProposalBase(snapshot: snapshot, version: version)
        switch request {
        case .mutate(let ops, let expectedVersion):
            return proposeMutate(ops, expectedVersion: expectedVersion, writeID: writeID, base: base, scratch: &scratch)
        case .replace(let target, let expectedVersion):
            return proposeReplace(target, expectedVersion: expectedVersion, writeID: writeID, base: base, scratch: &scratch)
        case .replaceSection(let section, let items, let expectedVersion):
            return proposeReplaceSection(section, items, expectedVersion: expectedVersion, writeID: writeID, base: base, scratch: &scratch)
        }
    }

    private func proposeMutate(
        _ ops: [SnapshotOperation], expectedVersion: UInt64?, writeID: [UInt8], base: ProposalBase, scratch: inout [UInt8]
    ) -> Proposal {
        let fingerprint = writeID.isEmpty ? 0 : WriteFingerprint.mutate(ops, expectedVersion: expectedVersion, scratch: &scratch)
        if let outcome = precheck(expectedVersion: expectedVersion, writeID: writeID, fingerprint: fingerprint, at: base.version) {
            return .settled(outcome)
        }
        let full = budget?.admit(growth: base.growth, to: self)
        if let full, ops.isEmpty || !ops.contains(where: \.canShrink) { return .settled(.rejected(full)) }
        if ops.isEmpty { return .unchanged(fingerprint: fingerprint) }
        return proposeApplying(
            ops, fingerprint: writeID.isEmpty ? nil : fingerprint, refusingWith: full, withOpIndex: true, base: base, scratch: &scratch)
    }

    private func proposeReplace(
        _ target: RoomSnapshot, expectedVersion: UInt64?, writeID: [UInt8], base: ProposalBase, scratch: inout [UInt8]
    ) -> Proposal {
        let fingerprint = writeID.isEmpty ? 0 : WriteFingerprint.replace(digest: target.digest, expectedVersion: expectedVersion, scratch: &scratch)
        if let outcome = precheck(expectedVersion: expectedVersion, writeID: writeID, fingerprint: fingerprint, at: base.version) {
            return .settled(outcome)
        }
        if let full = budget?.admit(growth: base.growth, to: self), target.canonicalByteCount >= base.snapshot.canonicalByteCount {
            return .settled(.rejected(full))
        }
        if target.canonicalByteCount > limits.model.maxSnapshotBytes {
            return .settled(
                .rejected(
                    Rejection(
                        .snapshotTooLarge,
                        "the snapshot's encoding is \(target.canonicalByteCount) bytes, over the limit of \(limits.model.maxSnapshotBytes)")))
        }
        let ops = base.snapshot.difference(to: target, limits: limits.model)
        if ops.isEmpty { return .unchanged(fingerprint: fingerprint) }
        let next = base.version + 1
        scratch.removeAll(keepingCapacity: true)
        let size = FrameEncoder().encodeDiff(room: name, epoch: epoch, version: next, ops: ops, into: &scratch)
        if let rejection = checkFrameSize(size)
            ?? budget?.admit(growth: base.growth(to: target, frameBytes: size), to: self)
        {
            return .settled(.rejected(rejection))
        }
        // The target is the result (`apply(diff(a, b), a) == b`): no copy here.
        return .write(version: next, frame: scratch, ops: ops, result: target, fingerprint: writeID.isEmpty ? nil : fingerprint)
    }

    private func proposeReplaceSection(
        _ section: SnapshotIdentifier, _ items: SectionSnapshot, expectedVersion: UInt64?, writeID: [UInt8], base: ProposalBase,
        scratch: inout [UInt8]
    ) -> Proposal {
        let fingerprint = Self.fingerprint(replacing: section, with: items, expectedVersion: expectedVersion, writeID: writeID, scratch: &scratch)
        if let outcome = precheck(expectedVersion: expectedVersion, writeID: writeID, fingerprint: fingerprint, at: base.version) {
            return .settled(outcome)
        }
        let ops: [SnapshotOperation]
        do {
            ops = try base.snapshot.operations(replacingSection: section, with: items, limits: limits.model)
        } catch {
            return .settled(.rejected(Rejection(error, withOpIndex: false)))
        }
        if ops.isEmpty { return .unchanged(fingerprint: fingerprint) }
        // The ops are the server's, so a refusal names no op.
        return proposeApplying(
            ops, fingerprint: writeID.isEmpty ? nil : fingerprint, refusingWith: nil, withOpIndex: false, base: base, scratch: &scratch)
    }

    /// The DIFF of `ops` at version + 1, checked against the frame limit, applied to a copy of
    /// the snapshot (the room itself is untouched until the log delivers the record) and
    /// admitted by the memory bound; `full`, when the bound was already reached, is the refusal
    /// given instead of the bound's own.
    /// - Complexity: O(n) for the copy, plus that of `RoomSnapshot.apply` and of encoding the DIFF.
    private func proposeApplying(
        _ ops: [SnapshotOperation], fingerprint: UInt64?, refusingWith full: Rejection?, withOpIndex: Bool, base: ProposalBase,
        scratch: inout [UInt8]
    ) -> Proposal {
        let next = base.version + 1
        scratch.removeAll(keepingCapacity: true)
        let size = FrameEncoder().encodeDiff(room: name, epoch: epoch, version: next, ops: ops, into: &scratch)
        if let rejection = checkFrameSize(size) { return .settled(.rejected(rejection)) }
        var result = base.snapshot
        do {
            try result.apply(ops, limits: limits.model)
        } catch {
            return .settled(.rejected(Rejection(error, withOpIndex: withOpIndex)))
        }
        if let refusal = budget?.admit(growth: base.growth(to: result, frameBytes: size), to: self) {
            return .settled(.rejected(full ?? refusal))
        }
        return .write(version: next, frame: scratch, ops: ops, result: result, fingerprint: fingerprint)
    }
}
