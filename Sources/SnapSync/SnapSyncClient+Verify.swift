import CoreMetrics
import SnapSyncModel
import SnapSyncWire

// Proving that a replica holds its room (VERIFY and DIGEST, PROTOCOL.md §11.22–§11.23): the
// chain checks every DIFF against the room's history, and the digest checks the replica's state
// itself, so a replica damaged in memory, or built by a bug in this client's apply, is found too.

extension SnapSyncClient {
    /// What `SnapSyncClient.verify(_:)` found.
    public enum Verification: Hashable, Sendable, CustomStringConvertible {
        /// The replica's state and chain at `position` are the room's at that version.
        case holds(RoomPosition)
        /// They are not: the replica is dropped and the room joined afresh; the `.resyncing` event
        /// and the `.resync` change that follows carry the same reason (`.corrupted`, `.diverged` or
        /// `.outOfSequence`).
        case diverged(ResyncReason)
        /// The replica was being replaced or caught up when the answer came (a resync started after
        /// the request was sent), so there was nothing settled to compare: ask again once it is live.
        case notCompared

        public var description: String {
            switch self {
            case .holds(let position): "the replica holds the room at \(position)"
            case .diverged(let reason): "the replica diverged: \(reason)"
            case .notCompared: "the replica was being replaced; nothing compared"
            }
        }
    }
}

extension SnapSyncClient {
    /// Asks the server for `room`'s digest and chain at this replica's position and compares
    /// them with the replica's own (SHA-256 of its canonical encoding, PROTOCOL.md §4, and its
    /// chain, §9). A mismatch drops the replica and joins afresh, as a DIFF whose chain does not
    /// follow does; it is counted in `divergences`. Costs the server one hash of the room per
    /// version asked about, and this client one hash of its replica.
    /// - Throws: `.notJoined` when this client has not joined `room` or its first snapshot has not
    ///   arrived; `.unsupportedByServer` on a connection of protocol version 1 or 2; `.rejected`
    ///   with code `busy` when the server declines to hash a large room again so soon (retry
    ///   a little later);
    ///   `.connectionLost` when not connected or when the connection drops before the answer;
    ///   `.timedOut` after `requestTimeout`.
    public func verify(_ room: String) async throws(SnapSyncError) -> SnapSyncClient.Verification {
        try checkUsable()
        guard case .ready(let connection) = link else { throw .connectionLost("VERIFY \(room): not connected") }
        guard let entry = rooms[room], entry.loaded else { throw .notJoined(room: room) }
        guard ProtocolVersion.hasChain(version: protocolVersion) else {
            throw .unsupportedByServer("VERIFY \(room): the connection speaks protocol version \(protocolVersion), VERIFY needs 3")
        }
        let call = newCallID()
        let requestID = newRequest(.verify(room: room, call: call))
        connection.send(.verify(requestID: requestID, room: room))
        guard case .verification(let result) = try await wait(call, what: "VERIFY \(room)").get() else {
            preconditionFailure("a VERIFY call completes with a verification")
        }
        return result
    }

    /// DIGEST: the room at `position` as the server holds it. Frames arrive in the order the
    /// server queued them, so a live replica is at exactly that position now.
    func handleDigest(requestID: UInt64, room: String, position: RoomPosition, digest: SnapshotDigest, chain: RoomChain) {
        guard case .verify(let asked, let call)? = requests.removeValue(forKey: requestID), asked == room else {
            return violation("DIGEST of \(room) answers no VERIFY of it (request \(requestID))")
        }
        guard let entry = rooms[room], case .live = entry.phase else { return complete(call, .success(.verification(.notCompared))) }
        let replica = entry.replica.current
        let reason: ResyncReason
        if replica.position != position {
            reason = .outOfSequence(expected: replica.position, received: position)
        } else if let held = entry.chain, held != .unknown, chain != .unknown, held != chain {
            reason = .diverged(expected: held, received: chain)
        } else {
            let own = replica.snapshot.digest
            guard own != digest else { return complete(call, .success(.verification(.holds(position)))) }
            reason = .corrupted(expected: digest, computed: own)
        }
        rooms[room]!.distrusted = true
        countDivergence(reason)
        resync(room, reason)
        complete(call, .success(.verification(.diverged(reason))))
    }

    /// One more replica found not to hold its room: `divergences`, and the swift-metrics counter
    /// `snapsync_client_divergences_total` with the dimension `reason` (`chain`: a DIFF's or
    /// DIGEST's chain; `digest`: the state itself; `sequence`: a DIGEST at another position).
    func countDivergence(_ reason: ResyncReason) {
        divergences += 1
        let name: String
        switch reason {
        case .corrupted: name = "digest"
        case .outOfSequence: name = "sequence"
        default: name = "chain"
        }
        Counter(label: "snapsync_client_divergences_total", dimensions: [("reason", name)]).increment()
    }
}
