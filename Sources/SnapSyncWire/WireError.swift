public import SnapSyncModel

/// A frame this peer cannot accept: the wire code to answer with and a sentence saying what was
/// wrong, for logs and for the ERROR/REJECT message.
///
/// Structural failures (`malformedFrame`, `frameTooLarge`, `unknownMessageType`, `badMagic`) end
/// the connection: the receiver sends ERROR and closes. A whole, well-formed REPLACE or SNAPSHOT
/// whose snapshot breaks a content rule (duplicate identifiers, a limit) is reported with the
/// rule's code (20–32), `requestID` set and, where the rule is about one identifier,
/// `identifier`: a server answers such a REPLACE with REJECT and keeps the connection.
public struct WireError: Error, Hashable, Sendable, CustomStringConvertible {
    public var code: ErrorCode
    /// What was wrong, naming the field: "bad varint in DIFF.version: overlong encoding".
    public var detail: String
    /// The request the frame carried, when the error is a content rule in a whole frame.
    public var requestID: UInt64?
    /// The identifier a content rule is about, if any.
    public var identifier: SnapshotIdentifier?

    public init(_ code: ErrorCode, _ detail: String, requestID: UInt64? = nil, identifier: SnapshotIdentifier? = nil) {
        self.code = code
        self.detail = detail
        self.requestID = requestID
        self.identifier = identifier
    }

    public var description: String { "\(code.name): \(detail)" }

    static func malformed(_ detail: String) -> WireError { WireError(.malformedFrame, detail) }
}
