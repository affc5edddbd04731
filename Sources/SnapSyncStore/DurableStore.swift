internal import Logging
import SnapSyncWire

#if canImport(Glibc)
    internal import Glibc
#endif

/// Rooms that survive restarts and crashes: a write-ahead log shared by all rooms,
/// plus a checkpoint file per room. The format is in docs/persistence.md.
///
/// One log for all rooms, not one per room, because the cost of durability is the fsync, and
/// one file lets every write of a loop pass, whatever its room, share one fdatasync (group
/// commit). Per-room logs would need one fdatasync per room written in the pass. Checkpoints
/// are per room so that a busy room does not make every idle room be rewritten.
///
/// How the daemon drives it, all on the event loop's thread (the type is not thread-safe), as
/// its `RoomStore`:
///
/// 1. `open` once at start: it recovers every room (checkpoint + log replay) and returns them.
/// 2. For each MUTATE/REPLACE, before applying it: `reserve()` (`prepare(room:)`). If it throws
///    `.noSpace`, answer REJECT storage_failure; nothing has changed. The room goes on serving
///    reads.
/// 3. After applying it and encoding its DIFF frame: `append(room:epoch:version:writeID:diffFrame:)`.
///    It only buffers. Hold the write's ACK and DIFF.
/// 4. Once per loop pass, after the pass's writes: `sync()` (`commit()`). It writes the buffered
///    records (one write(2)) and, by the fsync policy, fdatasyncs them (one fdatasync for the
///    pass). Then release the pass's ACKs and DIFFs. If `sync()` throws, exit: never retry.
/// 5. From a timer (about once a second): `maintain(now:)`, which does the `everysec` fsync when
///    the loop is idle, starts new segments, deletes the segments no room needs any more, and
///    returns the rooms due for a checkpoint; the daemon pushes their images to `checkpoint(_:)`.
/// 6. On shutdown: `roomsDueAtClose()`, then `close(checkpointing:)` with those rooms' images:
///    when the log the next start would replay is long, every room written since its
///    checkpoint is checkpointed.
///
/// The slow file work of a segment switch (creating the next segment, the fdatasync of the one
/// closed, unlinking old ones) and the `everysec` fdatasync run on a background thread
/// (`BackgroundIO`, `DurableStore+Background.swift`); the loop decides what is done and when.
package final class DurableStore: RoomStore {
    package let options: StoreOptions
    let logger: Logger

    /// The data directory's lock file, held (flock) for the store's lifetime.
    private let lockFile: PosixFile
    var active: ActiveSegment
    /// Closed segments still needed by some room, oldest first; closed means trimmed and
    /// fdatasynced (a segment whose close is still running is in `background.closing`).
    var closedSegments: [UInt64]
    var rooms: [RoomName: RoomTrack]
    /// Rooms kept on disk only, in their checkpoint (`DurableStore+Sleep.swift`); not in `rooms`.
    var sleep = SleepState()
    var nextCheckpointSequence: UInt64

    /// Records appended since the last `sync()`, framed, ready for one write(2).
    var pending: [UInt8] = []
    private var scratch: [UInt8] = []
    /// Bytes written to the active segment and not covered by an fdatasync done or running.
    var unsynced = false
    /// When the last fdatasync of the log was done (or, `everysec`, handed to the background).
    var lastSync: ContinuousClock.Instant
    /// True while `reserve()` fails for lack of space; logged once on each change.
    private var outOfSpace = false

    /// Counters, for STATS and for tests.
    package internal(set) var statistics = StoreStatistics()
    /// Told how long each fdatasync of the log took (each one `statistics.fsyncs` counts), on
    /// the loop's thread: at once for one done there (`always`, a checkpoint, close), and when
    /// its completion is taken in for one on the background thread (`everysec`, a closed
    /// segment). The daemon's fsync latency histogram.
    package var fsyncObserver: ((Duration) -> Void)?
    /// The clock a checkpoint batch spends its time budget on (`checkpointBatchDuration`,
    /// `evict(_:within:)`): the monotonic clock. Tests drive their own, so that whether a
    /// budget stops a batch does not depend on how fast the disk or the machine is.
    package var batchClock: () -> ContinuousClock.Instant = { .now }
    /// Checkpoints replaced by newer ones and not yet unlinked: named in every MANIFEST's
    /// removing list until they are gone (a full disk can delay the MANIFEST that drops them).
    var checkpointsToRemove: [String] = []
    /// How many of `checkpointsToRemove`, from the first, the last MANIFEST listed as removing:
    /// only those may be unlinked (`removeListedCheckpoints`).
    var listedCheckpointsToRemove = 0
    /// Checkpoints of rooms dropped or expired since the last `reclaimDroppedRooms()`: still
    /// listed in the MANIFEST (a room's checkpoint goes only once its tombstone is durable).
    var droppedCheckpoints: [String] = []
    /// The background thread and the work in flight on it.
    var background: BackgroundState
    /// The segment after the last one the MANIFEST on disk lists: the one segment recovery
    /// takes in unlisted. A full disk can leave the active segment unlisted; no segment after
    /// it is installed until a MANIFEST lists it.
    var manifestSegmentsEnd: UInt64 = 0

    struct ActiveSegment {
        var sequence: UInt64
        var file: PosixFile
        /// Where the next record goes: the end of the written data.
        var end: Int
        /// How far the file's blocks are allocated (its size; the bytes past `end` are zeros).
        var allocated: Int
        var records: Int
        var started: ContinuousClock.Instant
    }

    struct RoomTrack {
        var epoch: UInt64
        /// The version of the room's last logged write (or of its checkpoint).
        var version: UInt64
        var checkpointVersion: UInt64
        var checkpointFile: String?
        /// The oldest segment holding a write newer than the room's checkpoint; nil when the
        /// checkpoint has everything. Segments older than every room's pin can be deleted.
        var pinnedSegment: UInt64?
        /// The write_ids of recent writes with their fingerprints, oldest first, consecutive
        /// versions; at most 2 × historyLimit (trimmed in halves so that appending stays
        /// amortized O(1)). The frames themselves are the daemon's (`RoomImage.diffFrames`):
        /// keeping them here too would double the memory history takes.
        var writeIDs: [(version: UInt64, id: [UInt8], fingerprint: UInt64?)]
        /// The room's TTL in seconds as SET_TTL set it (0: never expires), nil when never set;
        /// `ttlSerial` counts the SET_TTLs (`LifecycleRecord.ttl`).
        var ttlSeconds: UInt64? = nil
        var ttlSerial: UInt64 = 0
    }

    init(
        options: StoreOptions, logger: Logger, lockFile: PosixFile, active: ActiveSegment,
        closedSegments: [UInt64], rooms: [RoomName: RoomTrack], nextCheckpointSequence: UInt64,
        now: ContinuousClock.Instant
    ) {
        self.options = options
        self.logger = logger
        self.lockFile = lockFile
        self.active = active
        self.closedSegments = closedSegments
        self.rooms = rooms
        self.nextCheckpointSequence = nextCheckpointSequence
        self.lastSync = now
        self.background = BackgroundState(io: BackgroundIO(inline: !options.backgroundThread))
    }

    deinit {
        // Without `close()` (a failed start, a test's crash): let queued work finish, join.
        background.io.shutdown()
    }

    var directory: String { options.directory }
    func path(_ name: String) -> String { directory + "/" + name }

    // MARK: - Writes

    /// Makes sure one more write of up to `options.maxDiffFrameBytes` can be logged without
    /// running out of disk: allocates more of the log file when less than that is left ahead
    /// of the pending records. Call it before applying a write.
    ///
    /// - Throws: `.noSpace` when the disk (quota, file-size limit) is full: reject the write
    ///   with storage_failure. Other errors are fatal, among them a failure of background work.
    /// - Complexity: O(1); a posix_fallocate call once per `preallocationBytes` of log.
    package func reserve() throws(StoreError) {
        if let failure = background.failure { throw failure }
        // The first write of a pass (nothing pending) is where a prepared segment takes over.
        if pending.isEmpty && background.next?.installed == true { try switchSegmentIfReady(now: .now) }
        let needed = active.end + pending.count + options.maxWriteRecordBytes
        if needed <= active.allocated {
            return
        }
        let grow = max(options.preallocationBytes, needed - active.allocated)
        do {
            try active.file.allocate(offset: active.allocated, length: grow)
        } catch {
            if case .noSpace = error {
                statistics.rejectedForSpace += 1
                if !outOfSpace {
                    outOfSpace = true
                    logger.error("store: disk full, rejecting writes with storage_failure until space is freed; reads go on", metadata: ["error": "\(error)"])
                }
            }
            throw error
        }
        active.allocated += grow
        if outOfSpace {
            outOfSpace = false
            logger.notice("store: disk space available again, accepting writes")
        }
    }

    /// `RoomStore.prepare(room:)`: `reserve()`.
    package func prepare(room: String) throws(StoreError) {
        try reserve()
    }

    /// Buffers one accepted write's record. Nothing reaches the kernel until `sync()`, so hold
    /// the write's ACK and DIFF until then.
    /// - Complexity: O(size of the DIFF frame): one copy and one CRC pass.
    package func append(_ write: WriteRecord) {
        write.diffFrame.withUnsafeBytes { frame in
            append(
                room: write.room, epoch: write.epoch, version: write.version, writeID: write.writeID, fingerprint: write.fingerprint,
                diffFrame: frame)
        }
    }

    /// `append(_:)` for a DIFF frame the caller owns (the daemon's shared output chunk): the
    /// bytes are copied once, into the pending buffer, and only during the call.
    package func append(
        room: String, epoch: UInt64, version: UInt64, writeID: [UInt8], fingerprint: UInt64?, diffFrame: UnsafeRawBufferPointer
    ) {
        scratch.removeAll(keepingCapacity: true)
        WriteRecord.encodePayload(
            room: room, epoch: epoch, version: version, writeID: writeID, fingerprint: fingerprint,
            diffFrame: diffFrame, into: &scratch)
        RecordFraming.append(payload: scratch, to: &pending)
        active.records += 1
        statistics.recordsAppended += 1
        // Mutated in place through the defaulting subscript: one hash lookup, and no copy of
        // `writeIDs` (a copied track would share its buffer with the dictionary's value, and the
        // append below would then copy up to 2 × historyLimit ids on every write).
        track(
            of: room, epoch: epoch, version: version, writeID: writeID, fingerprint: fingerprint,
            in: &rooms[
                RoomName(room),
                default: RoomTrack(
                    epoch: epoch, version: 0, checkpointVersion: 0,
                    checkpointFile: nil, pinnedSegment: nil, writeIDs: [])])
    }

    private func track(
        of room: String, epoch: UInt64, version: UInt64, writeID: [UInt8], fingerprint: UInt64?, in track: inout RoomTrack
    ) {
        if track.epoch != epoch || (track.version != 0 && version != track.version + 1) {
            // The daemon's room and the log disagree: replay would stop at this record and
            // the daemon would refuse to start. Say so now, loudly, while it can be traced.
            logger.critical("store: write for \(room) at \(epoch)/\(version) does not follow the logged \(track.epoch)/\(track.version)")
        }
        track.epoch = epoch
        track.version = version
        if track.pinnedSegment == nil { track.pinnedSegment = active.sequence }
        if track.writeIDs.last.map({ $0.version + 1 == version }) == false { track.writeIDs.removeAll() }
        track.writeIDs.append((version, writeID, fingerprint))
        if track.writeIDs.count >= 2 * max(options.historyLimit, 1) {
            track.writeIDs.removeFirst(track.writeIDs.count - options.historyLimit)
        }
    }

    /// Writes the records appended since the last call, and fdatasyncs them as the policy says:
    /// `always` every time there is something unsynced, `everysec` when the last fdatasync is
    /// at least a second old, `no` never. Call it once per loop pass, after the pass's writes
    /// and before their ACKs and DIFFs go out.
    ///
    /// `everysec` hands the fdatasync to the background thread and does not wait for it,
    /// unless the previous one has been running for 2 s or more (a slow disk: waiting then
    /// bounds what a machine crash can lose, as Redis does).
    ///
    /// - Returns: whether it fdatasynced (`everysec`: started one).
    /// - Throws: any error is fatal: the records may not be on disk, and must not be
    ///   acknowledged. Exit; do not call again. A failure of earlier background work (a
    ///   segment's fdatasync, an unlink) is thrown here too.
    /// - Complexity: one write(2) of the pending bytes, at most one fdatasync; under `always`,
    ///   in the first pass after a segment switch, a wait for the closed segment's fdatasync.
    @discardableResult
    package func sync(now: ContinuousClock.Instant = .now) throws(StoreError) -> Bool {
        try absorbBackgroundCompletions()
        if options.fsync == .always && !pending.isEmpty {
            // The closed segment must be synced whole before a record of the next one can
            // reach the disk (recovery's rule), so wait for its close before writing.
            try waitForClosingSegments()
        }
        try writePending()
        guard unsynced else { return false }
        switch options.fsync {
        case .always:
            try syncActiveNow(now: now)
            return true
        case .everysec:
            guard now - lastSync >= .seconds(1) else { return false }
            return try requestBackgroundSync(now: now)
        case .no:
            return false
        }
    }

    /// `RoomStore.commit()`: `sync()`.
    package func commit() throws(StoreError) {
        try sync()
    }

    /// True when records are buffered, or written but not yet fdatasynced (also while a
    /// background fdatasync of them is running).
    package var hasUnsyncedWrites: Bool {
        unsynced || !pending.isEmpty || background.syncing != nil || !background.closing.isEmpty
    }

    func writePending() throws(StoreError) {
        guard !pending.isEmpty else { return }
        do {
            try active.file.write(pending, at: active.end)
        } catch {
            // `reserve()` allocated this space; running out here means the filesystem broke
            // that promise (copy-on-write filesystems do). The writes are applied in memory but
            // cannot be made durable, so this is fatal like any other write error.
            if case .noSpace(let p, let e) = error { throw StoreError.io(operation: "write (space was reserved)", path: p, errno: e) }
            throw error
        }
        active.end += pending.count
        if active.end > active.allocated { active.allocated = active.end }
        statistics.bytesWritten += pending.count
        pending.removeAll(keepingCapacity: pending.capacity <= 1 << 20)
        unsynced = true
    }

    /// fdatasync of the active segment on the caller's thread, once all background work is
    /// done (so that every closed segment is synced too): what a checkpoint and `close()` need.
    func fdatasyncActive(now: ContinuousClock.Instant) throws(StoreError) {
        try finishBackgroundWork()
        try syncActiveNow(now: now)
    }

    /// What a checkpoint needs from the log first. Under `always`, every logged write is
    /// durable before the checkpoint that replaces it is written: write and fdatasync what is
    /// not yet (waiting for background work). Under `everysec` and `no`, the log is only
    /// written: an fdatasync here would stall the loop for up to a second of dirty log (200 ms
    /// measured under `no`), and it buys nothing those policies promise: after a machine crash
    /// a checkpoint that is ahead of the log's durable part holds more acknowledged writes of
    /// its room than the log kept, never fewer, and replay skips the log's older records of it.
    func prepareLogForCheckpoint() throws(StoreError) {
        guard hasUnsyncedWrites else { return }
        // As in `sync()`: under `always` a closed segment is synced whole before a record of
        // the next one can reach the disk. A checkpoint (an eviction) can run in the request
        // path right after a segment switch, while the close still runs.
        if options.fsync == .always && !pending.isEmpty { try waitForClosingSegments() }
        try writePending()
        if options.fsync == .always { try fdatasyncActive(now: .now) }
    }

    func syncActiveNow(now: ContinuousClock.Instant) throws(StoreError) {
        let started = ContinuousClock.now
        try active.file.syncData()
        fsyncObserver?(.now - started)
        unsynced = false
        lastSync = now
        statistics.fsyncs += 1
    }

    // MARK: - Checkpoints and segments

    /// Background work, from a timer (about once a second): the `everysec` fdatasync when the
    /// loop is idle; a new segment when the active one is full or older than
    /// `checkpointInterval`; deleting segments no room needs. Returns the rooms that keep old
    /// segments alive, the one pinning the oldest segment first: hand their images to
    /// `checkpoint(_:)`, which writes them until about `checkpointBytesPerCall` bytes are
    /// written, then deletes the segments they covered.
    ///
    /// A segment switch takes several calls when the background thread is in use: the next
    /// segment is prepared off the loop once the active one is half full (or when the switch is
    /// due), installed under its name when the switch is due, and takes over at the next point
    /// where nothing is pending (here, or the next pass's first `reserve()`), where the closed
    /// segment is trimmed; its fdatasync runs off the loop. Checkpoints and deletions wait
    /// until no segment close is running (no room is due meanwhile; see
    /// `prepareLogForCheckpoint()` for the log's state at a checkpoint).
    ///
    /// - Returns: the rooms due for a checkpoint, oldest pin first; empty in the common case.
    /// - Throws: fatal errors only. A full disk while preparing a segment is logged and retried
    ///   on a later call.
    /// - Complexity: O(1) while no closed segment is kept (the common case, every second);
    ///   else O(rooms log rooms).
    @discardableResult
    package func maintain(now: ContinuousClock.Instant) throws(StoreError) -> [String] {
        try sync(now: now)
        // Before any segment can be deleted: a dropped room's checkpoint must go first.
        try reclaimDroppedRooms()
        // The next batch of checkpoint unlinks, when a mass reclaim left some over.
        try removeListedCheckpoints()
        let dataBytes = active.end + pending.count - LogSegment.headerSize
        let due = dataBytes >= options.segmentBytes || (active.records > 0 && now - active.started >= options.checkpointInterval)
        // Ahead of time only when it runs on the thread (inline, it would just be earlier).
        if due || (background.io.isThreaded && dataBytes >= options.segmentBytes / 2) { try prepareNextSegment() }
        // A MANIFEST that a full disk kept from listing the active segment holds the next one
        // back (`installNextSegment()`): retried here, once a second, not at every pass.
        if background.next != nil && manifestSegmentsEnd <= active.sequence && background.writingManifest == nil {
            _ = try writeManifestUnlessFull()
        }
        if due {
            background.switchDue = true
            try installNextSegment()
            try switchSegmentIfReady(now: now)
            try absorbBackgroundCompletions()
        }
        // Only closed segments pin rooms: with none, there is nothing to checkpoint or delete,
        // and the O(rooms) scans below are skipped (the common case, every second).
        guard !closedSegments.isEmpty, background.closing.isEmpty else { return [] }
        let pinned = roomsPinningClosedSegments()
        if pinned.isEmpty { try finishCheckpoints() }
        return pinned
    }

    /// `RoomStore.maintain()`: `maintain(now: .now)`.
    package func maintain() throws(StoreError) -> [String] {
        try maintain(now: .now)
    }

    /// The rooms with a write in a closed segment and no checkpoint since, the one pinning the
    /// oldest segment first: what `maintain` asks the daemon to checkpoint.
    private func roomsPinningClosedSegments() -> [String] {
        rooms.compactMap { name, track -> (String, UInt64)? in
            guard let pin = track.pinnedSegment, pin < active.sequence else { return nil }
            return (name.string, pin)
        }.sorted { $0.1 < $1.1 }.map(\.0)
    }

    /// Checkpoints rooms from `images`, in their order (`maintain`'s due rooms, oldest pin
    /// first), until about `checkpointBytesPerCall` bytes are written or
    /// `checkpointBatchDuration` has passed on `batchClock` (at least one room); the rest of
    /// `images` is not read. The files are written as one batch (`writeCheckpointBatch`: one
    /// syncfs). Then one MANIFEST lists the new checkpoints, the replaced ones are unlinked,
    /// and the closed segments no room needs any more are deleted.
    ///
    /// - Throws: fatal errors only. A full disk stops the checkpoints (logged; the rooms are
    ///   due again at the next `maintain`).
    package func checkpoint(_ images: some Sequence<RoomImage>) throws(StoreError) {
        let batch = try writeCheckpointBatch(
            images, within: options.checkpointBatchDuration, maxBytes: options.checkpointBytesPerCall, purpose: "")
        var replaced: [String] = []
        for staged in batch {
            if let file = staged.file, let old = installCheckpoint(staged.image, file: file, bytes: staged.bytes) { replaced.append(old) }
        }
        // One MANIFEST for the whole batch, then the superseded checkpoints go.
        if !batch.isEmpty || checkpointsToRemove.count > listedCheckpointsToRemove { try commitCheckpoints(replacing: replaced) }
        try deleteUnneededSegments()
    }

    /// What `checkpoint(_:)` does after its checkpoints when there were none to write.
    private func finishCheckpoints() throws(StoreError) {
        // Only when some are not listed yet: those listed are being unlinked (`removeListedCheckpoints`).
        if checkpointsToRemove.count > listedCheckpointsToRemove { try commitCheckpoints(replacing: []) }
        try deleteUnneededSegments()
    }

    /// Writes one room's checkpoint, lists it in the MANIFEST, then removes the room's previous
    /// one. - Returns: the bytes written.
    @discardableResult
    func checkpoint(_ image: RoomImage) throws(StoreError) -> Int {
        let (bytes, old) = try writeCheckpoint(image)
        try commitCheckpoints(replacing: old.map { [$0] } ?? [])
        return bytes
    }

    /// Writes one room's checkpoint file and makes it the room's; the previous one is left on
    /// disk (and in the MANIFEST) until `commitCheckpoints(replacing:)`.
    /// - Returns: the bytes written, and the name of the room's previous checkpoint.
    func writeCheckpoint(_ image: RoomImage) throws(StoreError) -> (bytes: Int, replaced: String?) {
        try prepareLogForCheckpoint()
        let (bytes, sequence) = encodeCheckpoint(image)
        let finalName = CheckpointFile.fileName(sequence)
        try DurableFile.writeWhole(bytes, directory: directory, name: finalName)
        return (bytes.count, installCheckpoint(image, file: finalName, bytes: bytes.count))
    }

    /// The bytes of `image`'s checkpoint file (with the write ids the store logged for its
    /// history), and the sequence number it is to be written under (taken). Call
    /// `prepareLogForCheckpoint()` first.
    /// - Complexity: O(size of the room and its history).
    func encodeCheckpoint(_ image: RoomImage) -> (bytes: [UInt8], sequence: UInt64) {
        let name = image.room
        let track = rooms[RoomName(name)]
        let frames = image.diffFrames.suffix(min(options.historyLimit, Int(clamping: image.version)))
        var ids: [UInt64: (id: [UInt8], fingerprint: UInt64?)] = [:]
        for entry in track?.writeIDs ?? [] where entry.version <= image.version { ids[entry.version] = (entry.id, entry.fingerprint) }
        var history: [WriteRecord] = []
        history.reserveCapacity(frames.count)
        var version = image.version - UInt64(frames.count)
        for frame in frames {
            version += 1
            history.append(
                WriteRecord(
                    room: name, epoch: image.epoch, version: version,
                    writeID: ids[version]?.id ?? [], fingerprint: ids[version]?.fingerprint, diffFrame: frame))
        }
        // The image's chain is before its first frame: moved over the frames not kept, it is the
        // chain before the checkpoint's history.
        let dropped = image.diffFrames.dropLast(frames.count)
        let chain = image.chain.map { dropped.reduce($0) { $0.next(frame: $1) } }
        // The same for the resume base; none when the history is empty (it is the snapshot).
        let base = history.isEmpty ? nil : HistoryBase.advance(image.resolvedBase, over: dropped)
        let bytes = CheckpointFile.encode(
            room: name, epoch: image.epoch, version: image.version,
            snapshot: image.snapshot, history: history,
            ttl: track.flatMap { track in track.ttlSeconds.map { (serial: track.ttlSerial, seconds: $0) } }, chain: chain,
            base: base)
        let sequence = nextCheckpointSequence
        nextCheckpointSequence += 1
        return (bytes, sequence)
    }

    /// Makes `file` (in place, durable) `image`'s room's checkpoint.
    /// - Returns: the name of the room's previous checkpoint.
    func installCheckpoint(_ image: RoomImage, file: String, bytes: Int) -> String? {
        let name = image.room
        var track =
            rooms[RoomName(name)]
            ?? RoomTrack(
                epoch: image.epoch, version: image.version, checkpointVersion: 0,
                checkpointFile: nil, pinnedSegment: nil, writeIDs: [])
        let replaced = track.checkpointFile
        track.checkpointFile = file
        track.checkpointVersion = image.version
        track.epoch = image.epoch
        if image.version >= track.version {
            track.version = image.version
            track.pinnedSegment = nil
        }
        rooms[RoomName(name)] = track
        statistics.checkpoints += 1
        statistics.checkpointBytes += bytes
        logger.debug("store: checkpointed room \(name) at \(image.epoch)/\(image.version) (\(bytes) bytes, \(file))")
        return replaced
    }

    /// Hands the closed segments that no room needs any more (every checkpoint that covers
    /// them is already durable) to the background thread to unlink. A crash before the unlink
    /// leaves them in place, below the MANIFEST's first segment: the next start removes them.
    private func deleteUnneededSegments() throws(StoreError) {
        let oldestPin = rooms.values.compactMap(\.pinnedSegment).min() ?? active.sequence
        let limit = min(oldestPin, active.sequence)
        let doomed = closedSegments.prefix { $0 < limit }
        guard !doomed.isEmpty else { return }
        // Dropped from the MANIFEST before they are unlinked (on the background thread): a
        // segment below its first one is a leftover the next start removes.
        let kept = closedSegments.dropFirst(doomed.count)
        let first = kept.first ?? background.closing.first?.sequence ?? active.sequence
        guard try writeManifestUnlessFull(segments: first..<active.sequence + 1) else { return }
        closedSegments.removeFirst(doomed.count)
        try removeSegments(Array(doomed))
    }

    /// Writes and fdatasyncs what is pending, trims the active segment's preallocated tail and
    /// releases the directory lock. Call it on shutdown, after the last write.
    ///
    /// When the next start would replay at least `options.shutdownCheckpointBytes` of log, it
    /// first checkpoints the rooms of `images` (those `roomsDueAtClose()` named: every room
    /// written since its checkpoint) and deletes the log they cover, so that a clean restart
    /// replays nothing. It waits for the background work first (so every closed segment is
    /// synced), and joins the background thread.
    package func close(checkpointing images: some Sequence<RoomImage>) throws(StoreError) {
        try finishBackgroundWork()
        try writePending()
        try active.file.truncate(to: active.end)
        try fdatasyncActive(now: .now)
        try reclaimDroppedRooms()
        try checkpointForShutdown(images)
        // Evictions since the last tick: listed now, so the next start need not take them in.
        try commitEvictions()
        active.file.close()
        try discardNextSegment()
        background.io.shutdown()
        lockFile.close()
    }

    /// `close(checkpointing:)` with no checkpoint: the next start replays the log.
    package func close() throws(StoreError) {
        try close(checkpointing: [RoomImage]())
    }

    /// The name of the segment appends go to (for tests and logs).
    package var activeSegmentName: String { LogSegment.fileName(active.sequence) }
    /// The log segment files present, oldest first (for tests).
    package var segmentNames: [String] {
        (closedSegments + background.closing.map(\.sequence) + [active.sequence]).map(LogSegment.fileName)
    }
}

/// Counters since open.
package struct StoreStatistics: Sendable, Hashable {
    package var recordsAppended = 0
    package var bytesWritten = 0
    package var fsyncs = 0
    package var checkpoints = 0
    package var checkpointBytes = 0
    package var segmentsDeleted = 0
    /// Checkpoint files unlinked (replaced, or of rooms dropped), on the background thread.
    package var checkpointsDeleted = 0
    package var rejectedForSpace = 0
    /// Tombstones logged (rooms dropped or expired that the store held).
    package var roomsDropped = 0
}

/// Files written whole: temp name, fsync, rename, fsync the directory.
enum DurableFile {
    static func writeWhole(_ bytes: [UInt8], directory: String, name: String) throws(StoreError) {
        let tmp = directory + "/" + name + ".tmp"
        do {
            let file = try PosixFile(path: tmp, flags: O_WRONLY | O_CREAT | O_TRUNC)
            defer { file.close() }
            try file.write(bytes, at: 0)
            try file.syncAll()
        } catch {
            try? Directory.remove(tmp)
            throw error
        }
        try Directory.rename(tmp, directory + "/" + name)
        try Directory.syncEntries(directory)
    }
}

enum LogSegmentWriter {
    static func temporaryPath(directory: String, sequence: UInt64) -> String {
        directory + "/" + LogSegment.fileName(sequence) + ".tmp"
    }

    /// Creates segment `sequence` as `wal-….log.tmp`, header written, space
    /// preallocated, fsynced. - Returns: the open file and how far it is allocated.
    static func createTemporary(
        directory: String, sequence: UInt64,
        preallocate: Int
    ) throws(StoreError) -> (PosixFile, allocated: Int) {
        let tmp = temporaryPath(directory: directory, sequence: sequence)
        let file: PosixFile
        var allocated = LogSegment.headerSize
        do throws(StoreError) {
            file = try PosixFile(path: tmp, flags: O_RDWR | O_CREAT | O_TRUNC)
            try file.write(LogSegment.header(sequence: sequence), at: 0)
            do throws(StoreError) {
                try file.allocate(offset: LogSegment.headerSize, length: preallocate)
                allocated += preallocate
            } catch {
                // A full disk: start anyway; `reserve()` retries and rejects writes meanwhile.
                guard case .noSpace = error else { throw error }
            }
            try file.syncAll()
        } catch {
            try? Directory.remove(tmp)
            throw error
        }
        return (file, allocated)
    }

    /// Renames the temporary file into place (so a segment file always has its header), fsyncs
    /// the directory.
    static func install(directory: String, sequence: UInt64) throws(StoreError) {
        try Directory.rename(
            temporaryPath(directory: directory, sequence: sequence),
            directory + "/" + LogSegment.fileName(sequence))
        try Directory.syncEntries(directory)
    }
}
