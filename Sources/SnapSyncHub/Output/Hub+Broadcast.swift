import SnapSyncModel
import SnapSyncWire

// A room's DIFFs reach its members once per loop pass, not once per DIFF.
//
// A write applies at once and its DIFF joins the room's pending broadcast (`PendingBroadcast`);
// the members get the pass's DIFFs together when the pass ends (`finishPass`), or earlier, at
// the first moment waiting would change what one of them sees:
// - before any other frame is queued for a member (`send`, `sendSnapshot`): an ACK, a PONG, a
//   LEFT, a PRESENCE_DIFF stay behind the DIFFs made before them, as PROTOCOL.md §10 asks of the
//   writer's own DIFF and ACK;
// - before the room's members or windows change (`addMember`, `removeMember`, `startWindow`,
//   `stopWindow`): a joiner's SNAPSHOT already holds the pending versions, and a leaver gets
//   them before it leaves.
// So each member's stream is exactly what fanning out at every write gave it. Only DIFFs of two
// rooms made in one pass may reach a member of both room by room rather than interleaved, which
// PROTOCOL.md §10 (step 8) allows: order holds per room, not across rooms.
//
// Why: fanning out at every write costs a pass of W writes to a room of M members W × M queue
// operations, each touching a member's queue (a cache miss per member and DIFF at 1,000
// members), and that loop, more than the kernel, limits how many writes fit a pass's input
// slice. Here a pass costs W appends and one queue entry per member: the room's consecutive
// DIFFs lie back to back in its arena, so they go as one span
// (`OutputQueue.enqueue(_:spanning:)`). docs/engineering.md, "Fan-out once per pass".

/// The DIFFs a room made in this pass that its members have not been given yet.
struct PendingBroadcast {
    /// The DIFF chunks in version order, and their version 3 copies (with the chain) when a
    /// member speaks version 3: both made as the writes applied.
    var diffs: [OutputChunk] = []
    var chained: [OutputChunk] = []
    /// Per DIFF: it makes or keeps the room an outline, or holds a version 2 op, so a version 1
    /// member is sent LEFT in its place (PROTOCOL.md §8.2).
    var needsOutlines: [Bool] = []
    var anyNeedsOutlines = false
    /// Some member speaks version 3 (taken at the first DIFF: members do not change while a
    /// broadcast is pending).
    let hasChainedMembers: Bool
    var bytes = 0
    var chainedBytes = 0

    init(hasChainedMembers: Bool) {
        self.hasChainedMembers = hasChainedMembers
    }
}

/// One form of a pass's DIFFs (plain, or with the chain) as its members get it: its runs, and
/// the frames and bytes they count for each member.
struct BroadcastRuns {
    let runs: [BroadcastRun]
    let frames: Int
    let bytes: Int

    init(_ chunks: [OutputChunk], bytes: Int) {
        runs = BroadcastRun.runs(of: chunks)
        frames = chunks.count
        self.bytes = bytes
    }
}

/// Consecutive chunks merged where they lie back to back in one arena: what one queue entry
/// covers (`OutputQueue.enqueue(_:spanning:)`).
struct BroadcastRun {
    let chunk: OutputChunk
    let bytes: Int

    /// - Complexity: O(chunks).
    static func runs(of chunks: [OutputChunk]) -> [BroadcastRun] {
        var runs: [BroadcastRun] = []
        var first: OutputChunk?
        var bytes = 0
        for chunk in chunks {
            if let start = first, let arena = start.arenaBase, chunk.arenaBase == arena, start.base + bytes == chunk.base {
                bytes += chunk.count
                continue
            }
            if let start = first { runs.append(BroadcastRun(chunk: start, bytes: bytes)) }
            first = chunk
            bytes = chunk.count
        }
        if let start = first { runs.append(BroadcastRun(chunk: start, bytes: bytes)) }
        return runs
    }
}

extension Hub {
    /// Sends `room`'s DIFF just applied (a local write, or a record the replicated engine
    /// applied) to its members: adds it to the room's pending broadcast; windowed members get
    /// their WINDOW_DIFF now (Hub+Windows.swift).
    /// - Complexity: O(1) amortised, plus a copy of the frame when a member speaks version 3,
    ///   and O(members) for the first DIFF of a pass.
    func fanOut(_ diff: OutputChunk, version: UInt64, in room: Room) {
        let windows = room.windows
        if !windows.isEmpty { fanOutWindows(diff, in: room) }
        if room.pendingBroadcast == nil {
            guard room.members.count > windows.count else { return }
            let chained = room.members.sessions.contains { windows[$0.id] == nil && ProtocolVersion.hasChain(version: $0.protocolVersion) }
            room.pendingBroadcast = PendingBroadcast(hasChainedMembers: chained)
            broadcastRooms.append(room)
            pendingBroadcastCount += 1
            // The pass's flush: asked once, by its first dirty session or its first broadcast.
            if broadcastRooms.count == 1 && dirty.isEmpty { outputPending() }
        }
        let needsOutlines = room.snapshot.isOutline || room.lastDiffHasOutlineOps
        room.pendingBroadcast!.diffs.append(diff)
        room.pendingBroadcast!.bytes += diff.count
        room.pendingBroadcast!.needsOutlines.append(needsOutlines)
        if needsOutlines { room.pendingBroadcast!.anyNeedsOutlines = true }
        if room.pendingBroadcast!.hasChainedMembers {
            let copy = room.chainedDiff(diff, version: version)
            room.pendingBroadcast!.chained.append(copy)
            room.pendingBroadcast!.chainedBytes += copy.count
        }
    }

    /// Gives every room's pending DIFFs to its members: at the end of a pass, after its commit,
    /// where `sendingDirectly` lets the IO layer send them at once (Hub+DirectBroadcast.swift),
    /// and in tests before reading a queue.
    /// - Complexity: O(Σ members of the rooms written + DIFFs).
    package func flushBroadcasts(sendingDirectly: Bool = false) {
        guard pendingBroadcastCount > 0 else {
            broadcastRooms.removeAll(keepingCapacity: true)
            return
        }
        // By index: a flush may end sessions, whose leaving flushes nothing more (the
        // broadcast is taken before its members are visited).
        var index = 0
        while index < broadcastRooms.count {
            flushBroadcast(of: broadcastRooms[index], sendingDirectly: sendingDirectly)
            index += 1
        }
        broadcastRooms.removeAll(keepingCapacity: true)
    }

    /// Flushes the pending broadcast of each room `session` is a member of: called before any
    /// other frame is queued for it.
    /// - Complexity: O(1) while no broadcast is pending; else O(rooms joined) plus the flushes.
    @inline(__always)
    func flushBroadcasts(reaching session: Session) {
        guard pendingBroadcastCount > 0, !session.memberships.isEmpty else { return }
        session.memberships.forEachRoom { room in
            if room.pendingBroadcast != nil { flushBroadcast(of: room) }
        }
    }

    /// Gives `room`'s pending DIFFs to its members; nothing when none is pending. With
    /// `sendingDirectly` (a committed pass) and an IO layer that sends broadcasts, members with
    /// nothing queued are sent them at once (Hub+DirectBroadcast.swift); the others' queues
    /// take them.
    /// - Complexity: O(members + DIFFs); one queue entry per member and run of adjacent DIFFs,
    ///   or one send per member taken directly.
    func flushBroadcast(of room: Room, sendingDirectly: Bool = false) {
        guard let pending = room.pendingBroadcast else { return }
        room.pendingBroadcast = nil
        pendingBroadcastCount -= 1
        let windows = room.windows
        let members = windows.isEmpty ? room.members.sessions : room.members.sessions.filter { windows[$0.id] == nil }
        let sender = sendingDirectly ? sendBroadcast : nil
        if sender == nil && pending.diffs.count == 1 && !pending.anyNeedsOutlines {
            // One DIFF (a member wrote, and its ACK flushes the room): no runs to build.
            let diff = pending.diffs[0]
            let chained = pending.hasChainedMembers ? pending.chained[0] : diff
            Session.forEachUnretained(in: members) { member in
                queue(shared: ProtocolVersion.hasChain(version: member.protocolVersion) ? chained : diff, to: member)
            }
            return
        }
        let plain = BroadcastRuns(pending.diffs, bytes: pending.bytes)
        let chained = pending.hasChainedMembers ? BroadcastRuns(pending.chained, bytes: pending.chainedBytes) : nil
        var direct = DirectMembers(taking: sender != nil ? self : nil)
        Session.forEachUnretained(in: members) { member in
            let hasChain = ProtocolVersion.hasChain(version: member.protocolVersion)
            if !hasChain && pending.anyNeedsOutlines && !ProtocolVersion.hasOutlines(member.protocolVersion) {
                queueUpToOutlines(pending, to: member, of: room)
                return
            }
            let runs = hasChain ? chained! : plain
            if sender != nil && canSendDirectly(runs, to: member) {
                direct.append(member, chained: hasChain)
            } else {
                queueRuns(runs, of: hasChain ? pending.chained : pending.diffs, to: member)
            }
        }
        guard let sender else { return }
        // `members` holds every session the lists name until the sends are done.
        withExtendedLifetime(members) {
            sendDirectly(plain, to: direct.plain, through: sender)
            if let chained { sendDirectly(chained, to: direct.chained, through: sender) }
        }
        direct.giveBack(to: self)
    }

    /// Queues a version 1 member the pass's DIFFs up to the first it cannot be sent (it makes
    /// or keeps the room an outline), then LEFT in its place.
    private func queueUpToOutlines(_ pending: PendingBroadcast, to member: Session, of room: Room) {
        for (diff, needsOutlines) in zip(pending.diffs, pending.needsOutlines) {
            if needsOutlines {
                leaveForOutline(member, room: room)
                break
            }
            queue(shared: diff, to: member)
        }
    }

    /// Queues a pass's DIFFs for one member as `runs`, one entry per run. Past the member's
    /// cap they are queued one by one, so that the member is cut off at the DIFF it would have
    /// been at (`wouldExceedCap` lets one frame into an empty queue, not a pass of them).
    private func queueRuns(_ runs: BroadcastRuns, of diffs: [OutputChunk], to member: Session) {
        guard member.state != .closing else { return }
        if member.output.pendingBytes + runs.bytes > member.output.cap {
            for diff in diffs { queue(shared: diff, to: member) }
            return
        }
        for run in runs.runs { member.output.enqueue(run.chunk, spanning: run.bytes) }
        stats.framesOut += UInt64(runs.frames)
        traffic.queued(type: MessageType.diff.rawValue, frames: runs.frames, bytes: runs.bytes)
        markDirty(member)
        if outputBytes > configuration.maxOutputTotalBytes { enforceOutputBudget() }
    }
}
