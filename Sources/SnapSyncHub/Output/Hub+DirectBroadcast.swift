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

/// The members of one room's flush taken directly, by the form of the DIFFs they get; the
/// lists keep the capacity they grew to (`Hub.directLists`).
struct DirectMembers {
    private(set) var plain: [Unmanaged<Session>] = []
    private(set) var chained: [Unmanaged<Session>] = []

    /// Empty lists, taken from `hub`'s spares when there is one (nil: none are needed).
    init(taking hub: Hub?) {
        guard let hub else { return }
        plain = hub.directLists.popLast() ?? []
        chained = hub.directLists.popLast() ?? []
    }

    mutating func append(_ member: Session, chained isChained: Bool) {
        if isChained {
            chained.append(Unmanaged.passUnretained(member))
        } else {
            plain.append(Unmanaged.passUnretained(member))
        }
    }

    /// Gives the lists back to `hub`, emptied, for the next flush.
    mutating func giveBack(to hub: Hub) {
        plain.removeAll(keepingCapacity: true)
        chained.removeAll(keepingCapacity: true)
        hub.directLists += [plain, chained]
    }
}

extension Hub {
    /// The most spans a direct send gathers: a pass whose runs are more than this keeps the
    /// queue's path (which sends them in several writes).
    static let maxDirectSpans = 64

    /// Whether `member` can be sent `runs` directly: it is ready, has nothing queued and is not
    /// blocked, and the runs are within its cap and one gathering write.
    @inline(__always)
    func canSendDirectly(_ runs: BroadcastRuns, to member: Session) -> Bool {
        member.state == .ready && member.output.isEmpty && !member.isOutputBlocked && runs.bytes <= member.output.cap
            && runs.runs.count <= Self.maxDirectSpans
    }

    /// Sends `broadcast` to `members` through the IO layer, counted as queuing it for each
    /// would have been.
    func sendDirectly(_ broadcast: BroadcastRuns, to members: [Unmanaged<Session>], through send: BroadcastSender) {
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
}
