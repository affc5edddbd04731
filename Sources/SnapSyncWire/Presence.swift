/// One member of a room's presence, as PRESENCE and PRESENCE_DIFF carry it (PROTOCOL.md §9,
/// "Presence"; §11.27).
public struct PresenceMember: Hashable, Sendable {
    /// The member's connection: the `session_id` of its WELCOME; never 0.
    public var memberID: UInt64
    /// Its token's or certificate's `sub`, or its HELLO's `client_name` without auth.
    public var principal: String
    /// When its membership began, in milliseconds since 1970-01-01 UTC (the server's clock).
    public var joinedAt: UInt64
    /// The opaque state it set (SET_PRESENCE); empty: none.
    public var state: [UInt8]

    public init(memberID: UInt64, principal: String, joinedAt: UInt64, state: [UInt8] = []) {
        self.memberID = memberID
        self.principal = principal
        self.joinedAt = joinedAt
        self.state = state
    }
}

/// Why a member left a room's presence (PRESENCE_DIFF `left`, §11.28). A receiver keeps the raw
/// byte (`PresenceChange.left`) and reads an unknown one as `.disconnected`.
public enum PresenceDeparture: UInt8, Hashable, Sendable, CaseIterable {
    /// It sent LEAVE.
    case left = 0
    /// Its connection closed or failed.
    case disconnected = 1
    /// The server closed its connection for the idle timeout or for reading too slowly.
    case timedOut = 2
    /// The server ended the membership (LEFT: rights revoked, the room dropped, ...).
    case removed = 3
    /// Cluster: the server that held it stopped announcing it.
    case nodeLost = 4

    /// The departure a raw reason byte stands for: unknown ones are `.disconnected` (§11.28).
    public init(byte: UInt8) {
        self = PresenceDeparture(rawValue: byte) ?? .disconnected
    }

    /// The name the spec and the JSON form use.
    public var name: String {
        switch self {
        case .left: "left"
        case .disconnected: "disconnected"
        case .timedOut: "timed_out"
        case .removed: "removed"
        case .nodeLost: "node_lost"
        }
    }
}

/// One change of a room's presence view (PRESENCE_DIFF, §11.28).
public enum PresenceChange: Hashable, Sendable {
    /// A member joined the room and is in the view.
    case joined(PresenceMember)
    /// A member of the view left the room; `reason` is the raw byte (`PresenceDeparture(byte:)`).
    case left(memberID: UInt64, reason: UInt8)
    /// A member of the view set its state (empty: cleared).
    case state(memberID: UInt64, state: [UInt8])
    /// A member entered the view without joining (a member below it left).
    case shown(PresenceMember)
    /// A member left the view without leaving the room (a member with a smaller id joined).
    case hidden(memberID: UInt64)

    /// The change's kind byte.
    public var kind: UInt8 {
        switch self {
        case .joined: 0
        case .left: 1
        case .state: 2
        case .shown: 3
        case .hidden: 4
        }
    }

    /// The member the change is about.
    public var memberID: UInt64 {
        switch self {
        case .joined(let member), .shown(let member): member.memberID
        case .left(let id, _), .state(let id, _), .hidden(let id): id
        }
    }
}
