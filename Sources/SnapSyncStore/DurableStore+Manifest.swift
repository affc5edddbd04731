internal import Logging

// Keeping the MANIFEST (Manifest.swift) in step with the files: a file is listed once it
// exists, and unlisted before it is unlinked.

extension DurableStore {
    /// Rewrites the MANIFEST from the store's state: every room's checkpoint (sleeping rooms' too), the segments from
    /// the oldest closed one (or one whose close is still running) to the active one (or `segments`), and in removing the checkpoints
    /// about to be unlinked (`removing` and `checkpointsToRemove`).
    /// - Complexity: O(resident rooms log resident rooms + sleeping rooms), one small file
    ///   written whole (two fsyncs).
    func writeManifest(removing: [UInt64] = [], segments: Range<UInt64>? = nil) throws(StoreError) {
        // One written on the background thread (a switch's) lands first.
        try waitForBackgroundManifest()
        let (manifest, listed) = currentManifest(removing: removing, segments: segments)
        try manifest.write(directory: directory)
        manifestSegmentsEnd = listed.upperBound
    }

    /// The MANIFEST `writeManifest` writes, and the segments it lists.
    /// - Complexity: O(resident rooms log resident rooms + sleeping rooms).
    func currentManifest(removing: [UInt64] = [], segments: Range<UInt64>? = nil) -> (Manifest, Range<UInt64>) {
        let first = closedSegments.first ?? background.closing.first?.sequence ?? active.sequence
        let listed = segments ?? (first..<active.sequence + 1)
        // A dropped room's checkpoint stays listed until its tombstone is durable
        // (`reclaimDroppedRooms()`), so that a start in between still finds the file.
        let checkpoints = Self.merge(
            (rooms.values.compactMap { $0.checkpointFile.flatMap(CheckpointFile.sequence(ofFileName:)) }
                + droppedCheckpoints.compactMap(CheckpointFile.sequence(ofFileName:))).sorted(),
            sleep.sortedCheckpoints())
        let pending = checkpointsToRemove.compactMap(CheckpointFile.sequence(ofFileName:))
        let manifest = Manifest(
            nextCheckpoint: nextCheckpointSequence, firstSegment: listed.lowerBound,
            segmentCount: UInt64(listed.count), checkpoints: checkpoints,
            removing: Array(Set(removing + pending)).sorted())
        return (manifest, listed)
    }

    /// Two ascending lists as one. O(a + b).
    static func merge(_ a: [UInt64], _ b: [UInt64]) -> [UInt64] {
        var out: [UInt64] = []
        out.reserveCapacity(a.count + b.count)
        var (i, j) = (0, 0)
        while i < a.count && j < b.count {
            if a[i] <= b[j] {
                out.append(a[i])
                i += 1
            } else {
                out.append(b[j])
                j += 1
            }
        }
        out += a[i...]
        out += b[j...]
        return out
    }

    /// `writeManifest`, except that a full disk is logged and reported (false) instead of
    /// thrown: the caller then leaves the files as the old MANIFEST describes them.
    func writeManifestUnlessFull(segments: Range<UInt64>? = nil) throws(StoreError) -> Bool {
        do {
            try writeManifest(segments: segments)
            return true
        } catch {
            guard case .noSpace = error else { throw error }
            logger.warning("store: no space to rewrite the MANIFEST: \(error); old files stay until it can be rewritten")
            return false
        }
    }

    /// After `writeCheckpoint` calls: lists the new checkpoints, then has the background thread
    /// unlink the ones they replaced (named in the MANIFEST's removing list until that is done,
    /// so a crash between the two is recognised on start). On a full disk the replaced ones stay, listed as removing in
    /// every MANIFEST, until a later call gets the MANIFEST written.
    /// - Returns: whether the MANIFEST was written (false: the disk is full).
    @discardableResult
    func commitCheckpoints(replacing replaced: [String]) throws(StoreError) -> Bool {
        checkpointsToRemove += replaced
        guard try writeManifestUnlessFull() else { return false }
        listedCheckpointsToRemove = checkpointsToRemove.count
        try removeListedCheckpoints()
        return true
    }

    /// Most checkpoint files one background job unlinks. A mass DROP reclaims tens of thousands
    /// of files a second, which took 13-22 s of unlinks a tick on the loop in the churn benchmark
    /// (docs/benchmarks.md); on the background thread they would delay the `everysec` sync and
    /// segment closes queued behind them just as long. One job of at most this many at a time
    /// (~0.2-0.4 s of unlinks on this machine), the next one at the next call or tick.
    static let maxCheckpointUnlinksPerJob = 2048

    /// Has the background thread unlink the next checkpoints the last MANIFEST listed as
    /// removing, unless a job of them is still running. They stay in `checkpointsToRemove`,
    /// listed as removing in every MANIFEST, until done, so a crash meanwhile is recognised at
    /// start. Called after each MANIFEST that lists them and from `maintain`.
    func removeListedCheckpoints() throws(StoreError) {
        guard background.removingCheckpoints.isEmpty, listedCheckpointsToRemove > 0 else { return }
        let names = Array(checkpointsToRemove.prefix(min(listedCheckpointsToRemove, Self.maxCheckpointUnlinksPerJob)))
        let ticket = background.io.submit(.removeFiles(paths: names.map(path), directory: directory))
        background.removingCheckpoints[ticket] = Set(names)
        try absorbBackgroundCompletions()
    }
}
