import DequeModule
import SnapSyncModel
import SnapSyncStore

/// How far back a room can rebuild its own state, for a folded catch-up (PROTOCOL.md §11.12),
/// from `version` to the room's version. Two parts, either of which may be empty:
///
/// - **Undos**: the undo of each write since `undoStart` (`SnapshotUndo`), newest last. The
///   state at a version `v` from `undoStart` on is the room's state now with the undos of every
///   version after `v` undone, newest first. A write's undo costs about its DIFF (the
///   identifiers and old payloads it names), and applying the write records it anyway, so a
///   large room with a window of small writes keeps a small fraction of a second copy.
/// - **An anchor**: the room's whole state at `version`, the history's oldest version, for the
///   versions before `undoStart`: the state at `v` is the anchor with the history's DIFFs up
///   to `v` applied. Each DIFF the history evicts is applied to the anchor, so it follows the
///   history's oldest end, and once it reaches `undoStart` the undos cover the whole reach and
///   the anchor goes.
///
/// The undos are kept while they weigh at most the room (or 32 KiB for a small room,
/// `Room.maxResumeUndoBytes`). Past that: with an anchor, the undos go (the anchor keeps the
/// reach); without one, if the window's DIFFs outweigh the room (a small busy room: undos for
/// the whole window would outweigh it too), the undos become an anchor (the state at `version`,
/// rebuilt once: O(n)), which keeps the whole reach for the room's size; otherwise the oldest
/// undos go, and a resume from before them is replayed. So the base costs at most the room's
/// size in undos plus at most one state of the room within the window (what a base always cost
/// before undos), and the memory budget counts it (`Room.resumeBaseBytes`).
///
/// A room loaded from the store gets the base its checkpoint kept (`HistoryBase`) as an anchor:
/// loading applies nothing more than before, and the undos recorded from the load on take over
/// once the window has moved past it. A room loaded without one (a checkpoint written without
/// it, or a cluster checkpoint) starts its reach at its loaded version, because the state before
/// it is not known.
struct ResumeBase {
    /// The oldest version the room can rebuild: the anchor's, else `undoStart`.
    var version: UInt64 { anchor?.version ?? undoStart }
    /// The room's state at its version, for the versions before `undoStart`.
    private(set) var anchor: (version: UInt64, state: RoomSnapshot)?
    /// The version the undos start from: `undos[k]` undoes version `undoStart + 1 + k`.
    private(set) var undoStart: UInt64
    private var undos: Deque<SnapshotUndo> = []
    /// What the undos hold (`SnapshotUndo.byteCount`, summed).
    private var undoBytes = 0

    /// An empty reach at `version`.
    init(version: UInt64) { undoStart = version }

    /// The reach from `version`, with `anchor`, the room's state there, and no undos yet from
    /// `newest` (the room's version) on.
    init(anchor: RoomSnapshot, version: UInt64, newest: UInt64) {
        self.anchor = version < newest ? (version, anchor) : nil
        undoStart = newest
    }

    /// The bytes the base holds: the undos', plus the anchor's canonical bytes.
    var byteCount: Int { undoBytes + (anchor?.state.canonicalByteCount ?? 0) }

    /// Adds the undo of `newVersion`, the room's next version, keeping the base within its
    /// bound (see the type's comment).
    /// - Parameters:
    ///   - room: the room's state at `newVersion`, to rebuild an anchor from.
    ///   - maxBytes: the most the undos may hold (`Room.maxResumeUndoBytes`).
    ///   - windowBytes: the bytes of the DIFFs the history holds.
    /// - Complexity: O(1) amortized, plus the undos dropped; O(n) when the undos become an
    ///   anchor.
    mutating func record(_ undo: SnapshotUndo, version newVersion: UInt64, room: RoomSnapshot, maxBytes: Int, windowBytes: Int) {
        precondition(newVersion == undoStart + UInt64(undos.count) + 1, "the undos follow the room one version at a time")
        undos.append(undo)
        undoBytes += undo.byteCount
        guard undoBytes > maxBytes else { return }
        if anchor != nil {
            dropUndos(startingOver: newVersion)
        } else if windowBytes > room.canonicalByteCount {
            var state = room
            state.undo(undos)
            anchor = (undoStart, state)
            dropUndos(startingOver: newVersion)
        } else {
            while undoBytes > maxBytes, let oldest = undos.popFirst() {
                undoBytes -= oldest.byteCount
                undoStart += 1
            }
        }
    }

    private mutating func dropUndos(startingOver newest: UInt64) {
        undos.removeAll()
        undoBytes = 0
        undoStart = newest
    }

    /// Starts the reach over at `newVersion`, the room's version after a write whose undo is not
    /// known. O(undos) to free them.
    mutating func reset(at newVersion: UInt64) {
        anchor = nil
        dropUndos(startingOver: newVersion)
    }

    /// Moves the reach past `evictedVersion`, whose DIFF `frame` the history no longer holds:
    /// a resume from before it cannot be checked against the room's chain. The anchor takes the
    /// DIFF (and goes once it reaches the undos), or the undos drop that version's. False when
    /// the DIFF does not apply to the anchor (a bug: the room applied it to this very state),
    /// and the caller starts over.
    /// - Complexity: O(1) for undos; O(frame) to decode plus the apply for an anchor.
    mutating func forget(through evictedVersion: UInt64, frame: UnsafeRawBufferPointer) -> Bool {
        guard evictedVersion > version else { return true }
        precondition(evictedVersion == version + 1, "the base follows the history one version at a time")
        if var (_, state) = anchor {
            anchor = nil  // the state is then held once, and applied to in place
            guard HistoryBase.apply(diffFrame: frame, to: &state) else { return false }
            if evictedVersion < undoStart { anchor = (evictedVersion, state) }
        } else if let first = undos.popFirst() {
            undoBytes -= first.byteCount
            undoStart = evictedVersion
        }
        return true
    }

    /// Whether the base reaches up to `newest`, the room's version: when there is an undo for
    /// every version after `undoStart`, and an anchor (if any) is before it.
    func reaches(_ newest: UInt64) -> Bool {
        undoStart + UInt64(undos.count) == newest && (anchor.map { $0.version < undoStart } ?? true)
    }

    /// How to rebuild the state at `target` (see `FoldJob.Rebuild`); nil when it is out of reach.
    /// - Parameters:
    ///   - newest: the room's version.
    ///   - frames: the history's first `count` DIFF frames after a version, copied (the anchor
    ///     needs them); nil when the history does not reach back there.
    /// - Complexity: O(versions from `target` on) for undos, shared; O(bytes of the frames
    ///   from the anchor to `target`) for the anchor, copied.
    func rebuild(at target: UInt64, newest: UInt64, frames: (_ after: UInt64, _ count: Int) -> [[UInt8]]?) -> FoldJob.Rebuild? {
        guard target >= version, target <= newest else { return nil }
        if target >= undoStart { return .backward(undos: Array(undos.suffix(Int(newest - target)))) }
        guard let anchor, let frames = frames(anchor.version, Int(target - anchor.version)) else { return nil }
        return .forward(anchor: anchor.state, frames: frames)
    }

    /// The base's state at `target` as a checkpoint keeps it: the anchor when it is there, else
    /// the undos that take the room's state back there (newest last); nil when out of reach.
    func checkpointBase(at target: UInt64) -> (anchor: RoomSnapshot?, undos: [SnapshotUndo]?)? {
        if let anchor, anchor.version == target { return (anchor.state, nil) }
        guard anchor == nil, target >= undoStart, target <= undoStart + UInt64(undos.count) else { return nil }
        return (nil, Array(undos.suffix(Int(undoStart + UInt64(undos.count) - target))))
    }
}
