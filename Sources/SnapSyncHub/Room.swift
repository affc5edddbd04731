import SnapSyncModel
import SnapSyncWire
import SnapSyncStore

/// One room: the authoritative snapshot, its position (epoch, version), its recent history and
/// its members (PROTOCOL.md §7).
///
/// Every write goes through `mutate` or `replace`, which decide everything a write can be —
/// applied, unchanged, a duplicate, rejected — without touching sockets; the hub only fans
/// the outcome out. A rejected write leaves the room exactly as it was: the snapshot's `apply`
/// is atomic, and everything that can fail is checked before the room is touched.
///
/// Threading: a room belongs to one event loop. To shard rooms over one loop per core, a room
/// and all its members' queues stay on one loop; a member on another loop would receive its
/// DIFF chunks through that loop's queue and notify fd (see `EventLoop`).
package final class Room {
    /// What became of a write.
    enum WriteOutcome {
        /// Applied: the room moved to `version` (one more than before), and `diff` is the
        /// encoded DIFF frame, to be sent to every member and kept in history.
        case applied(version: UInt64, diff: OutputChunk)
        /// Valid but changes nothing (no operations, or REPLACE with the same content): ACK at
        /// the current version, no DIFF, and the version does not move.
        case unchanged(version: UInt64)
        /// The write id was seen before: ACK at the version of the original write; nothing applied.
        case duplicate(version: UInt64)
        case rejected(Rejection)
    }

    /// How to answer a JOIN.
    enum JoinAnswer {
        /// SNAPSHOT of the current state.
        case snapshot(reason: SnapshotReason)
        /// CATCHUP(from, to) followed by exactly these DIFF frames (versions from+1 ... to).
        case catchup(from: UInt64, to: UInt64, frames: [OutputChunk])
        /// A version 3 CATCHUP(from, to) folded into one DIFF (`Hub+FoldedCatchup.swift`).
        case folded(FoldedCatchup)
    }

    let name: String
    let epoch: UInt64
    var version: UInt64 { history.lastVersion }
    /// Set only by the write methods here and, in cluster mode, by `applyLogged` (Room+Replica.swift).
    var snapshot: RoomSnapshot
    /// The limits announced in WELCOME: content limits for `RoomSnapshot.apply`, the frame size a
    /// DIFF must fit (the clients' `max_frame_bytes`), the frames kept for resume.
    let limits: WireLimits
    /// Bytes of DIFF frames kept for resume (`--history-bytes`), besides `limits.historyCount`.
    let maxHistoryBytes: Int
    private(set) var history: RoomHistory
    /// The room's state at a version in its history, from which a resume is folded; nil when
    /// the room does not fold resumes (`--no-fold-resumes`) or its base failed to advance.
    private(set) var resumeBase: ResumeBase?
    /// The last folded catch-up computed, reused while it is current (`Room+Folding.swift`).
    var lastFold: FoldedCatchup?
    private(set) var writeIDs: WriteIDWindow
    private var cachedDigest: (version: UInt64, digest: SnapshotDigest)?
    /// Whether the DIFF of the last applied write holds an op only protocol version 2 has
    /// (`append_children`, `move_item_to_parent`): a version 1 member cannot be sent it
    /// (PROTOCOL.md §8.2, LocalRoomEngine+Writes.swift).
    private(set) var lastDiffHasOutlineOps = false
    /// The newest version whose DIFF holds a version 2 op (0: none in the history), or nil until
    /// a version 1 resume first asks (`Hub.answerJoin`, which scans the history once): so a
    /// version 1 JOIN with resume is O(1) after that, however often it is repeated.
    var lastOutlineOpVersion: UInt64?

    /// DIFFs of this pass its members have not been given yet (Hub+Broadcast.swift).
    /// Unchecked for the reason given on `Session.output` (touched once per DIFF).
    @exclusivity(unchecked) var pendingBroadcast: PendingBroadcast?
    /// Sessions that have joined (`Membership.swift`).
    /// Read once per DIFF; unchecked for the reason given on `Session.output`.
    @exclusivity(unchecked) var members = RoomMembers()
    /// Its members' presence entries, local and (cluster mode) other nodes' (Hub+Presence.swift).
    var presence = RoomPresence()
    /// The members watching its presence (PRESENCE_WATCH), by session id, each with the number
    /// of PRESENCE_DIFFs the room had made when its PRESENCE was sent (it is owed the later ones).
    var presenceWatchers: [UInt64: (session: Session, since: UInt64)] = [:]
    /// PRESENCE_DIFF frames made so far (`Hub.sendPresenceDiff`).
    var presenceFrames: UInt64 = 0
    /// When its last PRESENCE_DIFF was made; whether it waits in the hub's presence queue; and
    /// whether that frame is still being handed to its watchers (`Hub.presenceDeliveries`), in
    /// which case the next waits for it, so that each watcher gets the frames in order.
    var presenceFlushedAt: ContinuousClock.Instant?
    var isPresenceQueued = false
    var isPresenceDelivering = false
    /// Its windowed members (WINDOW, Hub+Windows.swift), by session id: members that get
    /// WINDOW_DIFF instead of DIFF.
    var windows: [UInt64: MemberWindow] = [:]
    /// Every section's item count as its windowed members last learnt it; empty while it has
    /// none (rebuilt when the first one joins).
    var windowCounts: [SnapshotIdentifier: UInt64] = [:]
    /// Which windowed members hold each item, and whose window of each section is not full
    /// (Room+Windows.swift).
    var windowMembersByItem: [SnapshotIdentifier: Set<UInt64>] = [:]
    var unfilledWindowMembers: [SnapshotIdentifier: Set<UInt64>] = [:]
    /// In the hub's `windowCountsQueue`.
    var isWindowCountsQueued = false
    /// Where this room's DIFF chunks are written, back to back (`arena(for:in:)`).
    private var diffArena: OutputArena?
    /// Where the version 3 copies of them are (`chainedDiff`), made only for such members.
    private var chainedArena: OutputArena?
    /// The server's bound on all rooms' memory, asked before a write changes this room.
    var budget: RoomMemoryBudget?
    /// The room's chain at `version` (`RoomChain`, PROTOCOL.md §9), which version 3 members get
    /// in SNAPSHOT and DIFF, and every cluster record names so that a replica on another
    /// history notices. Advanced by `commit` for every version. Nil when not known: only in
    /// cluster mode, for a room loaded from a checkpoint saved before checkpoints carried it,
    /// until its next record names one (members are sent `RoomChain.unknown` meanwhile).
    var chain: RoomChain?
    /// The room's time-to-live in seconds as SET_TTL set it (0: never expires); nil: the
    /// daemon's `--room-ttl` applies (LocalRoomEngine+Lifecycle.swift).
    var ttlSeconds: UInt64?
    /// Since when the room has had no write (applied MUTATE or REPLACE, SET_TTL) and, when it
    /// has no members, since its last member left; its creation or restore before either. What
    /// both its expiry (LocalRoomEngine+Lifecycle.swift) and its sleep (LocalRoomEngine+Sleep.swift) count from. An
    /// instant of the hub's clock (`Hub.monotonicNow`), which the hub passes when it creates
    /// the room.
    var idleSince: ContinuousClock.Instant

    /// Sleeping rooms (`IdleRooms`, LocalRoomEngine+Sleep.swift): whether the room is in the hub's list of
    /// memberless rooms, and its links there.
    var isIdle = false
    unowned(unsafe) var idlePrevious: Room?
    unowned(unsafe) var idleNext: Room?

    /// A new, empty room at version 0 with a fresh random nonzero epoch.
    convenience init(
        name: String, limits: WireLimits = .default, maxHistoryBytes: Int = Room.defaultHistoryBytes,
        foldsResumes: Bool = true, idleSince: ContinuousClock.Instant = .now
    ) {
        let epoch = UInt64.random(in: 1...UInt64.max)
        self.init(
            name: name, epoch: epoch, version: 0, snapshot: RoomSnapshot(), limits: limits,
            maxHistoryBytes: maxHistoryBytes, chain: .start(epoch: epoch), foldsResumes: foldsResumes, idleSince: idleSince)
    }

    /// A room at a known position, e.g. one restored from the store, optionally with the
    /// writes of its latest versions (oldest first, the last one at `version`; ignored unless
    /// their versions are consecutive and end there), idle since `idleSince`.
    /// - Parameter chain: the room's chain before the first of `recent` (at `version` when
    ///   there is none); nil when not known. The chain at `version` is computed from it.
    /// - Parameter foldsResumes: whether the room keeps a resume base (`ResumeBase`).
    /// - Parameter base: the room's state before the first of `recent` (the store's
    ///   `HistoryBase`), where the resume base starts; without it (or when `recent` is not
    ///   usable), the base starts at `version`: the state before it is not known.
    init(
        name: String, epoch: UInt64, version: UInt64, snapshot: RoomSnapshot, limits: WireLimits = .default,
        maxHistoryBytes: Int = Room.defaultHistoryBytes, history recent: [WriteRecord] = [], chain: RoomChain? = nil,
        base: RoomSnapshot? = nil, foldsResumes: Bool = true, idleSince: ContinuousClock.Instant = .now
    ) {
        self.name = name
        self.idleSince = idleSince
        self.epoch = epoch
        self.snapshot = snapshot
        self.limits = limits
        self.maxHistoryBytes = maxHistoryBytes
        let usable =
            recent.count <= version && recent.last.map { $0.version == version } ?? false
            && zip(recent, recent.dropFirst()).allSatisfy { $0.version + 1 == $1.version }
        let start = usable ? version - UInt64(recent.count) : version
        var chain = usable || recent.isEmpty ? chain : nil
        self.history = RoomHistory(maxCount: limits.historyCount, maxBytes: maxHistoryBytes, version: start, chain: chain ?? .unknown)
        self.writeIDs = WriteIDWindow(maxCount: limits.historyCount)
        // A loaded base is the anchor of the versions before the load (ResumeBase.swift).
        if foldsResumes, usable, !recent.isEmpty, let base { resumeBase = ResumeBase(anchor: base, version: start, newest: version) }
        for entry in usable ? recent : [] {
            chain = chain?.next(frame: entry.diffFrame)
            history.append(.frozen(entry.diffFrame), version: entry.version, chain: chain ?? .unknown)
            while let (evicted, evictedVersion) = history.evictOldest() {
                if resumeBase?.forget(through: evictedVersion, frame: evicted.bytes) == false { resumeBase = nil }
            }
            writeIDs.remember(entry.writeID, version: entry.version, fingerprint: entry.fingerprint, oldestVersion: history.baseVersion)
        }
        self.chain = chain
        if foldsResumes && resumeBase == nil { resumeBase = ResumeBase(version: version) }
    }

    /// A room as the store recovered or woke it, with the daemon's limits, idle since `idleSince`.
    convenience init(recovered r: RecoveredRoom, configuration: ServerConfiguration, idleSince: ContinuousClock.Instant) {
        self.init(
            name: r.name, epoch: r.epoch, version: r.version, snapshot: r.snapshot, limits: configuration.wire,
            maxHistoryBytes: configuration.historyBytes, history: r.history, chain: r.chain ?? .unknown, base: r.base,
            foldsResumes: configuration.foldResumes, idleSince: idleSince)
        ttlSeconds = r.ttlSeconds
    }

    /// `--history-bytes`'s default.
    static let defaultHistoryBytes = 4 * 1024 * 1024

    /// The longest room name, in UTF-8 bytes (PROTOCOL.md §6, `invalid_room_name`).
    static let maxNameBytes = 128

    /// Why `name` cannot name a room, or `nil` when it can.
    static func validate(name: String) -> Rejection? {
        let size = name.utf8.count
        if size == 0 { return Rejection(.invalidRoomName, "the room name is empty") }
        if size > maxNameBytes {
            return Rejection(.invalidRoomName, "the room name is \(size) bytes, over the limit of \(maxNameBytes)")
        }
        return nil
    }

    /// Whether `digest` is known at the room's version (costs nothing to read).
    var isDigestKnown: Bool { cachedDigest?.version == version }
    /// When a VERIFY last had this room's digest computed, for `ServerConfiguration.verifyDigestInterval`.
    var lastVerifyDigest: ContinuousClock.Instant?

    /// SHA-256 of the snapshot, computed once per version.
    /// - Complexity: O(n) the first time after a change, O(1) after.
    var digest: SnapshotDigest {
        if let cachedDigest, cachedDigest.version == version { return cachedDigest.digest }
        let digest = snapshot.digest
        cachedDigest = (version, digest)
        return digest
    }

    /// Number of DIFF frames kept for resume, and their bytes.
    var historyCount: Int { history.count }
    var historyBytes: Int { history.byteCount }
    /// The oldest version a JOIN may resume from and get CATCHUP.
    var historyBaseVersion: UInt64 { history.baseVersion }
    /// Write ids remembered for deduplication.
    var writeIDCount: Int { writeIDs.count }

    // MARK: Joining

    /// Decides how to answer a JOIN: a fresh JOIN gets SNAPSHOT(initial); a resume position in
    /// this epoch and inside history gets CATCHUP plus the missing DIFFs (none when the client
    /// is current), unless its chain is not the room's at that version (PROTOCOL.md §9: the
    /// replica is on another history, and the DIFFs would not lead it to the room); anything else
    /// (another epoch, too old, ahead of the room, another chain) gets SNAPSHOT(resync). A chain
    /// that either side does not know (zero) is not compared.
    /// - Complexity: O(1) (the frames are a slice of history).
    func answerJoin(resume: ResumePoint?) -> JoinAnswer {
        guard let resume else { return .snapshot(reason: .initial) }
        guard resume.epoch == epoch, let frames = history.frames(after: resume.version) else {
            return .snapshot(reason: .resync)
        }
        if let claimed = resume.chain, claimed != .unknown {
            let held = chain(atVersion: resume.version)
            if held != .unknown && held != claimed { return .snapshot(reason: .resync) }
        }
        return .catchup(from: resume.version, to: version, frames: frames)
    }

    /// The room's chain after the DIFF of `version` (the room's own version or one in history):
    /// `RoomChain.unknown` when not known.
    /// - Complexity: O(1).
    func chain(atVersion version: UInt64) -> RoomChain {
        version == self.version ? chain ?? .unknown : history.chain(at: version) ?? .unknown
    }

    /// A version 3 member's copy of the DIFF `diff` of `version`: the same frame with the
    /// room's chain after it at the end (PROTOCOL.md §11.13), written back to back with the
    /// room's other such copies, as the DIFFs themselves are (`arena(for:)`).
    /// - Complexity: O(frame), one copy.
    func chainedDiff(_ diff: OutputChunk, version: UInt64) -> OutputChunk {
        let frame = RoomChain.chainedDiffFrame(diff.bytes, chain: chain(atVersion: version))
        return frame.withUnsafeBytes { OutputChunk(in: arena(for: $0.count, in: &chainedArena), copying: $0) }
    }

    /// The chains after the DIFFs `answerJoin` gives a client at `version`, in their order: the
    /// last is the room's chain now.
    func chains(after version: UInt64) -> [RoomChain] {
        var chains = history.chains(after: version) ?? []
        if !chains.isEmpty { chains[chains.count - 1] = chain ?? .unknown }
        return chains
    }

    // MARK: Writing

    /// Applies a MUTATE: idempotency (write id), then compare-and-set (expected version), then
    /// the whole batch atomically against the snapshot.
    ///
    /// - Parameter scratch: a reusable buffer for encoding the DIFF (emptied first).
    /// - Complexity: that of `RoomSnapshot.apply` plus O(size of the DIFF) to encode it once.
    func mutate(
        _ ops: [SnapshotOperation], expectedVersion: UInt64?, writeID: [UInt8],
        scratch: inout [UInt8]
    ) -> WriteOutcome {
        let fingerprint = writeID.isEmpty ? 0 : WriteFingerprint.mutate(ops, expectedVersion: expectedVersion, scratch: &scratch)
        if let outcome = precheck(expectedVersion: expectedVersion, writeID: writeID, fingerprint: fingerprint) { return outcome }
        let full = budget?.admit(growth: 0, to: self)
        if let full, ops.isEmpty || !ops.contains(where: \.canShrink) { return .rejected(full) }
        if ops.isEmpty { return unchanged(writeID: writeID, fingerprint: fingerprint) }
        // Encode first: a DIFF too large for the clients' frame limit must be refused before the
        // room changes, and the ops are exactly what the DIFF carries.
        let next = version + 1
        scratch.removeAll(keepingCapacity: true)
        let size = FrameEncoder().encodeDiff(room: name, epoch: epoch, version: next, ops: ops, into: &scratch)
        if full == nil, let rejection = checkFrameSize(size) { return .rejected(rejection) }
        if let refusal = full ?? budget?.admit(growth: 2 * size, to: self) {
            // Only a batch that can shrink the room is worth the copy below (PROTOCOL.md §7.1).
            if full == nil && !ops.contains(where: \.canShrink) { return .rejected(refusal) }
            // Near the bound a write may still shrink the room (deletes): it is applied to learn
            // its real growth and undone unless that is admitted. The undo keeps the old snapshot
            // alive, so the apply copies it: O(n) for this room, only on this path (a REPLACE
            // is O(n) anyway).
            let before = snapshot
            guard let undo = try? applyToSnapshot(ops),
                budget?.admit(growth: snapshot.canonicalByteCount - before.canonicalByteCount + size, to: self) == nil
            else {
                snapshot = before
                return .rejected(refusal)
            }
            if let rejection = checkFrameSize(size) {
                snapshot = before
                return .rejected(rejection)
            }
            return commit(version: next, writeID: writeID, fingerprint: fingerprint, frame: scratch, ops: ops, undo: undo)
        }
        let undo: SnapshotUndo?
        do {
            undo = try applyToSnapshot(ops)
        } catch {
            return .rejected(Rejection(error))
        }
        return commit(version: next, writeID: writeID, fingerprint: fingerprint, frame: scratch, ops: ops, undo: undo)
    }

    /// Applies `ops` to the snapshot under the room's limits, atomically; returns their undo
    /// when the room keeps a resume base (nil otherwise: nothing is recorded).
    /// - Complexity: that of `RoomSnapshot.apply`, plus O(bytes the undo names) with a base.
    func applyToSnapshot(_ ops: [SnapshotOperation]) throws(BatchError) -> SnapshotUndo? {
        guard resumeBase != nil else {
            try snapshot.apply(ops, limits: limits.model)
            return nil
        }
        return try snapshot.applyReversibly(ops, limits: limits.model)
    }

    /// Makes `target`, the result of `ops` (a DIFF of `frameBytes` bytes) applied to the
    /// snapshot, the snapshot; returns the undo of the change when the room keeps a resume base.
    /// A small DIFF is applied, which records its undo in O(DIFF); a large one (over an eighth
    /// of the room) installs `target` in O(1) and keeps the state before it whole, as a second
    /// copy would have cost (ResumeBase.swift).
    func install(_ target: RoomSnapshot, from ops: [SnapshotOperation], frameBytes: Int) -> SnapshotUndo? {
        guard resumeBase != nil else {
            snapshot = target
            return nil
        }
        if frameBytes <= snapshot.canonicalByteCount / 8, let undo = try? snapshot.applyReversibly(ops, limits: .unlimited) {
            return undo
        }
        let before = snapshot
        snapshot = target
        return .whole(before)
    }

    /// The most bytes of undos the resume base keeps: the room's own size, so undos never cost
    /// more than the second copy of the room they replace, and deleting much of a room does not
    /// leave a small room holding a large one's worth of them (PROTOCOL.md §7.1: a full server
    /// can be emptied by writes); but at least 32 KiB, about a thousand small writes, so that a
    /// small room folds across more than a few of them (ResumeBase.swift says what happens
    /// past it).
    var maxResumeUndoBytes: Int { Self.maxResumeUndoBytes(roomBytes: snapshot.canonicalByteCount) }

    static func maxResumeUndoBytes(roomBytes: Int) -> Int { Swift.max(roomBytes, 32 * 1024) }

    /// Applies a REPLACE: the same checks as `mutate`, then the server-side diff from the
    /// current snapshot to `target` (`RoomSnapshot.difference(to:limits:)`), applied as one DIFF. A target
    /// equal to the current content changes nothing: ACK at the current version, no DIFF.
    /// `target` has been checked against the content limits by the decoder.
    /// - Complexity: that of `RoomSnapshot.difference(to:)` plus O(size of the DIFF).
    func replace(
        with target: RoomSnapshot, expectedVersion: UInt64?, writeID: [UInt8],
        scratch: inout [UInt8]
    ) -> WriteOutcome {
        // The target's digest names the request in the fingerprint; once applied it is also the
        // room's digest, so the next JOIN does not hash the room again.
        let targetDigest = writeID.isEmpty ? nil : target.digest
        let fingerprint = targetDigest.map { WriteFingerprint.replace(digest: $0, expectedVersion: expectedVersion, scratch: &scratch) } ?? 0
        if let outcome = precheck(expectedVersion: expectedVersion, writeID: writeID, fingerprint: fingerprint) { return outcome }
        // Near the bound only a smaller target can be admitted (below, by its exact growth).
        if let full = budget?.admit(growth: 0, to: self), target.canonicalByteCount >= snapshot.canonicalByteCount {
            return .rejected(full)
        }
        if target.canonicalByteCount > limits.model.maxSnapshotBytes {
            return .rejected(
                Rejection(
                    .snapshotTooLarge,
                    "the snapshot's encoding is \(target.canonicalByteCount) bytes, over the limit of \(limits.model.maxSnapshotBytes)"))
        }
        // Limited: every prefix of the DIFF applies under the room's limits, as replicas check.
        let ops = snapshot.difference(to: target, limits: limits.model)
        if ops.isEmpty { return unchanged(writeID: writeID, fingerprint: fingerprint) }
        let next = version + 1
        scratch.removeAll(keepingCapacity: true)
        let size = FrameEncoder().encodeDiff(room: name, epoch: epoch, version: next, ops: ops, into: &scratch)
        // The snapshot's growth is known exactly here (the target's size less the room's), so
        // the bound is that plus the DIFF joining the history, not twice the DIFF.
        if let rejection = checkFrameSize(size)
            ?? budget?.admit(growth: target.canonicalByteCount - snapshot.canonicalByteCount + size, to: self)
        {
            return .rejected(rejection)
        }
        // The target is exactly the result of applying the diff (the model's law
        // `apply(diff(a, b), a) == b`), and assigning it is O(1) where applying would be O(diff).
        let undo = install(target, from: ops, frameBytes: size)
        let outcome = commit(version: next, writeID: writeID, fingerprint: fingerprint, frame: scratch, ops: ops, undo: undo)
        if let targetDigest { cachedDigest = (next, targetDigest) }
        return outcome
    }

    /// Applies a REPLACE_SECTION (PROTOCOL.md §11.21): the same checks as `mutate`, then the
    /// ops the model computes for that section alone (`operations(replacingSection:with:limits:)`),
    /// applied as one DIFF. Its refusals carry no op index: the ops are the server's.
    /// `items` has been checked against the content limits by the decoder.
    /// - Complexity: that of the model's section diff plus O(n) for the copy kept while the
    ///   memory bound is asked (the room is restored from it if the write is refused).
    func replaceSection(
        _ section: SnapshotIdentifier, with items: SectionSnapshot, expectedVersion: UInt64?, writeID: [UInt8],
        scratch: inout [UInt8]
    ) -> WriteOutcome {
        let fingerprint = Self.fingerprint(replacing: section, with: items, expectedVersion: expectedVersion, writeID: writeID, scratch: &scratch)
        if let outcome = precheck(expectedVersion: expectedVersion, writeID: writeID, fingerprint: fingerprint) { return outcome }
        let ops: [SnapshotOperation]
        do {
            ops = try snapshot.operations(replacingSection: section, with: items, limits: limits.model)
        } catch {
            return .rejected(Rejection(error, withOpIndex: false))
        }
        if ops.isEmpty { return unchanged(writeID: writeID, fingerprint: fingerprint) }
        let next = version + 1
        scratch.removeAll(keepingCapacity: true)
        let size = FrameEncoder().encodeDiff(room: name, epoch: epoch, version: next, ops: ops, into: &scratch)
        if let rejection = checkFrameSize(size) { return .rejected(rejection) }
        let before = snapshot
        let undo: SnapshotUndo?
        do {
            undo = try applyToSnapshot(ops)
        } catch {
            snapshot = before
            return .rejected(Rejection(error, withOpIndex: false))
        }
        if let refusal = budget?.admit(growth: snapshot.canonicalByteCount - before.canonicalByteCount + size, to: self) {
            snapshot = before
            return .rejected(refusal)
        }
        return commit(version: next, writeID: writeID, fingerprint: fingerprint, frame: scratch, ops: ops, undo: undo)
    }

    /// A REPLACE_SECTION's fingerprint (0 without a write id), for the single-node and the
    /// cluster write paths alike.
    static func fingerprint(
        replacing section: SnapshotIdentifier, with items: SectionSnapshot, expectedVersion: UInt64?, writeID: [UInt8], scratch: inout [UInt8]
    ) -> UInt64 {
        writeID.isEmpty ? 0 : WriteFingerprint.replaceSection(section, items, expectedVersion: expectedVersion, scratch: &scratch)
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { byte in String(byte >> 4, radix: 16) + String(byte & 0xf, radix: 16) }.joined()
    }

    /// The write id's earlier answer, or the compare-and-set's refusal against `version` (the
    /// room's own unless a proposal validates against the versions before it, Room+Proposal.swift).
    func precheck(expectedVersion: UInt64?, writeID: [UInt8], fingerprint: UInt64, at version: UInt64? = nil) -> WriteOutcome? {
        let version = version ?? self.version
        // A retry must get its original answer even though the room has moved on since, so the
        // write id is looked up before the compare-and-set.
        if !writeID.isEmpty, let original = writeIDs.entry(of: writeID) {
            if let known = original.fingerprint, known != fingerprint {
                return .rejected(
                    Rejection(
                        .writeIDConflict,
                        "write id 0x\(Self.hex(writeID)) of room \(name) was used by another write (acknowledged at version \(original.version))"))
            }
            return .duplicate(version: original.version)
        }
        if let expectedVersion, expectedVersion != version {
            return .rejected(
                Rejection(
                    .versionMismatch,
                    "expected version \(expectedVersion), but room \(name) is at version \(version)"))
        }
        return nil
    }

    func checkFrameSize(_ size: Int) -> Rejection? {
        guard size - 4 > limits.maxFrameBytes else { return nil }
        return Rejection(
            .snapshotTooLarge,
            "the DIFF of this write would be a \(size - 4)-byte frame, over max_frame_bytes \(limits.maxFrameBytes)")
    }

    func unchanged(writeID: [UInt8], fingerprint: UInt64) -> WriteOutcome {
        writeIDs.remember(writeID, version: version, fingerprint: fingerprint, changed: false, oldestVersion: history.baseVersion)
        return .unchanged(version: version)
    }

    /// An arena with room for `count` more bytes: the current one, or a new one twice its size,
    /// from 1 KiB up to 64 KiB (a larger frame gets an arena of its own size). So a quiet room
    /// holds at most twice what its recent DIFFs need, and a busy one writes its DIFFs back to
    /// back in 64 KiB blocks. O(1).
    private func arena(for count: Int, in current: inout OutputArena?) -> OutputArena {
        if let arena = current, arena.freeCapacity >= count { return arena }
        let grown = min(Room.maxArenaBytes, max(Room.minArenaBytes, 2 * (current?.capacity ?? 0)))
        let arena = OutputArena(capacity: max(count, grown))
        current = arena
        return arena
    }

    static let minArenaBytes = 1024
    static let maxArenaBytes = 64 * 1024

    /// Makes `frame` the room's next version.
    /// - Parameter undo: what takes the snapshot back to the version before (the resume base
    ///   keeps it); nil when not known, or when the room keeps no base: the base's reach then
    ///   starts over at this version.
    /// - Parameter chainAfter: the room's chain after it, when the caller has it already (a
    ///   cluster record, whose chain after each write is computed once to check the record);
    ///   nil: the room's own chain advanced over `frame`.
    func commit(
        version next: UInt64, writeID: [UInt8], fingerprint: UInt64?, frame: [UInt8], ops: [SnapshotOperation],
        undo: SnapshotUndo?, chainAfter: RoomChain? = nil
    ) -> WriteOutcome {
        lastDiffHasOutlineOps = ops.contains(where: \.isOutlineOperation)
        if lastDiffHasOutlineOps { lastOutlineOpVersion = next }
        let chunk = frame.withUnsafeBytes { OutputChunk(in: arena(for: $0.count, in: &diffArena), copying: $0) }
        // One SHA-256 of the frame per version (O(frame)), on a single node as in the cluster:
        // the chain must be known at every version a client may resume from.
        chain = chainAfter ?? chain?.next(frame: frame)
        history.append(chunk, version: next, chain: chain ?? .unknown)
        // A fold to the version before is of no more use; it may hold a large frame.
        lastFold = nil
        if let undo {
            resumeBase?.record(undo, version: next, room: snapshot, maxBytes: maxResumeUndoBytes, windowBytes: history.byteCount)
        } else {
            resumeBase?.reset(at: next)
        }
        // A resume from a version the history no longer holds is not checked against the chain
        // there, so the base moves past each version the history lets go of (ResumeBase.swift).
        while let (evicted, evictedVersion) = history.evictOldest() {
            if resumeBase?.forget(through: evictedVersion, frame: evicted.bytes) == false { resumeBase?.reset(at: next) }
        }
        writeIDs.remember(writeID, version: next, fingerprint: fingerprint, oldestVersion: history.baseVersion)
        return .applied(version: next, diff: chunk)
    }
}
