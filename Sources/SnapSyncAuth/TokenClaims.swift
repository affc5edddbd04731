public import Foundation

/// The claims of a SnapSync token (docs/auth.md, "Claims"), as minted and as read back.
///
/// JSON members: `sub` (non-empty string, required), `exp` (NumericDate, required), `nbf` and
/// `iat` (NumericDate, optional), `aud` (a string or an array of strings, optional), `rooms`
/// (an array of `{"match": String, "rights": [String]}`, required, may be empty). Other members
/// (`iss`, `jti`, ...) are ignored. A NumericDate is a JSON number of seconds since 1970 (a
/// fraction allowed) from 0 through 253402300799 (the end of year 9999).
public struct TokenClaims: Sendable, Equatable {
    public var subject: String
    public var expiresAt: Date
    public var notBefore: Date?
    public var issuedAt: Date?
    /// Empty when the token has no `aud`.
    public var audience: [String]
    public var grants: [RoomGrant]

    public init(
        subject: String, expiresAt: Date, notBefore: Date? = nil, issuedAt: Date? = nil,
        audience: [String] = [], grants: [RoomGrant]
    ) {
        self.subject = subject
        self.expiresAt = expiresAt
        self.notBefore = notBefore
        self.issuedAt = issuedAt
        self.audience = audience
        self.grants = grants
    }

    static let latestNumericDate: Double = 253_402_300_799
}

/// What is wrong with a claims object: the member and the rule it breaks. Never the value of a
/// member other than a right or a match, which name the grant that is wrong.
struct MalformedClaims: Error, Sendable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }

    /// Says which member a decoding error is about and what was expected, without its value.
    init(decoding error: any Error) {
        self.init((error as? MalformedClaims)?.description ?? describeDecodingError(error, root: "the payload"))
    }
}

extension TokenClaims: Codable {
    private enum Key: String, CodingKey {
        case sub, exp, nbf, iat, aud, rooms
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        subject = try container.decode(String.self, forKey: .sub)
        guard !subject.isEmpty else { throw MalformedClaims("sub is empty") }
        expiresAt = try Self.numericDate(container, .exp)
        notBefore = try container.contains(.nbf) ? Self.numericDate(container, .nbf) : nil
        issuedAt = try container.contains(.iat) ? Self.numericDate(container, .iat) : nil
        if !container.contains(.aud) {
            audience = []
        } else if let single = try? container.decode(String.self, forKey: .aud) {
            audience = [single]
        } else {
            guard let list = try? container.decode([String].self, forKey: .aud) else {
                throw MalformedClaims("aud is neither a string nor an array of strings")
            }
            // An empty list names no audience yet is an `aud`: refused rather than read as "no
            // aud", which a server without an audience would accept (AUTH.md §3).
            guard !list.isEmpty else { throw MalformedClaims("aud is an empty array") }
            audience = list
        }
        var rooms = try container.nestedUnkeyedContainer(forKey: .rooms)
        var grants: [RoomGrant] = []
        while !rooms.isAtEnd {
            let index = rooms.currentIndex
            do {
                let grant = try rooms.decode(GrantObject.self)
                grants.append(try RoomGrant(match: grant.match, rights: grant.rights))
            } catch let error as GrantError {
                throw MalformedClaims("rooms[\(index)]: \(error)")
            } catch let error as MalformedClaims {
                throw MalformedClaims("rooms[\(index)]: \(error)")
            }
        }
        self.grants = grants
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(subject, forKey: .sub)
        try Self.encode(expiresAt, &container, .exp)
        if let notBefore { try Self.encode(notBefore, &container, .nbf) }
        if let issuedAt { try Self.encode(issuedAt, &container, .iat) }
        switch audience.count {
        case 0: break
        case 1: try container.encode(audience[0], forKey: .aud)
        default: try container.encode(audience, forKey: .aud)
        }
        try container.encode(grants.map { GrantObject(match: $0.match, rights: $0.rights) }, forKey: .rooms)
    }

    private static func numericDate(_ container: KeyedDecodingContainer<Key>, _ key: Key) throws -> Date {
        let seconds = try container.decode(Double.self, forKey: key)
        guard seconds.isFinite, seconds >= 0, seconds <= latestNumericDate else {
            throw MalformedClaims("\(key.rawValue) is not a NumericDate from 0 through \(Int(latestNumericDate))")
        }
        return Date(timeIntervalSince1970: seconds)
    }

    /// Whole seconds as a JSON integer, which every JWT library reads; a fraction only if there is one.
    private static func encode(_ date: Date, _ container: inout KeyedEncodingContainer<Key>, _ key: Key) throws {
        let seconds = date.timeIntervalSince1970
        if let whole = Int64(exactly: seconds) {
            try container.encode(whole, forKey: key)
        } else {
            try container.encode(seconds, forKey: key)
        }
    }
}

/// A grant as it appears in JSON. Rights are checked here so that an unknown one is named.
private struct GrantObject: Codable {
    let match: String
    let rights: Set<Right>

    init(match: String, rights: Set<Right>) {
        self.match = match
        self.rights = rights
    }

    private enum Key: String, CodingKey { case match, rights }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        match = try container.decode(String.self, forKey: .match)
        var words = try container.nestedUnkeyedContainer(forKey: .rights)
        var rights = Set<Right>()
        while !words.isAtEnd {
            let word = try words.decode(String.self)
            guard let right = Right(rawValue: word) else {
                throw MalformedClaims("rights of \(quote(match)): unknown right \(quote(word)) (read, write, admin)")
            }
            rights.insert(right)
        }
        self.rights = rights
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(match, forKey: .match)
        // In a fixed order, so that a minted token is the same for the same claims.
        try container.encode(Right.allCases.filter(rights.contains).map(\.rawValue), forKey: .rights)
    }
}
