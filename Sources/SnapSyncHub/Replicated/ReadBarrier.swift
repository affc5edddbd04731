/// Cluster mode: a request that must not be answered from a replica behind the cluster's
/// log waits for a read barrier: the room subject's last sequence as the log's leader knows it
/// (`RoomLog.lastSequence`), asked after the request arrived, then the replica's `logSequence`
/// at or past it. The replica has then applied every record acknowledged before the request
/// arrived, whichever node wrote it (Protocol/CLUSTER.md §9). Held by its `ReplicatedRoom`
/// (`ReadBarrierQueue`, `writeBarrier`); the barriers of a room share the log's answers.
final class ReadBarrier {
    enum Waiter {
        /// A JOIN whose resume is ahead of the replica, or in an epoch it is not at.
        case join(ReplicatedRoom.PendingJoin)
        /// A write that changes nothing here, a compare-and-set expecting a version ahead of the
        /// replica, or a DROP of a room at version 0: it holds the room's write queue.
        case write(ReplicatedRoom.PendingWrite)
    }

    let waiter: Waiter
    /// The subject's last sequence, once the log has answered.
    var target: UInt64?
    /// When the barrier began: it is given up after `ReplicatedRoom.stallSeconds`.
    let since: ContinuousClock.Instant
    /// Its waiter has been answered (released, given up, refused): a later answer of the log
    /// passes it by.
    var ended = false

    init(_ waiter: Waiter, since: ContinuousClock.Instant) {
        self.waiter = waiter
        self.since = since
    }
}
