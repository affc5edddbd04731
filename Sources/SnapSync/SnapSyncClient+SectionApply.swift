extension SnapSyncClient {
    /// UIKit's `dataSource.apply(_:to:)`: makes `section`'s items exactly `sectionSnapshot`'s,
    /// hierarchy included, leaving the other sections alone (REPLACE_SECTION, protocol version
    /// 2). The server diffs the section (items that leave it are deleted, the others keep their
    /// identity) and members get an ordinary DIFF. The section keeps its payload.
    ///
    /// - Throws: `.rejected` with `section_not_found`, `duplicate_item` (an item of
    ///   `sectionSnapshot` is in another section: move it with `perform` first), a content limit,
    ///   or `version_mismatch` when `expectedVersion` is not the room's; see `mutate` for the rest.
    @discardableResult
    public func apply(
        _ sectionSnapshot: SectionSnapshot, to section: SnapshotIdentifier, in room: String, expectedVersion: UInt64? = nil
    ) async throws(SnapSyncError) -> RoomPosition {
        try await write(
            PendingWrite(
                room: room, expectedVersion: expectedVersion, writeID: Self.newWriteID(),
                body: .section(section, sectionSnapshot)))
    }
}
