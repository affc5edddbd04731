import SnapSyncModel
import SnapSyncStore

/// The room as it was at one version inside its history: what a folded catch-up
/// (PROTOCOL.md §11.12) rebuilds the state of a resuming replica from.
///
/// A DIFF cannot be undone without the state before it, so the state at a version `v` in the
/// history is rebuilt forwards: this base, then the history's DIFFs up to `v`. The base follows
/// the history's oldest end: each DIFF the history evicts that is newer than the base is applied
/// to it (`advance`), so the base never needs a DIFF the history no longer holds. That costs
/// one more apply per write once the history is full, and the memory of a second snapshot,
/// which the memory budget counts (`Room.resumeBaseBytes`).
///
/// A room loaded from the store gets the base its checkpoint kept (`HistoryBase`), so that it
/// folds across a restart and a sleep. A base may be newer than the history's oldest version: a
/// room loaded without one (a checkpoint written without it, or a cluster checkpoint) starts
/// with its base at its loaded version, because the state before it is not known. Resumes from
/// between the two are replayed, never folded.
struct ResumeBase {
    /// The version the snapshot is the room's state at.
    private(set) var version: UInt64
    private(set) var snapshot: RoomSnapshot

    /// The base at `version` with `snapshot`. Sharing the room's snapshot costs nothing now but
    /// one copy of it at the room's next write, when the two part.
    init(version: UInt64, snapshot: RoomSnapshot) {
        self.version = version
        self.snapshot = snapshot
    }

    /// Moves the base past the DIFF of `frameVersion`, which the history is evicting; a frame
    /// at or before the base is already in it. False when the frame does not apply (the base
    /// is then unusable).
    /// - Complexity: O(frame) plus the apply, for a frame newer than the base; O(1) otherwise.
    mutating func advance(past frame: UnsafeRawBufferPointer, version frameVersion: UInt64) -> Bool {
        guard frameVersion > version else { return true }
        precondition(frameVersion == version + 1, "the base follows the history one version at a time")
        // The store's rule (`HistoryBase`), so a base it keeps and one kept here agree. False
        // only for a bug: the room applied this frame to this very state.
        guard HistoryBase.apply(diffFrame: frame, to: &snapshot) else { return false }
        version = frameVersion
        return true
    }
}
