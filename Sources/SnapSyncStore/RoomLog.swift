package import SnapSyncWire

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
    func saveCheckpoint(_ image: RoomImage, history: [WriteRecord], sequence: UInt64, chain: RoomChain?)
    /// The epoch of the room's incarnation that begins after subject sequence `sequence` (0: its
    /// first; else the sequence of the tombstone that ended the previous one). Deterministic and
    /// the same on every node, never 0, so no record is needed to create a room and a JOIN of a
    /// room nobody wrote needs no quorum.
    func epoch(room: String, after sequence: UInt64) -> UInt64
}

/// One record of a room's subject (Protocol/CLUSTER.md §3).
package enum RoomLogEntry: Sendable, Equatable {
    /// One or more writes, the room's next versions, with the room's chain before the first
    /// and after the last (kind 0x07): what a node proposes.
    case writes(ChainedWrites)
    /// DROP: the incarnation `epoch` ended at `version`, whose chain was `chain` (kind 0x08);
    /// the next incarnation's epoch is `RoomLog.epoch(room:after:)` of this record's sequence,
    /// at version 0, empty, its chain `RoomChain.start(epoch:)`.
    case chainedTombstone(epoch: UInt64, version: UInt64, chain: RoomChain)
    /// A write without a chain (kinds 0x01 and 0x06), as nodes wrote before records carried
    /// one: still applied, its chain computed.
    case write(WriteRecord)
    /// A tombstone without a chain (kind 0x04), as nodes wrote before records carried one.
    case tombstone(epoch: UInt64, version: UInt64)
}

/// Consecutive versions of one incarnation, as one record of the log: several writes proposed
/// at once travel in one round trip to the log (the cluster's group commit).
package struct ChainedWrites: Sendable, Equatable {
    /// The writes, oldest first: one room and epoch, versions consecutive.
    package var records: [WriteRecord]
    /// The room's chain before the first write: what the proposer's replica had.
    package var chainBefore: RoomChain
    /// The chain after the last write (`chainBefore` advanced by every DIFF frame).
    package var chainAfter: RoomChain

    package init(records: [WriteRecord], chainBefore: RoomChain, chainAfter: RoomChain) {
        precondition(!records.isEmpty, "a record holds at least one write")
        self.records = records
        self.chainBefore = chainBefore
        self.chainAfter = chainAfter
    }

    /// The writes of `records` after `chain`, the chain after them computed.
    /// - Complexity: O(total size of the DIFF frames), one SHA-256 pass.
    package init(records: [WriteRecord], after chain: RoomChain) {
        self.init(records: records, chainBefore: chain, chainAfter: records.reduce(chain) { $0.next(frame: $1.diffFrame) })
    }

    package var epoch: UInt64 { records[0].epoch }
    package var firstVersion: UInt64 { records[0].version }
    package var lastVersion: UInt64 { records[records.count - 1].version }
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
    /// The room's chain at the image's version; nil in a checkpoint saved before checkpoints
    /// carried it.
    package var chain: RoomChain?
    package init(image: RoomImage, history: [WriteRecord], sequence: UInt64, chain: RoomChain?) {
        self.image = image
        self.history = history
        self.sequence = sequence
        self.chain = chain
    }
}

package enum ProposalOutcome: Sendable, Equatable {
    /// A quorum of the log's replicas has it at `sequence` (also for a repeat of a stored message id).
    case stored(sequence: UInt64)
    /// Refused: the subject's last sequence is not the expected one (another node wrote first).
    case superseded
    /// Not decided yet: another publish with the same message id (the same write, through
    /// another node, at the same position) is being stored. Proposing the same entry again a
    /// little later gets that one's outcome (`.stored` at its sequence) or decides this one.
    case pending
    /// No answer (timeout), no quorum, no connection: the entry may still be stored later.
    case failed(StoreError)
}
