public import SnapSyncModel

/// How a version 3 CATCHUP brings a replica from its resume position to the room's version
/// (PROTOCOL.md §11.12, the `folded` field).
public enum CatchupForm: Hashable, Sendable {
    /// One DIFF per missed version follows, each chained as a live one.
    case replay
    /// One DIFF follows, at the CATCHUP's `to_version`: the ops that take the room at
    /// `from_version` to the room at `to_version`, computed as a REPLACE's are. Its chain is the
    /// room's at `to_version`, which the replica takes rather than computes; `digest` is the
    /// room's state digest there, which the replica's state must have after the DIFF.
    case folded(digest: SnapshotDigest)
}
