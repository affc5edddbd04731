/// The client's connection, as the app sees it.
public enum ConnectionState: Hashable, Sendable, CustomStringConvertible {
    /// Not connected yet, or disconnected for good with reconnection off: `connect()` may be called.
    case disconnected
    /// Connecting and handshaking (the first time, after `connect()`).
    case connecting
    /// Handshake done: requests flow.
    case connected
    /// The connection dropped; attempt `attempt` (from 1) is waited for or under way (with several
    /// endpoints, a round over them: `SnapSyncClient.endpoint` is the one being tried). Calls wait.
    case reconnecting(attempt: Int)
    /// `close()` was called.
    case closed

    public var description: String {
        switch self {
        case .disconnected: "disconnected"
        case .connecting: "connecting"
        case .connected: "connected"
        case .reconnecting(let attempt): "reconnecting (attempt \(attempt))"
        case .closed: "closed"
        }
    }
}

/// What happened to the connection and the rooms, as delivered by `SnapSyncClient.events`.
public enum ClientEvent: Sendable, CustomStringConvertible {
    /// The handshake completed; `resumed` is true after a reconnect (rooms are being rejoined).
    /// `SnapSyncClient.endpoint` is the endpoint connected to.
    case connected(sessionID: UInt64, serverName: String, resumed: Bool)
    /// The connection dropped, and why.
    case disconnected(SnapSyncError)
    /// The next reconnection attempt (with several endpoints, a round over them) starts after
    /// `delay`.
    case reconnecting(attempt: Int, delay: Duration)
    /// A replica is being reloaded from a fresh snapshot; its `.resync` change follows.
    case resyncing(room: String, reason: ResyncReason)
    /// A room the client had joined is no longer joined: the server refused it on rejoin, or
    /// removed the connection from it (LEFT, after a token refresh whose grants no longer
    /// include reading it: `error` is `.forbidden`). Its replica's `changes` finished and the
    /// client dropped it; `join` makes a new one.
    case roomLost(room: String, error: SnapSyncError)
    /// A room the client had joined ended on the server (LEFT `room_deleted` or `room_expired`,
    /// PROTOCOL.md §9): a DROP deleted it (this client's `drop` or another client's), or it
    /// expired. Its replica's `changes` finished and the client dropped it; the room's state is
    /// gone for good, and `join` makes a new, empty room under a new epoch.
    case roomEnded(room: String, reason: RoomEnd)
    /// The server refused the client's token (`SnapSyncError.unauthorized`, `reason` is the
    /// server's). The client reconnects only if `Configuration.credentials` then returns a
    /// different token; otherwise `.stopped` follows.
    case credentialsRefused(reason: String)
    /// The client stopped reconnecting (reconnection is off, or `ReconnectPolicy.maximumAttempts`
    /// failed in a row: with several endpoints the error is `.allEndpointsFailed`): waiting calls
    /// failed, the rooms are kept, `connect()` starts again.
    case stopped(SnapSyncError)
    /// `close()` was called.
    case closed

    /// How a room ended (`roomEnded`).
    public enum RoomEnd: Hashable, Sendable {
        /// A DROP deleted it.
        case deleted
        /// Its time-to-live passed with no member and no write.
        case expired
    }

    public var description: String {
        switch self {
        case .connected(let session, let server, let resumed):
            "\(resumed ? "reconnected" : "connected") to \(server), session \(session)"
        case .disconnected(let why): "disconnected: \(why)"
        case .reconnecting(let attempt, let delay): "reconnecting (attempt \(attempt)) in \(delay)"
        case .resyncing(let room, let reason): "resyncing \(room): \(reason)"
        case .roomLost(let room, let error): "lost room \(room): \(error)"
        case .roomEnded(let room, let reason): "room \(room) \(reason == .deleted ? "was deleted" : "expired")"
        case .credentialsRefused(let reason): "the server refused the token: \(reason)"
        case .stopped(let why): "stopped reconnecting: \(why)"
        case .closed: "closed"
        }
    }
}
