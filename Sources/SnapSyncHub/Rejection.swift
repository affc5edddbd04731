import SnapSyncModel
import SnapSyncWire

/// Why one request failed: exactly the fields of a REJECT frame (PROTOCOL.md §3, §6).
/// Nothing was applied when a request is rejected.
package struct Rejection: Error, Hashable, Sendable, CustomStringConvertible {
    var code: ErrorCode
    /// The failing operation of a MUTATE (codes 20–32 and 51–53, PROTOCOL.md §6).
    var opIndex: Int?
    /// The identifier the failed rule is about, if any.
    var identifier: SnapshotIdentifier?
    var message: String

    init(_ code: ErrorCode, _ message: String, opIndex: Int? = nil, identifier: SnapshotIdentifier? = nil) {
        self.code = code
        self.message = message
        self.opIndex = opIndex
        self.identifier = identifier
    }

    /// The rejection of a batch the model refused: its code, op index and identifier. Without
    /// the op index for ops the server computed (REPLACE_SECTION), which the client never sent.
    init(_ error: BatchError, withOpIndex: Bool = true) {
        self.init(
            ErrorCode(error.violation), error.violation.description,
            opIndex: withOpIndex ? error.operationIndex : nil, identifier: error.violation.identifier)
    }

    /// The REJECT frame answering request `requestID`.
    func message(requestID: UInt64) -> Message {
        .reject(
            requestID: requestID, code: code.rawValue, opIndex: opIndex.map { UInt64($0) },
            identifier: identifier, message: message)
    }

    package var description: String {
        var text = "\(code.name)"
        if let opIndex { text += " at operation \(opIndex)" }
        return text + ": \(message)"
    }
}
