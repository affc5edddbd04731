import SnapSyncWire

// A committed pass's broadcast, sent straight to the members that have nothing queued.
//
// Queuing a room's run of DIFFs for each member and sending the queues afterwards costs every
// member a queue entry, a place on the dirty list, a gather, a consume and their counters: at
// 1,000 members × 64 B that bookkeeping was 8% of the daemon's time, where the trivial
// broadcaster (`snapsync-ceiling`) spends 1.4% writing one shared block to each connection
// (docs/benchmarks.md, "Where the single loop's time goes, beside the ceiling's"). So at the
// end of a pass, after its commit and after the queues have been handed out (`finishPass`:
// the ACKs do not wait for a big room), a member whose queue is empty gets the run the
// broadcaster's way: the IO layer sends the room's arena bytes to it in one gathering write,
// spread over the IO threads like the dirty sessions' sends. Only what a socket did not take
// is queued (`queueUnsent`), and goes out as any queued output (the rest of this pass's flush,
// then EV_WRITE).
//
// What a member receives is unchanged: the bytes, their order (its queue was empty, so nothing
// was before them; anything queued after them in this pass waits behind the unsent rest), the
// commit-before-send rule (this runs only from `finishPass`, after the commit), and the
// counters (frames and bytes queued, bytes out). A member with something still queued (its
// socket was full), one that is closing or blocked, a version 1 member of an outline room, and
// a run over the member's output cap keep the queue's path. A member whose transport cannot
// send a shared run itself (TLS, an in-process session) has it queued whole.

/// `Hub.sendBroadcast`: sends `spans` (one room's runs, in its arena) to each of `members`.
package typealias BroadcastSender = (_ spans: UnsafeBufferPointer<OutputSpan>, _ members: UnsafeBufferPointer<Unmanaged<Session>>) -> Void

/// One room's runs being sent directly, and what they count for one member.
struct DirectBroadcast {
    let runs: [BroadcastRun]
    let frames: Int
    let bytes: Int

    init(_ chunks: [OutputChunk], bytes: Int) {
        runs = BroadcastRun.runs(of: chunks)
        frames = chunks.count
        self.bytes = bytes
    }
}

extension Hub {
    /// The most spans a direct send gathers: a pass whose runs are more than this keeps the
    /// queue's path (which sends them in several writes).
    static let maxDirectSpans = 64

    /// Sends `pending` to `members` (the room's, without its windowed ones): directly to those
    /// with nothing queued, through the queue to the rest.
    /// - Complexity: O(members + DIFFs), one send per member taken directly.
    func sendDirectly(_ pending: PendingBroadcast, to members: [Session], of room: Room, through send: BroadcastSender) {
        let plain = DirectBroadcast(pending.diffs, bytes: pending.bytes)
        let chained = pending.hasChainedMembers ? DirectBroadcast(pending.chained, bytes: pending.chainedBytes) : nil
        var plainMembers = takeDirectList()
        var chainedMembers = takeDirectList()
        Session.forEachUnretained(in: members) { member in
            let hasChain = ProtocolVersion.hasChain(version: member.protocolVersion)
            if !hasChain && pending.anyNeedsOutlines && !ProtocolVersion.hasOutlines(member.protocolVersion) {
                queueUpToOutlines(pending, to: member, of: room)
                return
            }
            let broadcast = hasChain ? chained! : plain
            if member.state == .ready && member.output.isEmpty && !member.isOutputBlocked && broadcast.bytes <= member.output.cap
                && broadcast.runs.count <= Self.maxDirectSpans
            {
                if hasChain {
                    chainedMembers.append(Unmanaged.passUnretained(member))
                } else {
                    plainMembers.append(Unmanaged.passUnretained(member))
                }
            } else {
                queueRuns(broadcast.runs, of: hasChain ? pending.chained : pending.diffs, frames: broadcast.frames, bytes: broadcast.bytes, to: member)
            }
        }
        // `members` holds every session the lists name until the sends are done.
        withExtendedLifetime(members) {
            sendDirectly(plain, to: plainMembers, through: send)
            if let chained { sendDirectly(chained, to: chainedMembers, through: send) }
        }
        returnDirectList(plainMembers)
        returnDirectList(chainedMembers)
    }

    private func sendDirectly(_ broadcast: DirectBroadcast, to members: [Unmanaged<Session>], through send: BroadcastSender) {
        guard !members.isEmpty else { return }
        stats.framesOut += UInt64(broadcast.frames * members.count)
        traffic.queued(type: MessageType.diff.rawValue, frames: broadcast.frames * members.count, bytes: broadcast.bytes * members.count)
        let spans = broadcast.runs.map { OutputSpan(base: $0.chunk.base, count: $0.bytes) }
        directBroadcast = broadcast
        defer { directBroadcast = nil }
        spans.withUnsafeBufferPointer { spans in
            members.withUnsafeBufferPointer { members in send(spans, members) }
        }
        if outputBytes > configuration.maxOutputTotalBytes { enforceOutputBudget() }
    }

    /// The IO layer could not send `session` (a member of the direct broadcast being sent) all
    /// of it: queues the runs, less the `sent` bytes the socket took, to go out with the queued
    /// output (the rest of this pass's flush, then EV_WRITE). Queues nothing else and ends no
    /// one, so that the IO layer can queue every member's rest before anything else is queued
    /// (the output budget is enforced once the broadcast is handed back).
    /// - Complexity: O(runs).
    package func queueUnsent(_ session: Session, sent: Int) {
        guard let broadcast = directBroadcast else { preconditionFailure("queueUnsent outside a direct broadcast") }
        precondition(session.output.isEmpty, "a direct broadcast's member had output queued")
        for run in broadcast.runs { session.output.enqueue(run.chunk, spanning: run.bytes) }
        if sent > 0 { session.output.consume(sent) }
        markDirty(session)
    }

    /// A list for `sendDirectly`, with the capacity the last one grew to.
    private func takeDirectList() -> [Unmanaged<Session>] {
        var list = directLists.popLast() ?? []
        list.removeAll(keepingCapacity: true)
        return list
    }

    private func returnDirectList(_ list: [Unmanaged<Session>]) {
        if directLists.count < 2 { directLists.append(list) }
    }
}
