import SnapSyncModel

extension Room {
    /// What a write asks for: a MUTATE, REPLACE or REPLACE_SECTION's content.
    enum WriteRequest {
        case mutate(ops: [SnapshotOperation], expectedVersion: UInt64?)
        case replace(target: RoomSnapshot, expectedVersion: UInt64?)
        case replaceSection(section: SnapshotIdentifier, items: SectionSnapshot, expectedVersion: UInt64?)
    }

    /// Applies `request` in place (`mutate`, `replace` or `replaceSection`): the local engine's
    /// write. The replicated engine proposes it instead (`propose`).
    func apply(_ request: WriteRequest, writeID: [UInt8], scratch: inout [UInt8]) -> WriteOutcome {
        switch request {
        case .mutate(let ops, let expectedVersion):
            mutate(ops, expectedVersion: expectedVersion, writeID: writeID, scratch: &scratch)
        case .replace(let target, let expectedVersion):
            replace(with: target, expectedVersion: expectedVersion, writeID: writeID, scratch: &scratch)
        case .replaceSection(let section, let items, let expectedVersion):
            replaceSection(section, with: items, expectedVersion: expectedVersion, writeID: writeID, scratch: &scratch)
        }
    }
}
