/// One entry of a token's `rooms` claim: the rooms it matches and the rights it gives there.
///
/// `match` is a room name, matched exactly (byte for byte, no Unicode normalisation), or a
/// prefix followed by one `*` at its end (`board:*`; `*` alone matches every room). No other
/// character has a special meaning, and a `*` anywhere but the end is refused when the token is
/// read, so a grant never means something other than what it looks like.
public struct RoomGrant: Sendable, Hashable {
    /// As written in the token.
    public let match: String
    public let rights: Set<Right>
    /// `match` without its trailing `*` when it is a prefix; `match` otherwise.
    private let name: [UInt8]
    private let isPrefix: Bool

    /// - Throws: `GrantError` when `match` is empty or has a `*` before its end, or `rights` is empty.
    public init(match: String, rights: Set<Right>) throws(GrantError) {
        guard !match.isEmpty else { throw GrantError("match is empty") }
        guard !rights.isEmpty else { throw GrantError("rights of \(quote(match)) are empty") }
        let stars = match.utf8.filter { $0 == UInt8(ascii: "*") }.count
        let isPrefix = match.utf8.last == UInt8(ascii: "*")
        guard stars == 0 || (stars == 1 && isPrefix) else {
            throw GrantError("match \(quote(match)) has a * before its end (only a trailing * is allowed)")
        }
        self.match = match
        self.rights = rights
        self.isPrefix = isPrefix
        self.name = Array(isPrefix ? match.utf8.dropLast() : match.utf8[...])
    }

    /// Parses the `snapsyncd token --room` form `MATCH=RIGHT[,RIGHT...]`, e.g. `board:*=read,write`.
    /// The last `=` separates the rights, so a room name may contain `=`.
    public init(spec: String) throws(GrantError) {
        guard let equals = spec.lastIndex(of: "=") else {
            throw GrantError("\(quote(spec)) is not MATCH=RIGHT[,RIGHT...]")
        }
        var rights = Set<Right>()
        for word in spec[spec.index(after: equals)...].split(separator: ",", omittingEmptySubsequences: false) {
            guard let right = Right(rawValue: String(word)) else {
                throw GrantError("unknown right \(quote(word)) in \(quote(spec)) (read, write, admin)")
            }
            rights.insert(right)
        }
        try self.init(match: String(spec[..<equals]), rights: rights)
    }

    /// Whether this grant's `match` covers `room`. O(length of the name).
    public func matches(room: String) -> Bool {
        isPrefix ? room.utf8.starts(with: name) : room.utf8.elementsEqual(name)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.match == rhs.match && lhs.rights == rhs.rights }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(match)
        hasher.combine(rights)
    }
}

/// A grant that cannot be one: an empty or misplaced-`*` match, no rights, an unknown right.
public struct GrantError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
