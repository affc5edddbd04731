import SnapSyncModel
import SnapSyncWire
import SnapSyncStore

/// Everything a folded catch-up (PROTOCOL.md §11.12) is computed from, as values: the room's
/// state and chain at the version folded to, and what rebuilds the state at the replica's
/// version (the room's resume base: undos, or an anchor and DIFFs). A job reads nothing of the room, so it runs as well off the
/// loop (`OffLoopWorker`) as on it, and gives the same bytes either way.
struct FoldJob: Sendable {
    let room: String
    let epoch: UInt64
    let from: UInt64
    let to: UInt64
    /// How the state at `from` is rebuilt (`ResumeBase`).
    let rebuild: Rebuild
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
    /// at its end, and hashes the target unless its digest is known. Nil when a DIFF does not
    /// apply to the anchor (a bug) or the DIFF would not fit the clients' frame limit.
    /// - Complexity: O(n) in the room (the copy of the target or the anchor, the diff, the
    ///   digest) plus the undos or DIFFs.
    func run() -> Outcome? {
        guard let state = rebuild.state(before: target) else { return nil }
        let ops = state.difference(to: target, limits: limits.model)
        var frame: [UInt8] = []
        let size = FrameEncoder().encodeDiff(room: room, epoch: epoch, version: to, ops: ops, into: &frame)
        // As `Room.checkFrameSize`: the chained frame must fit max_frame_bytes.
        guard size + RoomChain.byteCount - 4 <= limits.maxFrameBytes else { return nil }
        let chained = frame.withUnsafeBytes { RoomChain.chainedDiffFrame($0, chain: chain) }
        return Outcome(frame: chained, digest: knownDigest ?? target.digest)
    }
}

extension FoldJob {
    /// How a state at an earlier version is rebuilt, from the resume base's form (`ResumeBase`).
    enum Rebuild: Sendable {
        /// The room's state at the version folded to, with these undos (newest last) undone.
        case backward(undos: [SnapshotUndo])
        /// The anchor, with these DIFF frames (the history's next ones, oldest first) applied.
        case forward(anchor: RoomSnapshot, frames: [[UInt8]])

        /// The rebuilt state, `target` being the room's state at the version folded to; nil
        /// when a frame does not apply to the anchor (a bug).
        /// - Complexity: O(n) for the copy, plus the undos or the frames.
        func state(before target: RoomSnapshot) -> RoomSnapshot? {
            switch self {
            case .backward(let undos):
                var state = target
                state.undo(undos)
                return state
            case .forward(let anchor, let frames):
                var state = anchor
                for frame in frames {
                    guard frame.withUnsafeBytes({ HistoryBase.apply(diffFrame: $0, to: &state) }) else { return nil }
                }
                return state
            }
        }
    }
}
