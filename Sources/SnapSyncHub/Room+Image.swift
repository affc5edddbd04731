import SnapSyncModel
import SnapSyncStore

extension Room {
    /// The room as the store checkpoints it (for its maintenance or its sleep): its state, the
    /// history's DIFF frames and the chain before them, and its resume base when that stands
    /// exactly before the history and the room is small enough to be folded (at most
    /// `foldMaxBytes`; nil: never). A base written for a room that is never folded would only
    /// double its checkpoint (docs/persistence.md, "The resume window and folded catch-ups").
    /// - Complexity: O(history frames): the frames are copied, the snapshot and the undos shared
    ///   (the store rolls a copy back to the base when it encodes the checkpoint).
    func image(keepingBaseUpTo foldMaxBytes: Int?) -> RoomImage {
        let frames = history.frames(after: historyBaseVersion) ?? []
        var base: RoomSnapshot?, undos: [SnapshotUndo]?
        if let resumeBase, let foldMaxBytes, resumeBase.version == historyBaseVersion, !frames.isEmpty,
            snapshot.canonicalByteCount <= foldMaxBytes
        {
            (base, undos) = resumeBase.checkpointBase(at: historyBaseVersion) ?? (nil, nil)
        }
        return RoomImage(
            room: name, epoch: epoch, version: version, snapshot: snapshot, diffFrames: frames.map(\.array),
            chain: chain == nil ? nil : history.baseChain, base: base, baseUndos: undos)
    }
}
