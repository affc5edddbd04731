// A joined room's presence (protocol version 4, PROTOCOL.md §9 "Presence", §11.24–§11.28), read
// and set through its replica. The client's side of it is SnapSyncClient+Presence.swift.

/// The replica's presence, under the broadcast's lock.
struct PresenceState: Sendable {
    /// The set as of the last PRESENCE or PRESENCE_DIFF; nil before the watch is answered.
    var set: PresenceSet?
    /// A watch was asked of the client (by the first `presence` stream); cleared when it fails.
    var watchRequested = false
}

/// What a presence stream is sent: an update, or why the watch failed (the stream's end).
enum PresenceEvent: Sendable {
    case update(PresenceUpdate)
    case failed(SnapSyncError)
}

/// The replica's client, held weakly (a replica outlives nothing of its client's).
final class ClientReference: @unchecked Sendable {
    // Set once, in `init`, and never written again: safe to read from any thread.
    private weak var client: SnapSyncClient?

    init(_ client: SnapSyncClient?) {
        self.client = client
    }

    var value: SnapSyncClient? { client }
}

/// The stream of a room's presence (`RoomReplica.presence`): `.initial` with the whole set
/// (once the watch is answered, and again after each reconnect), then one `.diff` per
/// PRESENCE_DIFF. It ends (nil) when the room is left or lost or the client closes, and throws a
/// `SnapSyncError` when the watch fails: `.unsupportedByServer` on a connection of protocol
/// version 3 or older, `.notJoined`, `.rejected`, `.closed`.
public struct PresenceUpdates: AsyncSequence, Sendable {
    public typealias Element = PresenceUpdate

    let events: AsyncStream<PresenceEvent>

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<PresenceEvent>.AsyncIterator
        var done = false

        public mutating func next() async throws(SnapSyncError) -> PresenceUpdate? {
            guard !done, let event = await base.next() else { return nil }
            switch event {
            case .update(let update):
                return update
            case .failed(let error):
                done = true
                throw error
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: events.makeAsyncIterator())
    }
}

extension RoomReplica {
    /// A new stream of the room's presence (protocol version 4): the first access starts
    /// watching it (PRESENCE_WATCH); each stream starts with `.initial`, the whole set (at once
    /// when the watch is already answered), then gets every `.diff`. Any number of streams may
    /// be consumed; the watch stays on until the room is left.
    ///
    /// After a reconnect the client watches again on the new connection (where this client has
    /// a new member id) and each stream gets a new `.initial`, which replaces the set; until
    /// then the last set stays, possibly stale. A stream finishes when the room is left or lost
    /// or the client closes; it throws when the watch fails (see `PresenceUpdates`).
    public var presence: PresenceUpdates {
        var start = false
        let stream = presenceBroadcast.subscribe { state in
            state.set.map { PresenceEvent.update(PresenceUpdate(kind: .initial, presence: $0)) }
        }
        presenceBroadcast.publish { state in
            if !state.watchRequested {
                state.watchRequested = true
                start = true
            }
            return nil
        }
        if start {
            let room = room
            if let client = owner.value {
                Task { [self] in await client.watchPresence(room, for: self) }
            } else {
                presenceFailed(.closed)
            }
        }
        return PresenceUpdates(events: stream)
    }

    /// The presence as of the last update, or nil when it is not watched yet (read `presence`
    /// to watch it).
    public var presenceSet: PresenceSet? { presenceBroadcast.read { $0.set } }

    /// Sets this client's presence state in the room (SET_PRESENCE, protocol version 4):
    /// opaque bytes, at most `WireLimits.maxPresenceBytes` (`SnapSyncClient.serverLimits`);
    /// empty clears it. The state is this connection's: after a reconnect the client sets the
    /// last one again on the new connection.
    /// - Throws: `.unsupportedByServer` on protocol version 3 or older; `.notJoined`;
    ///   `.rejected` with code `payload_too_large` (over the limit, checked before sending) or
    ///   `busy` (set too often: the previous state stays); `.connectionLost`; `.timedOut`.
    public func setPresence(_ state: [UInt8]) async throws(SnapSyncError) {
        guard let client = owner.value else { throw .closed }
        try await client.setPresence(state, in: room)
    }

    /// Sets the state to `value` encoded by `coder` (for a `Codable` value, `.json`).
    /// - Throws: `.presenceCoding` when `value` does not encode; then as `setPresence(_:)`.
    public func setPresence<State: Sendable>(_ value: State, coder: ElementCoder<State>) async throws(SnapSyncError) {
        let bytes: [UInt8]
        do throws(ElementCodingError) {
            bytes = try coder.encode(value, as: .itemPayload)
        } catch {
            throw .presenceCoding("SET_PRESENCE \(room): the state did not encode: \(error.message)")
        }
        try await setPresence(bytes)
    }

    /// Clears this client's presence state (SET_PRESENCE with no bytes).
    public func clearPresence() async throws(SnapSyncError) {
        try await setPresence([UInt8]())
    }

    /// One page of the room's presence (PRESENCE_LIST), in member id order: the members whose id
    /// is above `after` (0: from the start), at most `limit` (0: the server's page size, at most
    /// `WireLimits.presenceView`). Pass the page's `next` as `after` for the following page. It
    /// does not watch.
    /// - Throws: as `setPresence(_:)` (but for the size).
    public func listPresence(after: UInt64 = 0, limit: Int = 0) async throws(SnapSyncError) -> PresencePage {
        guard let client = owner.value else { throw .closed }
        return try await client.listPresence(room, after: after, limit: limit)
    }

    // MARK: The client's side

    /// PRESENCE answered the watch: `set` replaces what was known, and every stream hears it.
    func presenceWatched(_ set: PresenceSet) {
        presenceBroadcast.publish { state in
            state.set = set
            return .update(PresenceUpdate(kind: .initial, presence: set))
        }
    }

    /// PRESENCE_DIFF: applied to the set and delivered. Ignored before the watch is answered.
    func presenceChanged(count: Int, changes: [PresenceChange]) {
        presenceBroadcast.publish { state in
            guard var set = state.set else { return nil }
            set.apply(count: count, changes: changes)
            state.set = set
            return .update(PresenceUpdate(kind: .diff, presence: set, changes: changes))
        }
    }

    /// The watch failed: the streams throw `error` and end; the next `presence` asks again.
    func presenceFailed(_ error: SnapSyncError) {
        presenceBroadcast.publish { state in
            state.watchRequested = false
            state.set = nil
            return .failed(error)
        }
    }

    /// Whether a watch is wanted (streams asked for it and it has not failed).
    var presenceWanted: Bool { presenceBroadcast.read { $0.watchRequested } }
}

#if canImport(Foundation)
    extension RoomReplica {
        /// Sets the state to `value` as JSON (sorted keys), what `PresenceMember.state(as: .json, room:)` reads.
        public func setPresence<State: Codable & Sendable>(_ value: State) async throws(SnapSyncError) {
            try await setPresence(value, coder: .json)
        }
    }

    extension TypedReplica {
        /// Sets this client's presence state to `value` as JSON (`RoomReplica.setPresence(_:)`).
        public func setPresence<State: Codable & Sendable>(_ value: State) async throws(SnapSyncError) {
            try await replica.setPresence(value, coder: .json)
        }

        /// The room's presence, each member's state decoded as `State` (JSON) (nil: none set).
        /// nil when presence is not watched yet.
        /// - Throws: `.presenceCoding` naming the first member whose state does not decode.
        public func presenceStates<State: Codable & Sendable>(as type: State.Type) throws(SnapSyncError) -> [(
            member: PresenceMember, state: State?
        )]? {
            guard let set = replica.presenceSet else { return nil }
            return try set.states(as: ElementCoder<State>.json)
        }
    }
#endif

extension TypedReplica {
    /// The room's presence stream (`RoomReplica.presence`).
    public var presence: PresenceUpdates { replica.presence }

    /// Sets this client's presence state to `value` encoded by `coder`.
    public func setPresence<State: Sendable>(_ value: State, coder: ElementCoder<State>) async throws(SnapSyncError) {
        try await replica.setPresence(value, coder: coder)
    }

    /// Clears this client's presence state.
    public func clearPresence() async throws(SnapSyncError) {
        try await replica.clearPresence()
    }

    /// One page of the room's presence (`RoomReplica.listPresence(after:limit:)`).
    public func listPresence(after: UInt64 = 0, limit: Int = 0) async throws(SnapSyncError) -> PresencePage {
        try await replica.listPresence(after: after, limit: limit)
    }
}
