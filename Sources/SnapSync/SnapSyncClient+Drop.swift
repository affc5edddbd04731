import SnapSyncWire

// Deleting rooms (DROP, PROTOCOL.md §11.19) and hearing that a joined room ended (LEFT
// room_deleted / room_expired, §9).

extension SnapSyncClient {
    /// Deletes `room` on the server: every member (this client too, if it joined it) is told
    /// with `ClientEvent.roomEnded(room:reason: .deleted)` and its replica finishes; the room's
    /// content, history and epoch are gone for good, and the next `join` or write creates a new,
    /// empty room under a new epoch. Dropping a room that does not exist succeeds (so a retry
    /// after a lost answer does too). The server needs the `admin` right on the room when it
    /// authenticates. Unlike writes, a DROP is not kept to be resent after a reconnect: it is
    /// sent now, on the current connection.
    /// - Throws: `.forbidden` without the `admin` right; `.rejected` with the server's code
    ///   (`storage_failure`, `invalid_room_name`); `.connectionLost` when not connected or when the connection
    ///   drops before the answer; `.timedOut` after `requestTimeout`.
    public func drop(_ room: String) async throws(SnapSyncError) {
        try checkUsable()
        guard case .ready(let connection) = link else { throw .connectionLost("DROP \(room): not connected") }
        let call = newCallID()
        let requestID = newRequest(.drop(room: room, call: call))
        connection.send(.drop(requestID: requestID, room: room))
        _ = try await wait(call, what: "DROP \(room)").get()
    }

    /// The event for a LEFT with `code`: `.roomEnded` when the room ended, else `.roomLost`
    /// with `error`.
    static func event(forLeft room: String, code: UInt64, error: SnapSyncError) -> ClientEvent {
        switch ErrorCode(rawValue: code) {
        case .roomDeleted: .roomEnded(room: room, reason: .deleted)
        case .roomExpired: .roomEnded(room: room, reason: .expired)
        default: .roomLost(room: room, error: error)
        }
    }
}
