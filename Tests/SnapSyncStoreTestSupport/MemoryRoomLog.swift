package import SnapSyncStore
package import SnapSyncWire

/// A `RoomLog` held in this process: one ordered list of records per room, numbered by one
/// sequence shared by all rooms (like a JetStream stream's, so a room's sequences have gaps),
/// compare-and-set on the room's last sequence, message-id de-duplication, checkpoints in a
/// dictionary; optionally bounded retention and nats-server 2.9's stale-expectation race, to
/// test what a replica does with them. Each instance is one node's connection to the log; `init(sharing:)` makes
/// another node's, on the same records (as cluster nodes share the stream).
///
/// Nothing is delivered during a call: completions and events are queued, in the order the
/// log decided them, in one queue for all the nodes, and run by `runNext()` / `runAll()`, so a
/// test chooses when each node hears what (and, with `acknowledgeBeforeDelivering`, whether a
/// writer's acknowledgement or its record reaches it first). Not thread-safe: one thread, like
/// the daemon's loop.
package final class MemoryRoomLog: RoomLog {
    /// What the nodes share: the records, the message ids, the checkpoints, the queue.
    private final class Shared {
        var subjects: [String: [(sequence: UInt64, expected: UInt64, entry: RoomLogEntry)]] = [:]
        /// Stored message ids (non-empty) with the sequence their proposal expected, by room: the
        /// sequence they were stored at.
        var messageIDs: [String: [MessageKey: UInt64]] = [:]
        var checkpoints: [String: RoomLogCheckpoint] = [:]
        var savedCheckpoints: [(room: String, sequence: UInt64)] = []
        /// Every node's followers, by room.
        var followers: [String: [Follower]] = [:]
        var lastSequence: UInt64 = 0
        var queue: [() -> Void] = []
        var head = 0
        var acknowledgeBeforeDelivering = true
        var failProposals: (count: Int, error: StoreError) = (0, .logUnavailable("test"))
        var storeFailedProposals = false
        var retain: Int?
        var storesNextStaleProposal = false
        var losesCheckpoints = false
        var failFollows: Set<String> = []
        var beforeProposing: ((String) -> Void)?
        /// `losesNextProposal`: whether it is armed, and whether the lost record still reaches
        /// its proposer's follow.
        var losesNextProposal: (armed: Bool, deliveredToProposer: Bool) = (false, false)
        var answersNextProposalPending = false
        let epochSalt: UInt64

        init(epochSalt: UInt64) {
            self.epochSalt = epochSalt
        }
    }

    /// What JetStream de-duplicates on: `Nats-Msg-Id` is `<room>.<write id>.<expected sequence>`
    /// (Protocol/CLUSTER.md §4), so the same write id proposed at another position is another
    /// message.
    private struct MessageKey: Hashable {
        var id: [UInt8]
        var expected: UInt64
    }

    /// One follow of one room by one node: its events, and how far its catch-up delivered.
    private final class Follower {
        let events: (RoomLogEvent) -> Void
        /// Records up to this sequence reached `events` (or were covered by its base).
        var delivered: UInt64 = 0
        var started = false
        var isActive = true

        init(events: @escaping (RoomLogEvent) -> Void) {
            self.events = events
        }
    }

    private let shared: Shared
    /// This node's follows.
    private var follows: [String: Follower] = [:]

    /// A log of its own. `epochSalt` stands for the stream's creation time in the epochs'
    /// derivation.
    package init(epochSalt: UInt64 = 0x5eed) {
        shared = Shared(epochSalt: epochSalt)
    }

    /// Another node's connection to `other`'s log.
    package init(sharing other: MemoryRoomLog) {
        shared = other.shared
    }

    // MARK: Controls (shared by every node)

    /// When true (the default) a stored proposal's `.stored` is queued before its record's
    /// delivery to the followers; when false, after.
    package var acknowledgeBeforeDelivering: Bool {
        get { shared.acknowledgeBeforeDelivering }
        set { shared.acknowledgeBeforeDelivering = newValue }
    }
    /// While `count` is positive, each proposal fails with `error` (and `count` goes down); the
    /// proposal is not stored unless `storeFailedProposals`.
    package var failProposals: (count: Int, error: StoreError) {
        get { shared.failProposals }
        set { shared.failProposals = newValue }
    }
    /// Whether a proposal that fails is stored all the same (a timeout after the quorum had it).
    package var storeFailedProposals: Bool {
        get { shared.storeFailedProposals }
        set { shared.storeFailedProposals = newValue }
    }
    /// When set (at least 1), each room's subject keeps only its last `retain` records (JetStream's
    /// `max_msgs_per_subject`, `--cluster-retain`): older ones are gone, for a catch-up too.
    package var retain: Int? {
        get { shared.retain }
        set { shared.retain = newValue }
    }
    /// When true, the next proposal whose expected sequence is below the room's last one is
    /// stored all the same, after the last, and acknowledged (then the switch is off): what
    /// nats-server 2.9 does for concurrent publishes to a clustered stream (nats-io/nats-server#4320).
    package var storesNextStaleProposal: Bool {
        get { shared.storesNextStaleProposal }
        set { shared.storesNextStaleProposal = newValue }
    }
    /// While true, checkpoints saved are lost (as puts that failed); not in `savedCheckpoints`.
    package var losesCheckpoints: Bool {
        get { shared.losesCheckpoints }
        set { shared.losesCheckpoints = newValue }
    }
    /// Rooms whose next follow (by any node) fails: `.failed` in place of `.base`; used once.
    package var failFollows: Set<String> {
        get { shared.failFollows }
        set { shared.failFollows = newValue }
    }

    /// Arms a fault of the engine itself, as JetStream's stores diverging under a partition: the
    /// next proposal that would be stored is acknowledged, `.stored` at the sequence the next
    /// record will have, but not stored, so the next record stored by anyone takes that
    /// sequence. With `deliveredToProposer` its record also reaches the proposing node's follow
    /// (as from a server that held it before it was lost), and no other.
    package func losesNextProposal(deliveredToProposer: Bool) {
        shared.losesNextProposal = (true, deliveredToProposer)
    }

    /// When true, the next proposal is answered `.pending` and not stored (as JetStream answers
    /// a publish whose message id another publish in flight carries); then the switch is off.
    package var answersNextProposalPending: Bool {
        get { shared.answersNextProposalPending }
        set { shared.answersNextProposalPending = newValue }
    }

    /// Called with the room at the start of each proposal of any node, before the log decides
    /// it: a test may store a competing record there (a proposal made from inside is not
    /// passed to it again).
    package var beforeProposing: ((String) -> Void)? {
        get { shared.beforeProposing }
        set { shared.beforeProposing = newValue }
    }

    /// Ends this node's follow of `room` as a lost connection would: it gets `.failed`
    /// (queued) and no more events.
    package func interruptFollow(of room: String) {
        guard let follower = follows[room] else { return }
        end(follower, of: room)
        enqueue { follower.events(.failed(.logUnavailable("follow of room \(room): connection lost (test)"))) }
    }

    // MARK: Pumping

    /// Events and completions queued and not yet run.
    package var pendingCount: Int { shared.queue.count - shared.head }

    /// Runs the oldest queued event or completion; false when none is queued.
    @discardableResult
    package func runNext() -> Bool {
        guard shared.head < shared.queue.count else { return false }
        let job = shared.queue[shared.head]
        shared.head += 1
        if shared.head == shared.queue.count {
            shared.queue.removeAll(keepingCapacity: true)
            shared.head = 0
        }
        job()
        return true
    }

    /// Runs queued events and completions, and those they queue, until none is left.
    package func runAll() {
        while runNext() {}
    }

    private func enqueue(_ job: @escaping () -> Void) {
        shared.queue.append(job)
    }

    // MARK: Reading, for tests

    /// The room's records, oldest first.
    package func records(of room: String) -> [(sequence: UInt64, expected: UInt64, entry: RoomLogEntry)] {
        shared.subjects[room] ?? []
    }

    package func checkpoint(of room: String) -> RoomLogCheckpoint? {
        shared.checkpoints[room]
    }

    /// Changes the stored checkpoint of `room` in place, as damage or a faulty node would.
    package func damageCheckpoint(of room: String, _ damage: (inout RoomLogCheckpoint) -> Void) {
        guard var checkpoint = shared.checkpoints[room] else { return }
        damage(&checkpoint)
        shared.checkpoints[room] = checkpoint
    }

    /// Checkpoints saved by any node, in order.
    package var savedCheckpoints: [(room: String, sequence: UInt64)] { shared.savedCheckpoints }

    /// Whether this node follows `room`.
    package func isFollowing(_ room: String) -> Bool {
        follows[room]?.isActive ?? false
    }

    // MARK: RoomLog

    package func follow(room: String, events: @escaping (RoomLogEvent) -> Void) {
        precondition(follows[room].map { !$0.isActive } ?? true, "room \(room) is followed already")
        let follower = Follower(events: events)
        follows[room] = follower
        shared.followers[room, default: []].append(follower)
        let fails = shared.failFollows.remove(room) != nil
        enqueue { [self] in
            guard follower.isActive else { return }
            if fails {
                end(follower, of: room)
                follower.events(.failed(.logUnavailable("follow of room \(room): no quorum (test)")))
                return
            }
            // The catch-up, from this one job: the base, every record after it, then current;
            // records stored later are queued one by one (`store`).
            let base = shared.checkpoints[room]
            follower.started = true
            follower.delivered = base?.sequence ?? 0
            follower.events(.base(base))
            for (sequence, expected, entry) in shared.subjects[room] ?? [] where sequence > follower.delivered {
                guard follower.isActive else { return }
                follower.delivered = sequence
                follower.events(.record(sequence: sequence, expected: expected, entry))
            }
            guard follower.isActive else { return }
            follower.events(.current)
        }
    }

    package func lastSequence(room: String, completion: @escaping (Result<UInt64, StoreError>) -> Void) {
        let last = shared.subjects[room]?.last?.sequence ?? 0
        enqueue { completion(.success(last)) }
    }

    package func unfollow(room: String) {
        if let follower = follows[room] { end(follower, of: room) }
    }

    package func propose(
        room: String, expectedSequence: UInt64, messageID: [UInt8], entry: RoomLogEntry,
        completion: @escaping (ProposalOutcome) -> Void
    ) {
        if let hook = shared.beforeProposing {
            shared.beforeProposing = nil
            hook(room)
            shared.beforeProposing = hook
        }
        if shared.failProposals.count > 0 {
            shared.failProposals.count -= 1
            let error = shared.failProposals.error
            if shared.storeFailedProposals { _ = store(room: room, expected: expectedSequence, messageID: messageID, entry: entry) }
            enqueue { completion(.failed(error)) }
            return
        }
        if shared.answersNextProposalPending {
            shared.answersNextProposalPending = false
            enqueue { completion(.pending) }
            return
        }
        // De-duplication first, as JetStream does: a repeat of a proposal (same write id, same
        // expectation) is answered with the original's sequence, even once the room has moved.
        if !messageID.isEmpty, let original = shared.messageIDs[room]?[MessageKey(id: messageID, expected: expectedSequence)] {
            enqueue { completion(.stored(sequence: original)) }
            return
        }
        let last = shared.subjects[room]?.last?.sequence ?? 0
        if expectedSequence < last && shared.storesNextStaleProposal {
            shared.storesNextStaleProposal = false
        } else if expectedSequence != last {
            enqueue { completion(.superseded) }
            return
        }
        if shared.losesNextProposal.armed {
            let sequence = shared.lastSequence + 1
            let delivered = shared.losesNextProposal.deliveredToProposer
            shared.losesNextProposal = (false, false)
            enqueue { completion(.stored(sequence: sequence)) }
            if delivered, let follower = follows[room] {
                enqueue {
                    guard follower.isActive, follower.started, sequence > follower.delivered else { return }
                    follower.delivered = sequence
                    follower.events(.record(sequence: sequence, expected: expectedSequence, entry))
                }
            }
            return
        }
        if shared.acknowledgeBeforeDelivering {
            let sequence = shared.lastSequence + 1
            enqueue { completion(.stored(sequence: sequence)) }
            _ = store(room: room, expected: expectedSequence, messageID: messageID, entry: entry)
        } else {
            let sequence = store(room: room, expected: expectedSequence, messageID: messageID, entry: entry)
            enqueue { completion(.stored(sequence: sequence)) }
        }
    }

    package func saveCheckpoint(_ image: RoomImage, history: [WriteRecord], sequence: UInt64, chain: RoomChain?) {
        if shared.losesCheckpoints { return }
        shared.savedCheckpoints.append((image.room, sequence))
        if let saved = shared.checkpoints[image.room], saved.sequence >= sequence { return }
        shared.checkpoints[image.room] = RoomLogCheckpoint(image: image, history: history, sequence: sequence, chain: chain)
    }

    package func epoch(room: String, after sequence: UInt64) -> UInt64 {
        // FNV-1a over the salt, the room and the sequence: deterministic, so every node sharing
        // this log agrees; 0 is mapped to 1.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ byte: UInt8) {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        for shift in stride(from: 0, to: 64, by: 8) { mix(UInt8(truncatingIfNeeded: shared.epochSalt >> shift)) }
        for byte in room.utf8 { mix(byte) }
        mix(0)
        for shift in stride(from: 0, to: 64, by: 8) { mix(UInt8(truncatingIfNeeded: sequence >> shift)) }
        return hash == 0 ? 1 : hash
    }

    // MARK: Storing

    /// Appends `entry` to the room's subject at the next sequence, drops the subject's oldest
    /// records beyond `retain`, and queues its delivery to every follower that has started (one
    /// that has not gets it from its catch-up).
    private func store(room: String, expected: UInt64, messageID: [UInt8], entry: RoomLogEntry) -> UInt64 {
        shared.lastSequence += 1
        let sequence = shared.lastSequence
        shared.subjects[room, default: []].append((sequence, expected, entry))
        if let retain = shared.retain, let count = shared.subjects[room]?.count, count > retain {
            shared.subjects[room]?.removeFirst(count - max(retain, 1))
        }
        if !messageID.isEmpty { shared.messageIDs[room, default: [:]][MessageKey(id: messageID, expected: expected)] = sequence }
        for follower in shared.followers[room] ?? [] {
            enqueue {
                guard follower.isActive, follower.started, sequence > follower.delivered else { return }
                follower.delivered = sequence
                follower.events(.record(sequence: sequence, expected: expected, entry))
            }
        }
        return sequence
    }

    /// Ends `follower`'s follow: no more events.
    private func end(_ follower: Follower, of room: String) {
        follower.isActive = false
        if follows[room] === follower { follows[room] = nil }
        shared.followers[room]?.removeAll { $0 === follower }
        if shared.followers[room]?.isEmpty == true { shared.followers[room] = nil }
    }
}
