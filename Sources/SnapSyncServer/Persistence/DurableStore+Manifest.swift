// Keeping the MANIFEST (Manifest.swift) in step with the files: a file is listed once it
// exists, and unlisted before it is unlinked.

extension DurableStore {
    /// Rewrites the MANIFEST from the store's state: every room's checkpoint, the segments from
    /// the oldest closed one to the active one (or `segments`), and `removing`, the checkpoints
    /// about to be unlinked.
    /// - Complexity: O(rooms), one small file written whole (two fsyncs).
    func writeManifest(removing: [UInt64] = [], segments: Range<UInt64>? = nil) throws(StorageError) {
        let listed = segments ?? ((closedSegments.first ?? active.sequence)..<active.sequence + 1)
        let checkpoints = rooms.values.compactMap { $0.checkpointFile.flatMap(CheckpointFile.sequence(ofFileName:)) }.sorted()
        let manifest = Manifest(nextCheckpoint: nextCheckpointSequence, firstSegment: listed.lowerBound,
                                segmentCount: UInt64(listed.count), checkpoints: checkpoints, removing: removing.sorted())
        try manifest.write(directory: directory)
    }

    /// After `writeCheckpoint` calls: lists the new checkpoints, then unlinks the ones they
    /// replaced (named in the MANIFEST's removing list until a later MANIFEST drops them, so a
    /// crash between the two is recognised on start).
    func commitCheckpoints(replacing replaced: [String]) throws(StorageError) {
        try writeManifest(removing: replaced.compactMap(CheckpointFile.sequence(ofFileName:)))
        for name in replaced { try Directory.remove(path(name)) }
    }
}
