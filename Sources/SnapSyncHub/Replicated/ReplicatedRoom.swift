import DequeModule
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

/// Cluster mode: one room this node follows in the cluster's log (`RoomLog`), kept across
/// the room's incarnations (a DROP's tombstone replaces `room` with the next one and the follow
/// goes on). Where the room stands in the log (`logSequence`), what waits for it to load, and its
/// writes: one record in flight (carrying up to `maxWritesPerRecord` writes), the others in a
/// bounded FIFO.
package final class ReplicatedRoom {
    package enum Phase {
        /// Followed, the log has not yet delivered everything it held: requests wait.
        case loading
        /// Caught up: reads are answered from `room`, writes proposed.
        case current
        /// The follow failed after the room was current: reads are still answered from `room`,
        /// writes are refused until the one-second timer has followed it again.
        case broken
        /// Following again after `broken`; records at or before `logSequence` are skipped.
        case refollowing
    }

    /// A JOIN that waits for the room to load.
    struct PendingJoin {
        var requestID: UInt64
        var resume: ResumePoint?
        var session: Session
    }

    /// A write that waits for its turn (or is being proposed): MUTATE, REPLACE,
    /// REPLACE_SECTION, or DROP.
    struct PendingWrite {
        enum Kind {
            case write(Room.WriteRequest)
            case drop
        }
        var requestID: UInt64
        var session: Session
        var writeID: [UInt8]
        var kind: Kind
        /// When it was queued (an instant of `Hub.monotonicNow`): a write that loses races to
        /// other nodes' writes is proposed again until `retryWindow` after this.
        var queuedAt: ContinuousClock.Instant
        /// `WriteAckTimer.start()`'s stamp, 0 when not timed.
        var received: UInt64 = 0
        /// A read barrier has passed: the replica holds every record the log had acknowledged
        /// when the write arrived, so an answer without the log may come from it.
        var barrierPassed = false

        var isDrop: Bool { if case .drop = kind { true } else { false } }
    }

    /// The record proposed and not yet answered: one DROP's tombstone, or one or more writes.
    struct InFlight {
        /// The writes the record carries, in version order (one DROP alone).
        var writes: [PendingWrite]
        /// Matches the log's completion to this proposal (a completion for an older one is
        /// ignored).
        var token: UInt64
        /// The room's `logSequence` the proposal expected.
        var expected: UInt64
        /// What this node validated, to install without decoding when the record comes back
        /// right after `expected` (`Room.applyLogged`): each write's ops and the snapshot the
        /// last one leads to; nil for a DROP.
        var prepared: (ops: [[SnapshotOperation]], result: RoomSnapshot)?
        /// The record proposed, to recognise it.
        var entry: RoomLogEntry
        /// The log's `.stored(sequence)`, once it came.
        var storedAt: UInt64?
        /// The log refused it (`.superseded`): propose again once the room has moved past
        /// `expected`.
        var superseded = false
        /// The log has another publish of the same message id in flight (`.pending`): the same
        /// entry is proposed again at the next tick (`ReplicatedRoomEngine.maintainReplicas`).
        var pending = false
        /// The records applied since the proposal, by sequence: whether each was this very
        /// record. The writes are acknowledged only when the one at `storedAt` is: a record
        /// there that is another (the log lost this one, or answered for another node's record
        /// with the same message id) means they were not stored, and go again.
        var applied: [UInt64: Bool] = [:]
        /// Sequences of records voided since the proposal (`ReplicatedRoomEngine.void`): a `.stored` naming one
        /// means the log took the proposal but no replica applies it, so it goes again.
        var voided: Set<UInt64> = []
    }

    let name: String
    package var phase = Phase.loading
    /// Follows that failed in a row since the room was last current: a room that cannot be
    /// followed (a gap no checkpoint covers, a log down for long) is tried again after 1, 2, 4 …
    /// up to `maxRefollowDelay` seconds, not every second with an error each time.
    var failedFollows = 0
    /// When a `broken` replica is followed again (an instant of `Hub.monotonicNow`, as are
    /// the others here).
    var followAgainAt: ContinuousClock.Instant
    static let maxRefollowDelay = Duration.seconds(64)

    /// Counts one more failed follow and schedules the next one after `now`. O(1).
    func scheduleRefollow(now: ContinuousClock.Instant) -> Duration {
        failedFollows += 1
        let delay = min(Duration.seconds(1 << min(failedFollows - 1, 6)), Self.maxRefollowDelay)
        followAgainAt = now + delay
        return delay
    }
    /// When the current follow began (loading or following again), the in-flight proposal was
    /// stored or superseded, or the log last moved the replica (a base or a record applied or
    /// voided), whichever is latest: what `stallSeconds` is counted from (`waitsForRecords`).
    var waitingSince: ContinuousClock.Instant
    /// The room's current incarnation; nil until the log's `.base`.
    var room: Room?
    /// L of Protocol/CLUSTER.md §3: the sequence of the last record applied or voided, else the
    /// base's.
    var logSequence: UInt64 = 0
    var joins: [PendingJoin] = []
    var inFlight: InFlight?
    /// The read barriers of the room (JOINs whose resume is ahead of the replica, and the write
    /// barrier), sharing the log's answers: each session has one request in them at most (its
    /// later requests wait behind it, in its deferred input or in the room's queue).
    var barriers = ReadBarrierQueue()
    /// The write at the head of the queue, waiting for a read barrier before it is answered
    /// without the log: the writes behind it wait. Also in `barriers` until the log answers.
    var writeBarrier: ReadBarrier?
    /// Writes waiting, oldest first.
    private var waiting = Deque<PendingWrite>()

    /// How long a write that keeps losing races to other nodes' writes is validated and proposed
    /// again before it is refused (it is not refused for losing a race: contention is not a
    /// failure of the log).
    static let retryWindow = Duration.seconds(10)
    /// The most writes one record carries. Their DIFF frames together stay within the hub's
    /// frame limit (cluster mode lowers it to fit the servers' `max_payload`), which a single
    /// write's frame meets alone (`Room.checkFrameSize`).
    static let maxWritesPerRecord = 64
    /// Writes that may wait for one room beyond the one in flight.
    static let maxWaiting = 1024
    /// A follow that has not caught up, or a proposal whose record (stored) or the record that
    /// won over it (superseded) has not arrived, with no record applied for this long, is taken
    /// as a lost follow (the log's own failure detection should have said so first; this bounds
    /// what a silent stall holds up: the room's writes wait behind the proposal).
    static let stallSeconds: Int64 = 10

    /// A replica that begins to load at `now`.
    init(name: String, now: ContinuousClock.Instant) {
        self.name = name
        followAgainAt = now
        waitingSince = now
    }

    var waitingCount: Int { waiting.count }

    /// Queues `write` last; false when `maxWaiting` wait already.
    func enqueue(_ write: PendingWrite) -> Bool {
        guard waitingCount < Self.maxWaiting else { return false }
        waiting.append(write)
        return true
    }

    /// Puts `writes` back first, in their order (a superseded proposal, validated again before
    /// the others).
    func requeueFirst(_ writes: [PendingWrite]) {
        waiting.insert(contentsOf: writes, at: waiting.startIndex)
    }

    /// The first waiting write, left in the queue.
    var firstWaiting: PendingWrite? { waiting.first }

    func dequeue() -> PendingWrite? {
        waiting.popFirst()
    }

    /// Whether the replica waits for records the log owes it: it is loading or following
    /// again, or its proposal's record, or the one that superseded it, has not arrived.
    var waitsForRecords: Bool {
        if phase == .loading || phase == .refollowing { return true }
        guard let inFlight else { return false }
        return inFlight.superseded || inFlight.storedAt != nil
    }

    /// Whether the room can be forgotten: nobody joined here, nothing waits or is in flight.
    var isUnused: Bool {
        (room?.members.count ?? 0) == 0 && inFlight == nil && waitingCount == 0 && joins.isEmpty && barriers.joinCount == 0
            && writeBarrier == nil
    }
}
