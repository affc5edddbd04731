package import Logging
internal import SnapSyncModel
internal import SnapSyncWire

#if canImport(Glibc)
    internal import Glibc
#endif

// Start-up: lock the directory, load checkpoints, replay the log over them, cut a torn tail,
// refuse damage that a crash cannot explain.
//
// What a crash can leave, and so what is repaired silently (with a log line):
// - `*.tmp` files: a checkpoint or segment that was never renamed into place. Removed.
// - The end of the newest segment: a record cut short (past the end of the file) or with
//   unwritten, zero sectors (TornWrite.swift), or the zeros of preallocated space. Everything
//   from the first bad record on is cut off, but only when no good record follows it anywhere:
//   appends are sequential, so a crash can only ever damage the very end.
// - Files between their creation or removal and the MANIFEST update (ManifestAudit.swift):
//   taken in, or removed.
// - Two checkpoints of one room (a crash between writing the new one and deleting the old):
//   the older is removed.
// Anything else — a bad record with good ones after it, a last record whole in the file with a
// bad checksum, a damaged checkpoint or MANIFEST, a missing or foreign file, a segment header
// that does not check, a gap in a room's versions — is corruption: the store refuses to open,
// with the file, the byte offset and what is wrong, and changes nothing.

extension DurableStore {
    /// Opens (creating if needed) the data directory and recovers every room from it.
    ///
    /// - Returns: the store, ready for writes to a new log segment, and the rooms, each at the
    ///   epoch and version it had when its last write was logged.
    /// - Throws: `.locked`, `.badDirectory`, `.corrupt` or an I/O error: the daemon must not start.
    package static func open(
        options: StoreOptions, logger: Logger, now: ContinuousClock.Instant = .now,
        progress: ((RecoveryProgress) -> Void)? = nil
    ) throws(StoreError) -> (DurableStore, [RecoveredRoom]) {
        try open(options: options, logger: logger, now: now, progress: progress, segmentInstalled: nil)
    }

    /// `open`, calling `segmentInstalled` once the new active segment is in place under its
    /// name (tests: a crash at that point).
    static func open(
        options: StoreOptions, logger: Logger, now: ContinuousClock.Instant = .now,
        progress: ((RecoveryProgress) -> Void)?,
        segmentInstalled: (() -> Void)?
    ) throws(StoreError) -> (DurableStore, [RecoveredRoom]) {
        let started = ContinuousClock.now
        let dir = options.directory
        try Directory.create(dir)
        guard Directory.isWritable(dir) else {
            throw StoreError.badDirectory(path: dir, reason: "it is not writable by this user")
        }
        let lock = try PosixFile(path: dir + "/LOCK", flags: O_RDWR | O_CREAT)
        // Retried for up to a second: a process that just let go of the lock may still share it
        // for a moment with a child between fork and exec (flock belongs to the open file, and
        // O_CLOEXEC only drops it at exec), e.g. a daemon being restarted.
        var locked = try lock.tryLock()
        for _ in 0..<50 where !locked {
            usleep(20_000)
            locked = try lock.tryLock()
        }
        guard locked else { throw StoreError.locked(path: dir) }
        // SIGXFSZ would kill the daemon when a write passes RLIMIT_FSIZE; ignored, the write
        // fails with EFBIG instead and is answered like a full disk.
        signal(SIGXFSZ, SIG_IGN)

        var names = try Directory.list(dir)
        var removedTemp = false
        for name in names where name.hasSuffix(".tmp") {
            logger.notice("store: removing \(name), left unfinished by a crash")
            try Directory.remove(dir + "/" + name)
            removedTemp = true
        }
        if removedTemp { try Directory.syncEntries(dir) }
        names.removeAll { $0.hasSuffix(".tmp") }

        let manifest = try Manifest.read(directory: dir)
        let audit = try ManifestAudit.check(names: names, manifest: manifest, directory: dir, logger: logger)
        var recovery = Recovery(options: options, logger: logger, progress: progress)
        recovery.nextCheckpointSequence = audit.nextCheckpoint
        let loaded = try recovery.loadCheckpoints(audit.checkpoints)
        try recovery.replay(segments: audit.segments)
        try recovery.throwFirstDoubt()
        // Checkpoints of dropped rooms go like superseded ones: unlisted, then unlinked.
        let superseded = loaded + recovery.droppedCheckpoints

        let (file, allocated) = try LogSegmentWriter.createTemporary(
            directory: dir, sequence: audit.nextSegment,
            preallocate: options.preallocationBytes)
        let active = ActiveSegment(
            sequence: audit.nextSegment, file: file, end: LogSegment.headerSize,
            allocated: allocated, records: 0, started: now)
        let store = DurableStore(
            options: options, logger: logger, lockFile: lock, active: active,
            closedSegments: audit.segments, rooms: recovery.tracks(),
            nextCheckpointSequence: recovery.nextCheckpointSequence, now: now)
        store.sleep = SleepState(rooms: recovery.asleep, ttls: recovery.asleepTTLs)
        // The segments taken in are listed before the new one is installed: recovery takes in
        // one unlisted segment after the last listed, never two, and a segment this start took
        // in unlisted plus the new one would be two after a crash here.
        let removing = superseded.map { $0.sequence }
        try store.writeManifest(removing: removing, segments: (audit.segments.first ?? audit.nextSegment)..<audit.nextSegment)
        try LogSegmentWriter.install(directory: dir, sequence: audit.nextSegment)
        file.path = dir + "/" + LogSegment.fileName(audit.nextSegment)
        segmentInstalled?()
        // The new MANIFEST first (it no longer lists them), then the unlinks: a crash between
        // leaves files the next start recognises as leftovers.
        try store.writeManifest(removing: removing)
        let leftovers = audit.leftovers + superseded.map { $0.name }
        for name in leftovers { try Directory.remove(dir + "/" + name) }
        if !leftovers.isEmpty { try Directory.syncEntries(dir) }
        let rooms = recovery.recoveredRooms()
        let versions = rooms.reduce(0) { $0 + Int($1.version) }
        let elapsed = ContinuousClock.now - started
        let ms = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        logger.info(
            "store: opened \(dir) (fsync \(options.fsync)): \(rooms.count) room(s), \(recovery.checkpointsLoaded) checkpoint(s), \(recovery.recordsReplayed) write(s) replayed from \(audit.segments.count) segment(s), \(versions) version(s) in all, in \(ms) ms\(recovery.asleep.isEmpty ? "" : "; \(recovery.asleep.count) room(s) left asleep")"
        )
        return (store, rooms)
    }
}

/// The state of a recovery in progress.
struct Recovery {
    let options: StoreOptions
    let logger: Logger

    /// A room as recovery rebuilds it: the state so far, and what the store will track of it.
    struct RoomState {
        var epoch: UInt64
        var version: UInt64
        var snapshot: RoomSnapshot
        var history: [WriteRecord]
        var checkpointFile: String?
        var checkpointVersion: UInt64
        var pinnedSegment: UInt64?
        /// The TTL of the room's latest SET_TTL (0: never), and that SET_TTL's serial.
        var ttlSeconds: UInt64? = nil
        var ttlSerial: UInt64 = 0
        /// The room's chain before `history.first` (at `version - history.count`), at `version`
        /// when `history` is empty; nil when unknown (docs/persistence.md, "Room chains").
        var chain: RoomChain? = nil
        /// The room's resume base: its state before `history.first`, like `chain`
        /// (`HistoryBase`); nil when not kept (`StoreOptions.keepsResumeBases`) or not known.
        var base: RoomSnapshot? = nil
    }

    var rooms: [RoomName: RoomState] = [:]
    /// Records that do not follow their room's state, held back until the end of replay
    /// because a later tombstone may void their room (Recovery+Lifecycle.swift).
    var doubts: [Doubt] = []
    /// Checkpoints of rooms a tombstone voided: removed at start, once unlisted.
    var droppedCheckpoints: [(name: String, sequence: UInt64)] = []
    /// Rooms left asleep (`StoreOptions.sleepingRooms`, Recovery+Sleep.swift): in their
    /// checkpoint, not in `rooms`, unless the log writes them after it.
    var asleep: [RoomName: SleepingRoom] = [:]
    /// The TTLs of the rooms left asleep that have one (`SleepState.ttls`).
    var asleepTTLs: [RoomName: RoomTTL] = [:]
    var nextCheckpointSequence: UInt64 = 1
    var checkpointsLoaded = 0
    var recordsReplayed = 0
    /// Told after each checkpoint and every `progressInterval` records (the daemon extends
    /// systemd's start timeout from it).
    let progress: ((RecoveryProgress) -> Void)?
    static let progressInterval = 4096

    init(options: StoreOptions, logger: Logger, progress: ((RecoveryProgress) -> Void)? = nil) {
        self.options = options
        self.logger = logger
        self.progress = progress
    }

    private func reportProgress() {
        progress?(RecoveryProgress(checkpointsLoaded: checkpointsLoaded, recordsReplayed: recordsReplayed))
    }

    var directory: String { options.directory }

    /// Reads the checkpoint files, oldest first; when a room has two (a crash between writing
    /// the new one and removing the old), keeps the newer.
    /// - Returns: the checkpoints superseded that way, to be removed once the MANIFEST no longer
    ///   lists them.
    mutating func loadCheckpoints(_ files: [(name: String, sequence: UInt64)]) throws(StoreError) -> [(name: String, sequence: UInt64)] {
        var superseded: [(name: String, sequence: UInt64)] = []
        for (name, sequence) in files.sorted(by: { $0.sequence < $1.sequence }) {
            nextCheckpointSequence = max(nextCheckpointSequence, sequence + 1)
            let path = directory + "/" + name
            let file = try PosixFile(path: path, flags: O_RDONLY)
            let bytes = try file.readAll()
            file.close()
            if options.sleepingRooms {
                try loadAsleep(bytes, name: name, sequence: sequence, path: path, superseded: &superseded)
                continue
            }
            let checkpoint = try CheckpointFile.decode(bytes, path: path)
            if let existing = rooms[RoomName(checkpoint.room)] {
                // Later sequence numbers are newer checkpoints of the same room.
                if existing.epoch == checkpoint.epoch && existing.version > checkpoint.version {
                    superseded.append((name: name, sequence: sequence))
                    continue
                }
                if let old = existing.checkpointFile, let oldSequence = CheckpointFile.sequence(ofFileName: old) {
                    superseded.append((name: old, sequence: oldSequence))
                }
                checkpointsLoaded -= 1
            }
            rooms[RoomName(checkpoint.room)] = RoomState(
                epoch: checkpoint.epoch, version: checkpoint.version,
                snapshot: checkpoint.snapshot, history: checkpoint.history,
                checkpointFile: name, checkpointVersion: checkpoint.version,
                pinnedSegment: nil, ttlSeconds: checkpoint.ttl?.seconds, ttlSerial: checkpoint.ttl?.serial ?? 0,
                chain: HistoryChain.beforeHistory(of: checkpoint), base: resumeBase(of: checkpoint))
            checkpointsLoaded += 1
            reportProgress()
        }
        for (name, _) in superseded {
            logger.notice("store: removing \(name), superseded by a newer checkpoint of the same room")
        }
        return superseded
    }

    /// Replays every segment, oldest first.
    mutating func replay(segments: [UInt64]) throws(StoreError) {
        // Read them all first: the check "is anything good after the damage?" looks ahead.
        var contents: [(UInt64, String, [UInt8])] = []
        for sequence in segments {
            let path = directory + "/" + LogSegment.fileName(sequence)
            let file = try PosixFile(path: path, flags: O_RDONLY)
            let bytes = try file.readAll()
            file.close()
            if let problem = LogSegment.checkHeader(bytes, sequence: sequence) {
                throw StoreError.corrupt(path: path, offset: 0, reason: problem + " (segments are created whole and renamed into place, so this is damage)")
            }
            contents.append((sequence, path, bytes))
        }
        let maxPayload = options.maxWritePayloadBytes
        for index in contents.indices {
            let (sequence, path, bytes) = contents[index]
            var offset = LogSegment.headerSize
            var stop: (offset: Int, why: String?)? = nil
            while stop == nil {
                switch RecordFraming.parse(bytes, at: offset, end: bytes.count, maxPayload: max(maxPayload, Int(UInt32.max) >> 1)) {
                case .record(let payload, let next):
                    try apply(bytes, payload: payload, path: path, offset: offset, segment: sequence)
                    offset = next
                case .end:
                    stop = (offset, nil)
                case .damaged(let why):
                    stop = (offset, why)
                }
            }
            guard let (end, why) = stop, end < bytes.count else { continue }
            // Every good record has been read by now (a tail is cut only when none follows):
            // a record still in doubt is damage, reported before anything is cut.
            try throwFirstDoubt()
            // Something other than a clean end: a torn tail if nothing good follows it.
            if let good = RecordFraming.nextGoodRecord(bytes, after: end, end: bytes.count, maxPayload: Int(UInt32.max) >> 1) {
                throw StoreError.corrupt(
                    path: path, offset: end,
                    reason:
                        "\(why ?? "zero bytes where a record should be"), yet a good record follows at byte \(good): this is damage in the middle of the log, not an unfinished write, so the daemon will not start (restore the file from a backup, or move it aside to start without the writes in and after it)"
                )
            }
            if let later = contents[(index + 1)...].first(where: { Self.hasRecords($0.2) }) {
                throw StoreError.corrupt(
                    path: path, offset: end,
                    reason:
                        "\(why ?? "zero bytes where a record should be"), yet the later segment \(later.1) holds records: a closed segment is synced whole before the next starts, so this is damage, and the daemon will not start"
                )
            }
            // What the bytes from `end` on are, hence whether they are kept aside and what is said.
            let name = LogSegment.fileName(sequence)
            let neverWritten = why != nil && TornWrite.isNeverWritten(bytes, at: end)
            let damage: String? =
                if why != nil, !neverWritten, let notTorn = TornWrite.whyNotTorn(bytes, at: end) {
                    "\(why ?? ""): \(notTorn). A crash leaves an unfinished write short of the end of the file or with unwritten (zero) sectors; this record was complete on disk, so it may have been acknowledged, and was damaged afterwards"
                } else { nil }
            if let damage, !options.repairsDamagedTail {
                throw StoreError.corrupt(
                    path: path, offset: end,
                    reason:
                        "\(damage). The daemon will not start: `snapsyncd repair \(directory)` saves the bytes from byte \(end) on aside and truncates the segment there, losing this write (or restore the file from a backup)"
                )
            }
            let savedAs = damage != nil || neverWritten ? try Self.saveAside(bytes, from: end, of: name, in: directory) : nil
            let nonZero = !RecordFraming.isAllZero(bytes, from: end, to: bytes.count)
            let file = try PosixFile(path: path, flags: O_RDWR)
            try file.truncate(to: end)
            try file.syncData()
            file.close()
            if let damage {
                logger.warning(
                    "store: repair: \(name) at byte \(end): \(damage). The \(bytes.count - end) bytes from there were saved in \(savedAs ?? "") and the segment truncated: this write is lost"
                )
            } else if neverWritten {
                logger.warning(
                    "store: \(name): the bytes after the last record at byte \(end) are not a record the log wrote (\(why ?? "")): space it never wrote, damaged. Trimmed; they were saved in \(savedAs ?? "")"
                )
            } else if nonZero {
                logger.warning(
                    "store: \(name): cut off a torn tail of \(bytes.count - end) bytes at byte \(end) (\(why ?? "a partly written record")): the last write before a crash was never completed, so it was never acknowledged"
                )
            } else {
                logger.info(
                    "store: \(name): trimmed \(bytes.count - end) zero bytes after the last record at byte \(end) (preallocated space, or the start of a write cut short)"
                )
            }
        }
    }

    /// Writes the non-zero part of `bytes[offset...]` (a segment's tail about to be cut) to
    /// `damaged-SEGMENT-at-OFFSET` in the data directory, for whoever investigates; recovery
    /// ignores such files. Returns the file's name.
    static func saveAside(_ bytes: [UInt8], from offset: Int, of segment: String, in directory: String) throws(StoreError) -> String {
        var end = bytes.count
        while end > offset && bytes[end - 1] == 0 { end -= 1 }
        let name = "damaged-\(segment)-at-\(offset)"
        let file = try PosixFile(path: directory + "/" + name, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
        try file.write(Array(bytes[offset..<max(end, offset)]), at: 0)
        try file.syncData()
        file.close()
        try Directory.syncEntries(directory)
        return name
    }

    static func hasRecords(_ bytes: [UInt8]) -> Bool {
        if case .record = RecordFraming.parse(bytes, at: LogSegment.headerSize, end: bytes.count, maxPayload: Int(UInt32.max) >> 1) {
            return true
        }
        return RecordFraming.nextGoodRecord(bytes, after: LogSegment.headerSize, end: bytes.count, maxPayload: Int(UInt32.max) >> 1) != nil
    }

    /// Replays one record over its room, in place.
    /// - Complexity: O(size of the record + the changes it makes): the room's snapshot is
    ///   mutated where it lies in `rooms`, never copied (a copy of a room per replayed write
    ///   made recovery O(room size × writes)).
    private mutating func apply(
        _ bytes: [UInt8], payload: Range<Int>, path: String, offset: Int,
        segment: UInt64
    ) throws(StoreError) {
        func corrupt(_ reason: String) -> StoreError {
            .corrupt(path: path, offset: offset, reason: reason + "; the daemon will not start")
        }
        switch LifecycleRecord.kind(of: bytes, payload: payload) {
        case .tombstone, .ttl:
            let record: LifecycleRecord
            do { record = try LifecycleRecord(payload: bytes, range: payload) } catch {
                throw corrupt("a record with a good checksum does not decode: \(error.what)")
            }
            try apply(record, segment: segment, corrupt: corrupt)
            return
        default:
            break
        }
        let write: WriteRecord
        do { write = try WriteRecord(payload: bytes, range: payload) } catch {
            throw corrupt("a record with a good checksum does not decode: \(error.what)")
        }
        // A record of an incarnation already in doubt waits for its tombstone like the first.
        if isInDoubt(room: write.room, epoch: write.epoch) { return }
        if try wakeForReplay(write) { return }
        let (epoch, version) = rooms[RoomName(write.room)].map { ($0.epoch, $0.version) } ?? (write.epoch, 0)
        guard epoch == write.epoch else {
            doubt(room: write.room, epoch: write.epoch, corrupt("room \(write.room) is at epoch \(epoch), but this write is for epoch \(write.epoch)"))
            return
        }
        if write.version <= version {
            // Already in the room's checkpoint: the segment is older than the checkpoint.
            return
        }
        guard write.version == version + 1 else {
            doubt(
                room: write.room, epoch: write.epoch,
                corrupt("room \(write.room) is at version \(version), and the next logged write is version \(write.version): writes are missing"))
            return
        }
        let ops: [SnapshotOperation]
        do {
            let message = try FrameDecoder.decode(frame: write.diffFrame, limits: .permissive, accepting: .server)
            guard case .diff(let diffRoom, let diffEpoch, let diffVersion, let diffOps, _) = message,
                diffRoom == write.room, diffEpoch == write.epoch, diffVersion == write.version
            else {
                throw corrupt("the record of \(write.room) at \(write.epoch)/\(write.version) does not hold that room's DIFF frame")
            }
            ops = diffOps
        } catch let error as WireError {
            throw corrupt("the DIFF frame of \(write.room) at version \(write.version) does not decode: \(error)")
        } catch let error as StoreError {
            throw error
        } catch {
            throw corrupt("\(error)")
        }
        // Through the dictionary's in-place accessor: the room is not moved out of `rooms`, so
        // its snapshot stays uniquely referenced and `apply` changes it without copying it.
        try Self.replay(
            write, ops, segment: segment, historyLimit: options.historyLimit, corrupt: corrupt,
            into: &rooms[
                RoomName(write.room),
                default: RoomState(
                    epoch: write.epoch, version: 0, snapshot: RoomSnapshot(), history: [],
                    checkpointFile: nil, checkpointVersion: 0, pinnedSegment: nil,
                    // A new room, no checkpoint: its log starts at version 1 (the guard above),
                    // so its chain is the incarnation's start. Never guessed otherwise.
                    chain: write.version == 1 ? .start(epoch: write.epoch) : nil,
                    base: write.version == 1 && options.keepsResumeBases ? RoomSnapshot() : nil)])
        recordsReplayed += 1
        if recordsReplayed % Self.progressInterval == 0 { reportProgress() }
    }

    private static func replay(
        _ write: WriteRecord, _ ops: [SnapshotOperation], segment: UInt64, historyLimit: Int,
        corrupt: (String) -> StoreError, into room: inout RoomState
    ) throws(StoreError) {
        do {
            try room.snapshot.apply(ops, limits: .unlimited)
        } catch {
            throw corrupt("the write of \(write.room) at version \(write.version) does not apply: \(error)")
        }
        room.version = write.version
        if room.pinnedSegment == nil { room.pinnedSegment = segment }
        if room.history.last.map({ $0.version + 1 != write.version }) ?? false {
            // Not the next version of the history (replay never gets here: the history ends at
            // the room's version): the chain before this write is not known.
            room.history.removeAll()
            room.chain = nil
            room.base = nil
        }
        room.history.append(write)
        if room.history.count >= 2 * max(historyLimit, 1) {
            let dropCount = room.history.count - historyLimit
            room.chain = HistoryChain.advance(room.chain, over: room.history[..<dropCount])
            room.base = HistoryBase.advance(room.base, over: room.history[..<dropCount])
            room.history.removeFirst(dropCount)
        }
    }

    /// The resume base recovery keeps for a room loaded from `checkpoint`: the one it holds, or
    /// its snapshot when its history is empty; none unless the daemon keeps bases.
    func resumeBase(of checkpoint: CheckpointFile) -> RoomSnapshot? {
        guard options.keepsResumeBases else { return nil }
        return checkpoint.base ?? (checkpoint.history.isEmpty ? checkpoint.snapshot : nil)
    }

    func recoveredRooms() -> [RecoveredRoom] {
        rooms.map { name, room in
            let (history, chain, base) = HistoryChain.suffix(room.history, options.historyLimit, chain: room.chain, base: room.base)
            return RecoveredRoom(
                name: name.string, epoch: room.epoch, version: room.version, snapshot: room.snapshot,
                history: history, ttlSeconds: room.ttlSeconds, chain: chain, base: base)
        }.sorted { $0.name < $1.name }
    }

    func tracks() -> [RoomName: DurableStore.RoomTrack] {
        rooms.mapValues { room in
            DurableStore.RoomTrack(
                epoch: room.epoch, version: room.version, checkpointVersion: room.checkpointVersion,
                checkpointFile: room.checkpointFile, pinnedSegment: room.pinnedSegment,
                writeIDs: room.history.suffix(options.historyLimit).map { ($0.version, $0.writeID, $0.fingerprint) },
                ttlSeconds: room.ttlSeconds, ttlSerial: room.ttlSerial)
        }
    }
}
