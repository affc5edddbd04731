package import SnapSyncModel
package import SnapSyncWire

/// A room's current state, as the daemon pushes it to the store for a checkpoint of a room the
/// store said is due (`RoomStore.maintain()`, `DurableStore.roomsDueAtClose()`). It must include
/// every write appended for the room so far.
package struct RoomImage: Sendable {
    package var room: String
    package var epoch: UInt64
    package var version: UInt64
    package var snapshot: RoomSnapshot
    /// The room's recent DIFF frames (length prefix included), oldest first, the last one being
    /// the DIFF to `version`: kept in the checkpoint (with the write_ids the store logged for
    /// them) so that CATCHUP works across a restart even after the log holding them is
    /// deleted. May be empty; only the last `StoreOptions.historyLimit` are kept.
    package var diffFrames: [[UInt8]]
    /// The room's chain (`RoomChain`) before `diffFrames.first`, i.e. at version
    /// `version - diffFrames.count`; at `version` when `diffFrames` is empty. Nil when the
    /// daemon does not know it. Kept in the checkpoint (advanced over the frames the store does
    /// not keep), so that the room's chain continues across a restart and a sleep.
    package var chain: RoomChain?
    /// The room's state before `diffFrames.first` (at `version - diffFrames.count`), its resume
    /// base (`HistoryBase`), when the daemon keeps it and wants it to outlast a restart and a
    /// sleep: the checkpoint then holds it too (docs/persistence.md, "The resume window and
    /// folded catch-ups"). Nil: the checkpoint holds none.
    package var base: RoomSnapshot?
    /// The base as the undos that take `snapshot` back to it (newest last), when `base` is nil:
    /// the checkpoint's encoding rolls a copy back (`resolvedBase`), so the daemon that builds
    /// the image copies nothing.
    package var baseUndos: [SnapshotUndo]?

    /// `base`, or `snapshot` taken back through `baseUndos`; nil when neither is set.
    /// - Complexity: O(1) for `base`; else O(n) for the copy plus the undos.
    package var resolvedBase: RoomSnapshot? {
        if let base { return base }
        guard let baseUndos else { return nil }
        var state = snapshot
        state.undo(baseUndos)
        return state
    }

    package init(
        room: String, epoch: UInt64, version: UInt64, snapshot: RoomSnapshot, diffFrames: [[UInt8]] = [],
        chain: RoomChain? = nil, base: RoomSnapshot? = nil, baseUndos: [SnapshotUndo]? = nil
    ) {
        self.room = room
        self.epoch = epoch
        self.version = version
        self.snapshot = snapshot
        self.diffFrames = diffFrames
        self.chain = chain
        self.base = base
        self.baseUndos = baseUndos
    }
}
