/// Everything a `SnapSyncClient` call can throw.
///
/// A struct with a growable ``Kind``, as swift-nio's errors are: a kind added in a later release
/// breaks no app's code. Compare `error.kind` (`error.kind == .rejected`, or a `switch` with a
/// `default`), and read the details through the accessors (`rejection`, `room`, `host`, ...).
/// `rejected` and `serverError` carry the server's answer with its wire code (`ErrorCode`, one
/// case per row of Protocol/PROTOCOL.md §6); the other kinds are the client's own: local
/// validation, the connection, time.
public struct SnapSyncError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The error's payload, by kind: internal, so that a new kind is no break. Only the case
    /// that holds another error is boxed.
    enum Detail: Hashable, Sendable {
        case rejected(Rejection)
        case forbidden(room: String, right: String, message: String)
        case unauthorized(reason: String)
        case credentialsUnavailable(String)
        case serverError(ServerError)
        case invalidBatch(BatchError)
        case coding(ElementCodingError)
        case presenceCoding(String)
        case batchAbandoned(String)
        case connectFailed(String)
        case tlsHostnameMismatch(host: String, reason: String)
        case tlsCertificateExpired(host: String, reason: String)
        case tlsUntrustedCertificate(host: String, reason: String)
        case tlsPinMismatch(host: String, expected: String, presented: String)
        case tlsHandshakeFailed(host: String, reason: String)
        case tlsConfigurationInvalid(host: String, reason: String)
        case connectionLost(String)
        indirect case allEndpointsFailed(tried: [SnapSyncClient.Endpoint], last: SnapSyncError)
        case timedOut(String)
        case protocolViolation(String)
        case requestTooLarge(size: Int, limit: Int)
        case unsupportedByServer(String)
        case notJoined(room: String)
        case cancelled
        case closed
    }

    let detail: Detail

    init(_ detail: Detail) { self.detail = detail }

    /// The server refused the request (REJECT). Nothing was applied.
    public static func rejected(_ value: Rejection) -> SnapSyncError { SnapSyncError(.rejected(value)) }
    /// The token does not grant `right` ("read" for a join, "write" for a write) on `room`: the
    /// server refused the request (REJECT `forbidden`), or removed the connection from the room
    /// after a token refresh (LEFT). Nothing was applied. `message` is the server's.
    public static func forbidden(room: String, right: String, message: String) -> SnapSyncError {
        SnapSyncError(.forbidden(room: room, right: right, message: message))
    }
    /// The server refused the client's token (ERROR `unauthorized`, in answer to HELLO or to a
    /// refresh) and closed the connection; `reason` is the server's (expired, bad signature, ...).
    /// The client reconnects only with a different token (`Configuration.credentials`).
    public static func unauthorized(reason: String) -> SnapSyncError { SnapSyncError(.unauthorized(reason: reason)) }
    /// `Configuration.credentials` threw; the connection attempt (or the token refresh) failed.
    public static func credentialsUnavailable(_ value: String) -> SnapSyncError { SnapSyncError(.credentialsUnavailable(value)) }
    /// The server ended the connection with ERROR (a handshake failure, a protocol violation it
    /// saw, `shutting_down`, ...).
    public static func serverError(_ value: ServerError) -> SnapSyncError { SnapSyncError(.serverError(value)) }
    /// The batch failed local validation against the replica's snapshot (`BatchBuilder`); it was
    /// not sent.
    public static func invalidBatch(_ value: BatchError) -> SnapSyncError { SnapSyncError(.invalidBatch(value)) }
    /// A typed value did not encode to bytes (`TypedBatch`); the batch was not sent.
    public static func coding(_ value: ElementCodingError) -> SnapSyncError { SnapSyncError(.coding(value)) }
    /// A typed presence state (`RoomReplica.setPresence(_:coder:)`, `PresenceMember.state(as:room:)`)
    /// could not be encoded, or a member's state bytes did not decode; `reason` says which member
    /// of which room, and the coder's error.
    public static func presenceCoding(_ value: String) -> SnapSyncError { SnapSyncError(.presenceCoding(value)) }
    /// `perform`'s body threw an error that is neither a `BatchError` nor a `SnapSyncError`
    /// (described here); the batch was not sent.
    public static func batchAbandoned(_ value: String) -> SnapSyncError { SnapSyncError(.batchAbandoned(value)) }
    /// No connection could be made: name resolution, refusal, or the connect timeout.
    public static func connectFailed(_ value: String) -> SnapSyncError { SnapSyncError(.connectFailed(value)) }
    /// TLS (`Configuration.tls`): the server's certificate is not for `host` (the configured
    /// `serverName`, else the host): neither its DNS nor its IP names match.
    public static func tlsHostnameMismatch(host: String, reason: String) -> SnapSyncError { SnapSyncError(.tlsHostnameMismatch(host: host, reason: reason)) }
    /// TLS: the server's certificate is past its expiry date (or not yet valid).
    public static func tlsCertificateExpired(host: String, reason: String) -> SnapSyncError {
        SnapSyncError(.tlsCertificateExpired(host: host, reason: reason))
    }
    /// TLS: the server's certificate chain does not lead to one of the trust roots (a
    /// self-signed certificate, another CA, a missing intermediate).
    public static func tlsUntrustedCertificate(host: String, reason: String) -> SnapSyncError {
        SnapSyncError(.tlsUntrustedCertificate(host: host, reason: reason))
    }
    /// TLS: the chain is trusted, but the server's key is not the pinned one
    /// (`TLSConfiguration.pinnedPublicKeySHA256`); `presented` is the base64 SHA-256 of the
    /// key the server presented.
    public static func tlsPinMismatch(host: String, expected: String, presented: String) -> SnapSyncError {
        SnapSyncError(.tlsPinMismatch(host: host, expected: expected, presented: presented))
    }
    /// TLS: the handshake failed otherwise (no common version or cipher, the server refused the
    /// client's certificate or asked for one that was not configured, a TLS alert).
    public static func tlsHandshakeFailed(host: String, reason: String) -> SnapSyncError { SnapSyncError(.tlsHandshakeFailed(host: host, reason: reason)) }
    /// TLS: the `TLSConfiguration` cannot be used (a PEM that does not parse, a malformed pin,
    /// a client certificate this platform cannot present); no connection was attempted.
    public static func tlsConfigurationInvalid(host: String, reason: String) -> SnapSyncError {
        SnapSyncError(.tlsConfigurationInvalid(host: host, reason: reason))
    }
    /// The connection dropped and automatic reconnection is off (or gave up), or it dropped
    /// before the handshake completed.
    public static func connectionLost(_ value: String) -> SnapSyncError { SnapSyncError(.connectionLost(value)) }
    /// With several `Configuration.endpoints`: every one of them failed in a round, `tried` in
    /// the order they were tried; `last` is why the last one failed. Thrown by `connect()`, and
    /// by the calls waiting when `ReconnectPolicy.maximumAttempts` rounds failed in a row.
    public static func allEndpointsFailed(tried: [SnapSyncClient.Endpoint], last: SnapSyncError) -> SnapSyncError {
        SnapSyncError(.allEndpointsFailed(tried: tried, last: last))
    }
    /// No answer within `Configuration.requestTimeout`. A write that timed out may or may not
    /// have been applied; the replica's next change tells.
    public static func timedOut(_ value: String) -> SnapSyncError { SnapSyncError(.timedOut(value)) }
    /// The server sent something the protocol does not allow (an undecodable frame, a SNAPSHOT
    /// whose digest never matches, an answer to no request). The client drops the connection.
    public static func protocolViolation(_ value: String) -> SnapSyncError { SnapSyncError(.protocolViolation(value)) }
    /// The request's frame would exceed the server's `max_frame_bytes`; it was not sent (the
    /// server would have closed the connection).
    public static func requestTooLarge(size: Int, limit: Int) -> SnapSyncError { SnapSyncError(.requestTooLarge(size: size, limit: limit)) }
    /// The request needs a protocol version the server did not choose (an outline write to a
    /// version 1 server, PROTOCOL.md §8.2); it was not sent.
    public static func unsupportedByServer(_ value: String) -> SnapSyncError { SnapSyncError(.unsupportedByServer(value)) }
    /// The room is not joined: `perform` needs the replica to validate against.
    public static func notJoined(room: String) -> SnapSyncError { SnapSyncError(.notJoined(room: room)) }
    /// The calling task was cancelled. A write may or may not have been applied.
    public static let cancelled = SnapSyncError(.cancelled)
    /// `close()` was called.
    public static let closed = SnapSyncError(.closed)

    /// A REJECT: the request failed as a whole and the room is unchanged.
    public struct Rejection: Hashable, Sendable, CustomStringConvertible {
        /// The wire code, as sent; `code` is its typed form.
        public var rawCode: UInt64
        /// The failing operation's index in the batch (codes 20–32).
        public var operationIndex: Int?
        /// The identifier the rule is about, when it is about one.
        public var identifier: SnapshotIdentifier?
        /// The server's explanation.
        public var message: String

        public init(rawCode: UInt64, operationIndex: Int?, identifier: SnapshotIdentifier?, message: String) {
            self.rawCode = rawCode
            self.operationIndex = operationIndex
            self.identifier = identifier
            self.message = message
        }

        /// `nil` for a code this client does not know: a generic rejection (§6).
        public var code: ErrorCode? { ErrorCode(rawValue: rawCode) }

        public var description: String {
            var text = "rejected (\(code?.name ?? "code \(rawCode)"))"
            if let operationIndex { text += " at operation \(operationIndex)" }
            if let identifier { text += " on \(identifier)" }
            return text + ": " + message
        }
    }

    /// An ERROR: the server closed the connection.
    public struct ServerError: Hashable, Sendable, CustomStringConvertible {
        public var rawCode: UInt64
        public var message: String

        public init(rawCode: UInt64, message: String) {
            self.rawCode = rawCode
            self.message = message
        }

        public var code: ErrorCode? { ErrorCode(rawValue: rawCode) }

        public var description: String { "server error (\(code?.name ?? "code \(rawCode)")): \(message)" }
    }

    /// The wire code of a `rejected`, `serverError`, `forbidden` or `unauthorized`; `nil` otherwise.
    public var code: ErrorCode? {
        switch detail {
        case .rejected(let rejection): rejection.code
        case .serverError(let error): error.code
        case .forbidden: .forbidden
        case .unauthorized: .unauthorized
        default: nil
        }
    }

    public var description: String {
        switch detail {
        case .rejected(let rejection): rejection.description
        case .serverError(let error): error.description
        case .forbidden(let room, let right, let message): "forbidden: no \(right) right on room \(room): \(message)"
        case .unauthorized(let reason): "unauthorized: the server refused the token: \(reason)"
        case .credentialsUnavailable(let why): "the credentials provider failed: \(why)"
        case .invalidBatch(let error): "invalid batch: \(error)"
        case .coding(let error): "\(error)"
        case .presenceCoding(let what): what
        case .batchAbandoned(let why): "the batch was abandoned: \(why)"
        case .connectFailed(let why): "could not connect: \(why)"
        case .tlsHostnameMismatch(let host, let reason): "TLS to \(host): the server's certificate is not for \(host): \(reason)"
        case .tlsCertificateExpired(let host, let reason): "TLS to \(host): the server's certificate has expired: \(reason)"
        case .tlsUntrustedCertificate(let host, let reason): "TLS to \(host): the server's certificate is not trusted: \(reason)"
        case .tlsPinMismatch(let host, let expected, let presented):
            "TLS to \(host): the server's key is not the pinned one (pinned SHA-256 \(expected), presented \(presented))"
        case .tlsHandshakeFailed(let host, let reason): "TLS to \(host): the handshake failed: \(reason)"
        case .tlsConfigurationInvalid(let host, let reason): "TLS to \(host): the TLS configuration is invalid: \(reason)"
        case .connectionLost(let why): "connection lost: \(why)"
        case .allEndpointsFailed(let tried, let last):
            "no endpoint could be connected to (tried \(tried.map(\.description).joined(separator: ", "))); the last: \(last)"
        case .timedOut(let what): "timed out: \(what)"
        case .protocolViolation(let what): "protocol violation: \(what)"
        case .requestTooLarge(let size, let limit): "the request is \(size) bytes, over the server's frame limit of \(limit)"
        case .unsupportedByServer(let what): "not supported by the server: \(what)"
        case .notJoined(let room): "room \(room) is not joined"
        case .cancelled: "cancelled"
        case .closed: "the client is closed"
        }
    }
}

extension SnapSyncError {
    /// What `perform` throws for an error of its body: the builder's `BatchError` as
    /// `.invalidBatch`, a `SnapSyncError` as it is, anything else described.
    init(batchBodyError error: any Error) {
        switch error {
        case let error as BatchError: self = .invalidBatch(error)
        case let error as SnapSyncError: self = error
        default: self = .batchAbandoned("\(error)")
        }
    }
}
