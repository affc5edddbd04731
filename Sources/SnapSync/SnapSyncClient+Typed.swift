// The typed façade's entry points on the client: join a room as a `TypedReplica`, and write to
// it with a `TypedBatch`.

extension SnapSyncClient {
    /// `join(room)`, read through `coding`.
    public func join<SectionID, ItemID, Item>(
        _ room: String, coding: RoomCoding<SectionID, ItemID, Item>
    ) async throws(SnapSyncError) -> TypedReplica<SectionID, ItemID, Item> {
        TypedReplica(try await join(room), coding: coding)
    }

    /// `perform(room)` with typed identifiers and items: `body` builds the batch on a
    /// `TypedBatch` validated against the joined replica, and the batch is sent as `mutate`
    /// sends it.
    /// - Throws: `.coding` when a value does not encode and `.invalidBatch` when an operation does
    ///   not apply (nothing is sent), other errors of the body as `perform(_:)` does,
    ///   `.notJoined`, and what `mutate` throws.
    @discardableResult
    public func perform<SectionID, ItemID, Item>(
        _ room: String, coding: RoomCoding<SectionID, ItemID, Item>, expectedVersion: UInt64? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (inout TypedBatch<SectionID, ItemID, Item>) throws -> Void
    ) async throws(SnapSyncError) -> RoomPosition {
        guard let base = await batchBase(room) else { throw .notJoined(room: room) }
        var batch = TypedBatch(builder: BatchBuilder(base: base.snapshot, limits: base.limits), coding: coding)
        do {
            try body(&batch)
        } catch {
            throw SnapSyncError(batchBodyError: error)
        }
        return try await mutate(room, batch.builder.operations, expectedVersion: expectedVersion)
    }
}
