import SnapSyncWire

// Presence (protocol version 4, PROTOCOL.md §9 "Presence", §11.24–§11.28): the client's side of
// `RoomReplica.presence`, `setPresence` and `listPresence` (RoomReplica+Presence.swift).
//
// A presence request needs the server to count this connection as a member of the room, which
// it does once the room's JOIN is answered (`RoomEntry.member`). On each connection, when the
// JOIN of a room is answered (the first join, or the rejoin after a reconnect), the client sets
// the room's last presence state again and watches its presence again if a stream asked for it:
// the new connection is a new member, with a new member id, and the server forgot the old one.

extension SnapSyncClient {
    /// This client's member id in the presence of every room it joined: the session id of the
    /// last WELCOME (`session`), which changes with each connection. nil before the first.
    public var sessionID: UInt64? { session?.id }

    /// A `presence` stream asked for the watch of `room`: sent now when the connection serves
    /// presence and the room's JOIN is answered on it, else once it is (or failed at once when
    /// it cannot be: an older server, no connection).
    func watchPresence(_ room: String, for replica: RoomReplica) {
        // Left (the streams have finished), perhaps joined again with another replica.
        guard let entry = rooms[room], entry.replica === replica else { return }
        switch state {
        case .closed: return entry.replica.presenceFailed(.closed)
        case .disconnected: return entry.replica.presenceFailed(.connectionLost("PRESENCE_WATCH \(room): not connected"))
        case .connecting, .reconnecting, .connected: break
        }
        guard case .ready = link else { return }
        guard ProtocolVersion.hasPresence(protocolVersion) else {
            return entry.replica.presenceFailed(presenceUnsupported("PRESENCE_WATCH", room))
        }
        if entry.member && !entry.watchingPresence { sendPresenceWatch(room) }
    }

    func sendPresenceWatch(_ room: String) {
        guard case .ready(let connection) = link, rooms[room] != nil else { return }
        rooms[room]!.watchingPresence = true
        let requestID = newRequest(.presenceWatch(room: room))
        connection.send(.presenceWatch(requestID: requestID, room: room, watch: true))
    }

    /// The JOIN of `room` was answered on this connection (called after the entry is written
    /// back). The first time on a connection, its presence is restored there.
    func joinAnswered(_ room: String) {
        guard let entry = rooms[room], !entry.member, case .ready(let connection) = link else { return }
        rooms[room]!.member = true
        let wanted = entry.replica.presenceWanted
        guard ProtocolVersion.hasPresence(protocolVersion) else {
            // A failover to an older server: the streams hear it rather than wait.
            if wanted { entry.replica.presenceFailed(presenceUnsupported("PRESENCE_WATCH", room)) }
            return
        }
        if !entry.presenceState.isEmpty {
            let requestID = newRequest(.setPresence(room: room, call: nil))
            connection.send(.setPresence(requestID: requestID, room: room, state: entry.presenceState))
        }
        if wanted { sendPresenceWatch(room) }
    }

    /// SET_PRESENCE: this connection's state in `room` (`RoomReplica.setPresence(_:)`).
    func setPresence(_ state: [UInt8], in room: String) async throws(SnapSyncError) {
        let what = "SET_PRESENCE \(room)"
        let connection = try presenceConnection(what, room)
        let limit = serverLimits.maxPresenceBytes
        // The server would refuse it (§11.26): say so without the round trip, as it would.
        guard state.count <= limit else {
            throw .rejected(
                .init(
                    rawCode: ErrorCode.payloadTooLarge.rawValue, operationIndex: nil, identifier: nil,
                    message: "\(what): the state is \(state.count) bytes, over the server's max_presence_bytes of \(limit)"))
        }
        let call = newCallID()
        let requestID = newRequest(.setPresence(room: room, call: call))
        connection.send(.setPresence(requestID: requestID, room: room, state: state))
        _ = try await wait(call, what: what).get()
        // Set again on the next connection (the room may have been left meanwhile).
        rooms[room]?.presenceState = state
    }

    /// PRESENCE_LIST: one page of `room`'s presence (`RoomReplica.listPresence(after:limit:)`).
    func listPresence(_ room: String, after: UInt64, limit: Int) async throws(SnapSyncError) -> PresencePage {
        let what = "PRESENCE_LIST \(room)"
        let connection = try presenceConnection(what, room)
        let call = newCallID()
        let requestID = newRequest(.presenceList(room: room, call: call))
        connection.send(.presenceList(requestID: requestID, room: room, after: after, limit: UInt64(max(0, limit))))
        guard case .presencePage(let page) = try await wait(call, what: what).get() else {
            preconditionFailure("a PRESENCE_LIST call completes with a page")
        }
        return page
    }

    /// The connection a presence request on `room` goes on, or why there is none.
    private func presenceConnection(_ what: String, _ room: String) throws(SnapSyncError) -> ClientChannel {
        try checkUsable()
        guard case .ready(let connection) = link else { throw .connectionLost("\(what): not connected") }
        guard let entry = rooms[room], entry.loaded else { throw .notJoined(room: room) }
        guard ProtocolVersion.hasPresence(protocolVersion) else { throw presenceUnsupported(what, room) }
        guard entry.member else { throw .connectionLost("\(what): the room is being joined again on a new connection") }
        return connection
    }

    func presenceUnsupported(_ what: String, _ room: String) -> SnapSyncError {
        .unsupportedByServer("\(what) \(room): the connection speaks protocol version \(protocolVersion), presence needs 4")
    }

    /// A REJECT of a presence request, as the caller hears it.
    func presenceError(_ rejection: SnapSyncError.Rejection, _ what: String, _ room: String) -> SnapSyncError {
        switch rejection.code {
        case .notJoined: return .notJoined(room: room)
        case .forbidden: return .forbidden(room: room, right: "read", message: rejection.message)
        default:
            var named = rejection
            named.message = "\(what) \(room): \(rejection.message)"
            return .rejected(named)
        }
    }

    func presenceWatchRefused(_ room: String, _ error: SnapSyncError) {
        guard let entry = rooms[room] else { return }
        rooms[room]!.watchingPresence = false
        entry.replica.presenceFailed(error)
    }

    /// PRESENCE: the answer to a watch (the view, which replaces the replica's set) or to a
    /// PRESENCE_LIST (a page).
    func handlePresence(requestID: UInt64, room: String, count: UInt64, members: [PresenceMember], next: UInt64) {
        switch requests.removeValue(forKey: requestID) {
        case .presenceWatch(let asked)? where asked == room:
            guard let entry = rooms[room], entry.watchingPresence else { return }  // left meanwhile
            entry.replica.presenceWatched(
                PresenceSet(room: room, count: Int(clamping: count), members: members, selfMemberID: session?.id))
        case .presenceList(let asked, let call)? where asked == room:
            complete(
                call,
                .success(.presencePage(PresencePage(room: room, count: Int(clamping: count), members: members, next: next == 0 ? nil : next))))
        default:
            violation("PRESENCE of \(room) answers no PRESENCE_WATCH or PRESENCE_LIST of it (request \(requestID))")
        }
    }

    /// PRESENCE_DIFF: the watched set's next state.
    func handlePresenceDiff(room: String, count: UInt64, changes: [PresenceChange]) {
        guard let entry = rooms[room], entry.watchingPresence else { return }  // left meanwhile
        entry.replica.presenceChanged(count: Int(clamping: count), changes: changes)
    }
}
