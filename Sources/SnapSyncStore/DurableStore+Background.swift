// The loop's side of the background thread (`BackgroundIO`): what it hands over at a segment
// switch, for `everysec`, and for deletions, and what it does when that work finishes.
//
// A segment switch, N → N+1:
// 1. prepare: N+1 is created as `wal-N+1.log.tmp` (header, preallocation, fsync), once N is
//    half full or the switch is due.
// 2. install: when the switch is due (or once N+1 is prepared, if it already was), N+1 is
//    renamed into place and the directory fsynced.
// 3. switch (on the loop, at a point where nothing is pending): N is trimmed to its data
//    (ftruncate, a few microseconds: a kill -9 must never leave N's preallocated zeros before
//    N+1's records, which recovery would read as damage), appends go to N+1, and N's fdatasync
//    and close are handed to the background.
// 4. closed: when that finishes, N joins `closedSegments`; the rooms it pins can then be
//    checkpointed (on the loop) and, once no room needs it, it is handed back to be unlinked.
//
// Ordering, which recovery relies on (a closed segment is synced whole before the next one
// holds a durable record): one FIFO thread, so N's close finishes before any later
// `everysec` fdatasync of N+1; under `always` the loop waits for N's close before it
// writes N+1's first records (the only wait left at a switch: a trim's fdatasync, one journal
// commit). A checkpoint waits for everything in flight (`fdatasyncActive`), and the
// maintenance does not checkpoint while a close is running.
//
// Errors: a failed job is fatal (as the same call on the loop was): it is kept in
// `background.failure`, and `reserve()` (so the write is rejected with storage_failure),
// `sync()` and `maintain()` throw it from then on. The exception is a full disk while
// preparing a segment: logged, and the preparation is asked for again at the next maintenance.

internal import Logging

/// The background work in flight, and what it produced.
struct BackgroundState {
    let io: BackgroundIO
    /// The next segment, prepared (and maybe installed) ahead of the switch.
    var next: PreparedSegment?
    var preparing = false
    var installing = false
    /// The maintenance found the switch due: the prepared segment is installed as soon as it
    /// is ready, without waiting for the next tick.
    var switchDue = false
    /// Segments whose trim and fdatasync are running, oldest first.
    var closing: [(sequence: UInt64, ticket: UInt64)] = []
    /// The `everysec` fdatasync running, and when it was asked for.
    var syncing: (ticket: UInt64, started: ContinuousClock.Instant)?
    /// Segment deletions running.
    var removing: [(ticket: UInt64, count: Int)] = []
    /// The MANIFEST of a switch being written (`writeManifestInBackground`): its ticket, and
    /// the segments it lists up to.
    var writingManifest: (ticket: UInt64, segmentsEnd: UInt64)?
    /// Checkpoint deletions running (`commitCheckpoints`), by ticket: their names stay in
    /// `checkpointsToRemove`, listed as removing in every MANIFEST, until the unlinks are done.
    var removingCheckpoints: [UInt64: Set<String>] = [:]
    /// The first failure of a job; fatal.
    var failure: StoreError?
    /// True while preparing a segment fails for lack of space (logged once on each change).
    var preparingOutOfSpace = false

    init(io: BackgroundIO) { self.io = io }
}

struct PreparedSegment {
    var sequence: UInt64
    var file: PosixFile
    var allocated: Int
    /// Renamed to its real name (step 2).
    var installed: Bool
}

extension DurableStore {
    /// Handles the jobs finished since the last call. Throws the first failure (also one found
    /// earlier): fatal.
    /// - Complexity: one uncontended mutex lock when nothing finished (it runs once per pass).
    func absorbBackgroundCompletions() throws(StoreError) {
        for completion in background.io.takeCompletions() {
            absorb(completion)
        }
        if let failure = background.failure { throw failure }
        if background.switchDue { try installNextSegment() }
    }

    private func absorb(_ completion: BackgroundCompletion) {
        switch (completion.job, completion.result) {
        case (.prepareSegment(_, let sequence, _), .success(.prepared(let fd, let allocated))):
            background.preparing = false
            let file = PosixFile(adopting: fd, path: LogSegmentWriter.temporaryPath(directory: directory, sequence: sequence))
            background.next = PreparedSegment(sequence: sequence, file: file, allocated: allocated, installed: false)
            if background.preparingOutOfSpace {
                background.preparingOutOfSpace = false
                logger.notice("store: prepared \(LogSegment.fileName(sequence)) after a full disk")
            }
        case (.prepareSegment, .failure(let error)) where !error.isFatal:
            background.preparing = false
            if !background.preparingOutOfSpace {
                background.preparingOutOfSpace = true
                logger.warning("store: cannot start a new log segment: \(error); will retry")
            }
        case (.installSegment(_, let sequence), .success):
            background.installing = false
            background.next?.installed = true
            background.next?.file.path = path(LogSegment.fileName(sequence))
        case (.closeSegment, .success):
            let closed = background.closing.removeFirst()
            closedSegments.append(closed.sequence)
            statistics.fsyncs += 1
            fsyncObserver?(completion.elapsed)
        case (.syncData, .success):
            background.syncing = nil
            statistics.fsyncs += 1
            fsyncObserver?(completion.elapsed)
        case (.removeFiles(let paths, _), .success) where background.removingCheckpoints[completion.ticket] != nil:
            let names = background.removingCheckpoints.removeValue(forKey: completion.ticket) ?? []
            checkpointsToRemove.removeAll { names.contains($0) }
            listedCheckpointsToRemove -= names.count
            statistics.checkpointsDeleted += paths.count
        case (.writeManifest(_, _, let segmentsEnd), .success):
            background.writingManifest = nil
            manifestSegmentsEnd = max(manifestSegmentsEnd, segmentsEnd)
        case (.writeManifest, .failure(let error)) where !error.isFatal:
            // A full disk: the active segment stays the one unlisted segment, the next is not
            // installed, and `maintain` writes the MANIFEST again once a second.
            background.writingManifest = nil
            logger.warning("store: no space to rewrite the MANIFEST: \(error); old files stay until it can be rewritten")
        case (.removeFiles(let paths, _), .success):
            background.removing.removeFirst()
            statistics.segmentsDeleted += paths.count
            logger.info("store: deleted \(paths.count) log segment(s) covered by checkpoints")
        case (_, .failure(let error)):
            logger.critical("store: background \(completion.job) failed: \(error)")
            if background.failure == nil { background.failure = error }
        case (_, .success):
            logger.critical("store: background \(completion.job) gave an unexpected result")
        }
    }

    /// Waits for every job in flight and handles its completion (a checkpoint, `close()`).
    func finishBackgroundWork() throws(StoreError) {
        background.io.waitForAll()
        try absorbBackgroundCompletions()
    }

    /// Under `always`, before the first write to a new segment: the closed one must be trimmed
    /// and synced first.
    func waitForClosingSegments() throws(StoreError) {
        guard let last = background.closing.last else { return }
        background.io.wait(for: last.ticket)
        try absorbBackgroundCompletions()
    }

    /// Step 1: asks for the next segment, unless it is prepared or being prepared.
    func prepareNextSegment() throws(StoreError) {
        guard background.next == nil, !background.preparing else { return }
        background.preparing = true
        background.io.submit(
            .prepareSegment(
                directory: directory, sequence: active.sequence + 1,
                preallocate: options.preallocationBytes))
        try absorbBackgroundCompletions()
    }

    /// Step 2: renames the prepared segment into place, once, and only while the MANIFEST lists
    /// the active segment: recovery takes in one unlisted segment after the last listed, never
    /// two (a full disk can delay the MANIFEST of a switch; `maintain` retries it).
    func installNextSegment() throws(StoreError) {
        guard let next = background.next, !next.installed, !background.installing,
            manifestSegmentsEnd > active.sequence
        else { return }
        background.installing = true
        background.io.submit(.installSegment(directory: directory, sequence: next.sequence))
        try absorbBackgroundCompletions()
    }

    /// Step 3: when the next segment is installed and nothing is pending, the active one is
    /// trimmed, appends move to the next, and the old one is handed over to be synced and
    /// closed. Not while a deletion runs, so that an `always` pass waiting for the close does
    /// not wait behind an unlink.
    /// - Returns: whether it switched.
    /// - Throws: a failed ftruncate: fatal.
    @discardableResult
    func switchSegmentIfReady(now: ContinuousClock.Instant) throws(StoreError) -> Bool {
        guard pending.isEmpty, let next = background.next, next.installed, background.removing.isEmpty else {
            return false
        }
        let old = active
        try old.file.truncate(to: old.end)
        background.next = nil
        background.switchDue = false
        let ticket = background.io.submit(.closeSegment(fd: old.file.release(), path: old.file.path))
        background.closing.append((old.sequence, ticket))
        active = ActiveSegment(
            sequence: next.sequence, file: next.file, end: LogSegment.headerSize,
            allocated: next.allocated, records: 0, started: now)
        // What was unsynced is the old segment's, and its close syncs it.
        unsynced = false
        logger.info("store: started log segment \(LogSegment.fileName(next.sequence)) after \(old.records) records in \(LogSegment.fileName(old.sequence))")
        // Listed now that it holds records' place, by a MANIFEST written on the background
        // thread: its two fsyncs (about 60 ms on this machine's disk) and its size (O(checkpoints
        // listed), 2.9 MB with a million sleeping rooms) stay off the loop, which may be in a
        // write's request path here (`reserve()`). Until it is durable, the new segment is the
        // one unlisted segment recovery takes in (the one right after the last listed), and no
        // segment after it is installed (`installNextSegment` waits for `manifestSegmentsEnd`),
        // so there is never a second. On a full disk it is listed by a later MANIFEST.
        try writeManifestInBackground()
        return true
    }

    /// Hands the MANIFEST of the store's state as of now to the background thread, whose FIFO
    /// order puts it after the jobs already queued; a MANIFEST written on the loop afterwards
    /// waits for it first (`writeManifest`), so an older one never replaces a newer one.
    /// - Complexity: O(checkpoints listed) to encode, on the loop; the writing and fsyncs on the
    ///   thread.
    func writeManifestInBackground() throws(StoreError) {
        try waitForBackgroundManifest()
        let (manifest, listed) = currentManifest()
        let ticket = background.io.submit(.writeManifest(bytes: manifest.encode(), directory: directory, segmentsEnd: listed.upperBound))
        background.writingManifest = (ticket, listed.upperBound)
        try absorbBackgroundCompletions()
    }

    /// Waits for a MANIFEST being written on the background thread, if one is, and takes in
    /// its completion: before another MANIFEST is written.
    func waitForBackgroundManifest() throws(StoreError) {
        guard let writing = background.writingManifest else { return }
        background.io.wait(for: writing.ticket)
        try absorbBackgroundCompletions()
    }

    /// `everysec`: hands the due fdatasync of the active segment to the background thread.
    /// One at a time; one that has been running for 2 s or more is waited for.
    /// - Returns: whether a new one was started.
    func requestBackgroundSync(now: ContinuousClock.Instant) throws(StoreError) -> Bool {
        if let running = background.syncing {
            guard now - running.started >= .seconds(2) else { return false }
            background.io.wait(for: running.ticket)
            try absorbBackgroundCompletions()
        }
        let ticket = background.io.submit(.syncData(fd: active.file.fd, path: active.file.path))
        background.syncing = (ticket, now)
        unsynced = false
        lastSync = now
        try absorbBackgroundCompletions()
        return true
    }

    /// Step 4's end: unlinks closed segments that no room needs (the caller decided which,
    /// after making the checkpoints that cover them durable).
    func removeSegments(_ sequences: [UInt64]) throws(StoreError) {
        guard !sequences.isEmpty else { return }
        let ticket = background.io.submit(
            .removeFiles(
                paths: sequences.map { path(LogSegment.fileName($0)) },
                directory: directory))
        background.removing.append((ticket, sequences.count))
        try absorbBackgroundCompletions()
    }

    /// On close: the prepared segment that never took over is removed (a `.tmp` would be
    /// removed at the next start anyway; an installed one would be an empty segment).
    func discardNextSegment() throws(StoreError) {
        guard let next = background.next else { return }
        background.next = nil
        next.file.close()
        if next.installed {
            try Directory.remove(path(LogSegment.fileName(next.sequence)))
            try Directory.syncEntries(directory)
        } else {
            try Directory.remove(LogSegmentWriter.temporaryPath(directory: directory, sequence: next.sequence))
        }
    }

    // MARK: - For tests

    /// Starts the next segment now, whatever the active one holds: prepare, install and switch,
    /// each waited for.
    func switchSegmentNow(now: ContinuousClock.Instant = .now) throws(StoreError) {
        try sync(now: now)
        try prepareNextSegment()
        try finishBackgroundWork()
        background.switchDue = true
        try installNextSegment()
        try finishBackgroundWork()
        try switchSegmentIfReady(now: now)
        try finishBackgroundWork()
    }

    /// Makes later background jobs fail with the error `fault` returns for them.
    func injectBackgroundFault(_ fault: (@Sendable (BackgroundJob) -> StoreError?)?) {
        background.io.injectFault(fault)
    }

    /// Whether background work runs on its own thread.
    var usesBackgroundThread: Bool { background.io.isThreaded }
}
