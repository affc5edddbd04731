import DequeModule

/// Cluster mode: the read barriers of one replica, sharing the log's answers. At most one
/// `RoomLog.lastSequence` request is in flight per room: the barriers that arrived before it was
/// sent (`asked`) share its answer; those arriving while it is in flight (`unasked`) share the
/// next one, sent when it answers, since an answer asked before they arrived may not cover the
/// writes acknowledged before they did (Protocol/CLUSTER.md §9). So N waiters make at most two
/// requests at a time, not N.
///
/// The JOINs whose answer came (`targeted`) are kept in arrival order, which is also the order
/// of their targets (each answer is raised to the previous one: the subject's last sequence
/// does not go down, and waiting for more is safe), so those the replica has passed are a
/// prefix: releasing is O(released), each barrier moved a constant number of times.
struct ReadBarrierQueue {
    /// JOINs with their target; targets non-decreasing.
    private var targeted = Deque<ReadBarrier>()
    /// Barriers (JOINs, the write) the request in flight covers.
    private var asked: [ReadBarrier] = []
    /// Barriers that arrived while the request was in flight: the next request covers them.
    private var unasked: [ReadBarrier] = []
    /// Whether a `lastSequence` request is in flight.
    private(set) var isAsking = false
    /// The highest target given so far.
    private var lastTarget: UInt64 = 0
    /// JOINs waiting, not ended (targeted, asked or unasked).
    private(set) var joinCount = 0

    /// Adds `barrier`; true when a request must be sent for it now (none is in flight). O(1).
    mutating func add(_ barrier: ReadBarrier) -> Bool {
        if case .join = barrier.waiter { joinCount += 1 }
        if isAsking {
            unasked.append(barrier)
            return false
        }
        asked.append(barrier)
        isAsking = true
        return true
    }

    /// A join barrier ended (released, given up, refused): counted out. O(1).
    mutating func joinEnded() {
        joinCount -= 1
    }

    /// The request in flight answered `last`: its barriers get their target (the write barrier
    /// too, which its replica holds). Returns whether the next request must be sent now (for
    /// the barriers that arrived meanwhile). O(barriers asked).
    mutating func answered(_ last: UInt64) -> Bool {
        let target = max(last, lastTarget)
        lastTarget = target
        for barrier in asked where !barrier.ended {
            barrier.target = target
            if case .join = barrier.waiter { targeted.append(barrier) }
        }
        return nextRound()
    }

    /// The request in flight failed: the barriers it covered, not ended, and whether the next
    /// request must be sent now. O(barriers asked).
    mutating func failed() -> (barriers: [ReadBarrier], askAgain: Bool) {
        let failed = asked.filter { !$0.ended }
        return (failed, nextRound())
    }

    private mutating func nextRound() -> Bool {
        asked = unasked.filter { !$0.ended }
        unasked = []
        isAsking = !asked.isEmpty
        return isAsking
    }

    /// Takes out the JOINs whose target is at or below `sequence`, oldest first.
    /// - Complexity: O(JOINs taken out).
    mutating func passedJoins(upTo sequence: UInt64) -> [ReadBarrier] {
        var passed: [ReadBarrier] = []
        targeted.removeFirst(while: { $0.target.map { $0 <= sequence } ?? false }) { if !$0.ended { passed.append($0) } }
        return passed
    }

    /// The JOINs that began at or before `cutoff`, not ended, oldest first (they are not taken
    /// out: ending them marks them `ended`). The targeted ones are older than the others, so
    /// the asked and unasked ones are looked at only once every targeted one has expired.
    /// - Complexity: O(JOINs expired), or O(JOINs waiting for an answer) once the targeted have.
    mutating func expiredJoins(beganBy cutoff: ContinuousClock.Instant) -> [ReadBarrier] {
        var expired: [ReadBarrier] = []
        targeted.removeFirst(while: { $0.since <= cutoff }) { if !$0.ended { expired.append($0) } }
        guard targeted.isEmpty else { return expired }
        for barrier in asked + unasked where !barrier.ended && barrier.since <= cutoff {
            if case .join = barrier.waiter { expired.append(barrier) }
        }
        return expired
    }

    /// Every JOIN waiting, not ended, oldest first; the queue is left empty (its replica is
    /// forgotten). O(barriers).
    mutating func removeAllJoins() -> [ReadBarrier] {
        let all = Array(targeted) + asked + unasked
        targeted.removeAll()
        asked = []
        unasked = []
        isAsking = false
        joinCount = 0
        return all.filter { barrier in
            guard !barrier.ended, case .join = barrier.waiter else { return false }
            return true
        }
    }
}
