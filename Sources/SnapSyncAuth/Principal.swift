public import Foundation

/// Who a verified token speaks for, and what it lets them do until when.
public struct Principal: Sendable, Equatable {
    /// The token's `sub`: shown in logs (and, later, presence).
    public let subject: String
    /// The token's `exp` (the daemon adds the leeway before ending a session).
    public let expiresAt: Date
    public let grants: [RoomGrant]
    /// The key that signed the token.
    public let keyID: String

    /// A principal that no token made: the daemon's, for a verified client certificate (mutual
    /// TLS), whose subject stands for `sub`, whose `notAfter` for `exp`, and whose grants the
    /// daemon's configuration gives. `keyID` is empty: no key signed anything.
    public init(subject: String, expiresAt: Date, grants: [RoomGrant]) {
        self.subject = subject
        self.expiresAt = expiresAt
        self.grants = grants
        self.keyID = ""
    }

    init(keyID: String, claims: TokenClaims) {
        self.subject = claims.subject
        self.expiresAt = claims.expiresAt
        self.grants = claims.grants
        self.keyID = keyID
    }

    /// Whether some grant matches `room` and gives `right`. O(grants × name length).
    public func allows(_ right: Right, room: String) -> Bool {
        grants.contains { $0.rights.contains(right) && $0.matches(room: room) }
    }
}
