/// A typed value that could not be turned into bytes, or bytes that could not be turned into
/// the typed value (`ElementCoder`): the typed façade's error (`RoomCoding`, `TypedReplica`).
public struct ElementCodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What was being coded.
    public enum Role: String, Hashable, Sendable {
        case sectionIdentifier = "section identifier"
        case itemIdentifier = "item identifier"
        case itemPayload = "item payload"
    }
    public enum Direction: String, Hashable, Sendable {
        case encoding, decoding
    }

    public var role: Role
    public var direction: Direction
    /// The identifier of the section or item concerned, when known (always when decoding).
    public var identifier: SnapshotIdentifier?
    /// The coder's explanation (its error, described).
    public var message: String

    public init(role: Role, direction: Direction, identifier: SnapshotIdentifier?, message: String) {
        self.role = role
        self.direction = direction
        self.identifier = identifier
        self.message = message
    }

    public var description: String {
        "\(direction) the \(role.rawValue)\(identifier.map { " of \($0)" } ?? "") failed: \(message)"
    }
}
