/// Cluster mode's seam, beside `RoomStore`: the room's total order is a replicated log
/// (NATS JetStream), one subject per room. The Hub proposes records and applies what the log
/// delivers; it never applies its own write before the log has ordered it.
/// Every method and every callback runs on the daemon's loop thread.
package protocol RoomLog: AnyObject {
    /// Starts following `room`: `events` gets, in this order, `.base` once, then every
    /// `.record` of the room's subject after the base's sequence, in subject order, `.current`
    /// once when every record stored when following began has been delivered, then the later
    /// records as they are stored, until `unfollow`. `.failed` ends the follow (no more events;
    /// call `follow` again to retry). A second `follow` of a followed room is a programming error.
    func follow(room: String, events: @escaping (RoomLogEvent) -> Void)
    /// Stops following `room` (no more events, not even for records already in flight).
    func unfollow(room: String)
    /// Appends `entry` to the room's subject if and only if the subject's last sequence is
    /// `expectedSequence` (0: the subject is empty). `messageID` (the write id, may be empty:
    /// then no de-duplication) lets the log answer a repeat as `.stored` at the original's
    /// sequence. `completion` runs exactly once, on the loop thread.
    func propose(
        room: String, expectedSequence: UInt64, messageID: [UInt8], entry: RoomLogEntry,
        completion: @escaping (ProposalOutcome) -> Void)
    /// The sequence of the last record stored in the room's subject (0: none), as the log's
    /// leader knows it: every record acknowledged before this call is at or below it. A replica
    /// that has applied up to it has seen every acknowledged write (a read barrier).
    /// `completion` runs exactly once, on the loop thread, never inside this call.
    func lastSequence(room: String, completion: @escaping (Result<UInt64, StoreError>) -> Void)
    /// Saves `image` as the room's checkpoint covering the subject up to `sequence` (fire and
    /// forget: a failure is logged by the log and counted, never fatal; the next one replaces it).
    func saveCheckpoint(_ image: RoomImage, history: [WriteRecord], sequence: UInt64)
    /// The epoch of the room's incarnation that begins after subject sequence `sequence` (0: its
    /// first; else the sequence of the tombstone that ended the previous one). Deterministic and
    /// the same on every node, never 0, so no record is needed to create a room and a JOIN of a
    /// room nobody wrote needs no quorum.
    func epoch(room: String, after sequence: UInt64) -> UInt64
}

/// One record of a room's subject.
package enum RoomLogEntry: Sendable, Equatable {
    /// An applied write (version = the previous + 1 in `epoch`), with its write id and DIFF frame.
    case write(WriteRecord)
    /// DROP: the incarnation `epoch` ended at `version`; the next incarnation's epoch is
    /// `RoomLog.epoch(room:after:)` of this record's sequence, at version 0, empty.
    case tombstone(epoch: UInt64, version: UInt64)
}

package enum RoomLogEvent {
    /// Where the room starts: its latest checkpoint (`image` with its `history` records, covering
    /// the subject up to `sequence`), or nil: an empty room at version 0, epoch
    /// `epoch(room:after: 0)`, sequence 0.
    case base(RoomLogCheckpoint?)
    /// The record stored at subject/stream sequence `sequence`, proposed with the expectation that
    /// the subject's last sequence was `expected` (Protocol/CLUSTER.md, "Void records": a record
    /// expecting less than the sequence before it is void; expecting more, records were missed).
    case record(sequence: UInt64, expected: UInt64, RoomLogEntry)
    /// Caught up (see `follow`).
    case current
    case failed(StoreError)
}

package struct RoomLogCheckpoint: Sendable {
    package var image: RoomImage
    package var history: [WriteRecord]
    package var sequence: UInt64
    package init(image: RoomImage, history: [WriteRecord], sequence: UInt64) {
        self.image = image
        self.history = history
        self.sequence = sequence
    }
}

package enum ProposalOutcome: Sendable, Equatable {
    /// A quorum of the log's replicas has it at `sequence` (also for a repeat of a stored message id).
    case stored(sequence: UInt64)
    /// Refused: the subject's last sequence is not the expected one (another node wrote first).
    case superseded
    /// No answer (timeout), no quorum, no connection: the entry may still be stored later.
    case failed(StoreError)
}
