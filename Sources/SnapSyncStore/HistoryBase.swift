package import SnapSyncModel
internal import SnapSyncWire

// A room's resume base as the store keeps it: the room's state before its history's first
// record (at version `version - history.count`), from which the daemon folds a resuming
// replica's catch-up (docs/persistence.md, "The resume window and folded catch-ups"). It follows
// the history as the chain does (HistoryChain.swift): wherever the store drops the oldest
// records of a history, the base moves forward over each dropped record's DIFF, so that it
// stays the state at `version - history.count`. A DIFF cannot be undone, so a base the store
// cannot move forward (a frame that does not apply) is dropped, never guessed.

package enum HistoryBase {
    /// Applies `frame`, a DIFF frame of the room's history, to `state`, the room's state before
    /// it; false when the frame is not a DIFF that applies there. Read with no limits beyond the
    /// formats: the room accepted the frame once.
    /// - Complexity: O(frame) to decode plus the apply.
    package static func apply(diffFrame frame: UnsafeRawBufferPointer, to state: inout RoomSnapshot) -> Bool {
        guard case .diff(_, _, _, let ops, _)? = try? FrameDecoder.decode(frame: frame, limits: .permissive, accepting: .server) else {
            return false
        }
        return (try? state.apply(ops, limits: .unlimited)) != nil
    }

    /// `base` moved forward over `dropped`, the DIFF frames of the oldest records of the history
    /// it stood before; nil when `base` is, or when a frame does not apply.
    /// - Complexity: O(size of the dropped frames) plus their applies; the base is mutated in
    ///   place (a copy only when it is shared).
    static func advance(_ base: RoomSnapshot?, over dropped: some Sequence<[UInt8]>) -> RoomSnapshot? {
        guard var state = base else { return nil }
        for frame in dropped {
            guard frame.withUnsafeBytes({ apply(diffFrame: $0, to: &state) }) else { return nil }
        }
        return state
    }

    static func advance(_ base: RoomSnapshot?, over dropped: some Sequence<WriteRecord>) -> RoomSnapshot? {
        advance(base, over: dropped.lazy.map(\.diffFrame))
    }
}
