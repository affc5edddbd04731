internal import Logging
import SnapSyncWire

#if canImport(Glibc)
    internal import Glibc
#endif

// A clean shutdown leaves nothing to replay: when the log the next start would read is long,
// every room written since its checkpoint is checkpointed and the log deleted.

extension DurableStore {
    /// Bytes of log the next start would replay: the closed segments from the oldest one a room
    /// still needs, and the active segment's records.
    func replayTailBytes() throws(StoreError) -> Int {
        guard let oldestPin = rooms.values.compactMap(\.pinnedSegment).min() else { return 0 }
        var total = active.end - LogSegment.headerSize
        for sequence in closedSegments where sequence >= oldestPin {
            let file = try PosixFile(path: path(LogSegment.fileName(sequence)), flags: O_RDONLY)
            total += try file.size() - LogSegment.headerSize
            file.close()
        }
        return total
    }

    /// The rooms `close(checkpointing:)` checkpoints, by name: when the log the next start
    /// would replay is at least `options.shutdownCheckpointBytes`, every room written since its
    /// checkpoint; else none (replay is quick then: it costs O(bytes of log), and a restart is
    /// not worth a rewrite of every room touched). Call after the last write; it writes what is
    /// pending and waits for the background work, so that the log's length is known.
    package func roomsDueAtClose() throws(StoreError) -> [String] {
        try finishBackgroundWork()
        try writePending()
        let tail = try replayTailBytes()
        guard tail > 0, tail >= options.shutdownCheckpointBytes else { return [] }
        return rooms.filter { $0.value.pinnedSegment != nil }.map(\.key.string).sorted()
    }

    /// Called by `close(checkpointing:)` once the log is synced and trimmed.
    func checkpointForShutdown(_ images: some Sequence<RoomImage>) throws(StoreError) {
        let tail = try replayTailBytes()
        guard tail > 0 else { return }
        guard tail >= options.shutdownCheckpointBytes else {
            logger.info("store: \(tail) bytes of log to replay on the next start (under \(options.shutdownCheckpointBytes)): no checkpoint at shutdown")
            return
        }
        var replaced: [String] = []
        var bytes = 0
        var checkpointed = 0
        for image in images {
            do {
                let (written, old) = try writeCheckpoint(image)
                bytes += written
                checkpointed += 1
                if let old { replaced.append(old) }
            } catch {
                guard case .noSpace = error else { throw error }
                logger.warning("store: no space to checkpoint room \(image.room) at shutdown: \(error); the next start replays the log instead")
                break
            }
        }
        try commitCheckpoints(replacing: replaced)
        // Every segment below the oldest pin left (all of them, the active one included, when
        // every room was checkpointed) is covered: unlisted first, then unlinked.
        let keepFrom = rooms.values.compactMap(\.pinnedSegment).min() ?? active.sequence + 1
        let doomed = (closedSegments + [active.sequence]).filter { $0 < keepFrom }
        if !doomed.isEmpty {
            // With the active segment gone, the MANIFEST lists no segment; the next start
            // begins with the one after it.
            let kept = closedSegments.filter { $0 >= keepFrom }
            let listed =
                keepFrom > active.sequence
                ? active.sequence + 1..<active.sequence + 1
                : (kept.first ?? active.sequence)..<active.sequence + 1
            guard try writeManifestUnlessFull(segments: listed) else { return }
            closedSegments = kept
            for sequence in doomed { try Directory.remove(path(LogSegment.fileName(sequence))) }
            try Directory.syncEntries(directory)
            statistics.segmentsDeleted += doomed.count
        }
        logger.info(
            "store: checkpointed \(checkpointed) room(s) at shutdown (\(bytes) bytes) instead of leaving \(tail) bytes of log to replay; deleted \(doomed.count) log segment(s)"
        )
    }
}
