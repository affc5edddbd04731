// Cluster mode: a record whose proposer expected a later subject sequence than the last
// one this replica has applied or voided (Protocol/CLUSTER.md §3, "Void records and gaps").

/// Records of the room's log this replica never received: the stream no longer holds them
/// (its retention, `--cluster-retain`, dropped them after a checkpoint older than them), or
/// they were lost on the way. Applying or voiding what follows would fork the room, so the
/// follow fails instead: the room takes no writes here until it is followed from a checkpoint
/// that covers them.
struct ReplicaGap: Error, CustomStringConvertible {
    var room: String
    /// The record that showed the gap.
    var sequence: UInt64
    /// The subject's last sequence its proposer expected: a record this replica never had.
    var expected: UInt64
    /// The last sequence the replica applied or voided (or its checkpoint's).
    var applied: UInt64
    var description: String {
        "room \(room): the log's record at sequence \(sequence) follows sequence \(expected), but this node has the room only up to sequence \(applied): the records between were missed (no longer in the stream, or never delivered)"
    }
}
