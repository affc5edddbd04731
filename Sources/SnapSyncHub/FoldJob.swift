import SnapSyncModel
import SnapSyncWire
import SnapSyncStore

/// Everything a folded catch-up (PROTOCOL.md §11.12) is computed from, as values: the room's
/// resume base and the DIFF frames that bring it to the replica's version, the room's state and
/// chain at the version folded to. A job reads nothing of the room, so it runs as well off the
/// loop (`OffLoopWorker`) as on it, and gives the same bytes either way.
struct FoldJob: Sendable {
    let room: String
    let epoch: UInt64
    let from: UInt64
    let to: UInt64
    /// The room's state at `baseVersion` (its resume base), and its DIFF frames of versions
    /// `baseVersion + 1 ... from`, copied out of the history.
    let base: RoomSnapshot
    let baseVersion: UInt64
    let framesToFrom: [[UInt8]]
    /// The room's state, chain and (when known) digest at `to`.
    let target: RoomSnapshot
    let chain: RoomChain
    let knownDigest: SnapshotDigest?
    let limits: WireLimits

    /// What a job gives: the chained DIFF frame at `to` and the state digest there.
    struct Outcome: Sendable {
        let frame: [UInt8]
        let digest: SnapshotDigest
    }

    /// Rebuilds the state at `from`, diffs it against the target with the room's limits (every
    /// prefix of the DIFF applies under them, as replicas check), encodes the DIFF with the chain
    /// at its end, and hashes the target unless its digest is known. Nil when a frame does not
    /// apply (a bug) or the DIFF would not fit the clients' frame limit.
    /// - Complexity: O(n) in the room (the copy of the base, the diff, the digest) plus the
    ///   frames applied.
    func run() -> Outcome? {
        var state = base
        for frame in framesToFrom {
            guard frame.withUnsafeBytes({ HistoryBase.apply(diffFrame: $0, to: &state) }) else { return nil }
        }
        let ops = state.difference(to: target, limits: limits.model)
        var frame: [UInt8] = []
        let size = FrameEncoder().encodeDiff(room: room, epoch: epoch, version: to, ops: ops, into: &frame)
        // As `Room.checkFrameSize`: the chained frame must fit max_frame_bytes.
        guard size + RoomChain.byteCount - 4 <= limits.maxFrameBytes else { return nil }
        let chained = frame.withUnsafeBytes { RoomChain.chainedDiffFrame($0, chain: chain) }
        return Outcome(frame: chained, digest: knownDigest ?? target.digest)
    }
}
