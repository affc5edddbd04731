/// Everything a `SnapSyncClient` call can throw.
///
/// `rejected` and `serverError` carry the server's answer with its wire code (`ErrorCode`, one case
/// per row of Protocol/PROTOCOL.md §6); the other cases are the client's own: local validation,
/// the connection, time.
public enum SnapSyncError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server refused the request (REJECT). Nothing was applied.
    case rejected(Rejection)
    /// The token does not grant `right` ("read" for a join, "write" for a write) on `room`: the
    /// server refused the request (REJECT `forbidden`), or removed the connection from the room
    /// after a token refresh (LEFT). Nothing was applied. `message` is the server's.
    case forbidden(room: String, right: String, message: String)
    /// The server refused the client's token (ERROR `unauthorized`, in answer to HELLO or to a
    /// refresh) and closed the connection; `reason` is the server's (expired, bad signature, ...).
    /// The client reconnects only with a different token (`Configuration.credentials`).
    case unauthorized(reason: String)
    /// `Configuration.credentials` threw; the connection attempt (or the token refresh) failed.
    case credentialsUnavailable(String)
    /// The server ended the connection with ERROR (a handshake failure, a protocol violation it
    /// saw, `shutting_down`, ...).
    case serverError(ServerError)
    /// The batch failed local validation against the replica's snapshot (`BatchBuilder`); it was
    /// not sent.
    case invalidBatch(BatchError)
    /// A typed value did not encode to bytes (`TypedBatch`); the batch was not sent.
    case coding(ElementCodingError)
    /// `perform`'s body threw an error that is neither a `BatchError` nor a `SnapSyncError`
    /// (described here); the batch was not sent.
    case batchAbandoned(String)
    /// No connection could be made: name resolution, refusal, or the connect timeout.
    case connectFailed(String)
    /// TLS (`Configuration.tls`): the server's certificate is not for `host` (the configured
    /// `serverName`, else the host): neither its DNS nor its IP names match.
    case tlsHostnameMismatch(host: String, reason: String)
    /// TLS: the server's certificate is past its expiry date (or not yet valid).
    case tlsCertificateExpired(host: String, reason: String)
    /// TLS: the server's certificate chain does not lead to one of the trust roots (a
    /// self-signed certificate, another CA, a missing intermediate).
    case tlsUntrustedCertificate(host: String, reason: String)
    /// TLS: the chain is trusted, but the server's key is not the pinned one
    /// (`TLSConfiguration.pinnedPublicKeySHA256`); `presented` is the base64 SHA-256 of the
    /// key the server presented.
    case tlsPinMismatch(host: String, expected: String, presented: String)
    /// TLS: the handshake failed otherwise (no common version or cipher, the server refused the
    /// client's certificate or asked for one that was not configured, a TLS alert).
    case tlsHandshakeFailed(host: String, reason: String)
    /// TLS: the `TLSConfiguration` cannot be used (a PEM that does not parse, a malformed pin,
    /// a client certificate this platform cannot present); no connection was attempted.
    case tlsConfigurationInvalid(host: String, reason: String)
    /// The connection dropped and automatic reconnection is off (or gave up), or it dropped
    /// before the handshake completed.
    case connectionLost(String)
    /// With several `Configuration.endpoints`: every one of them failed in a round, `tried` in
    /// the order they were tried; `last` is why the last one failed. Thrown by `connect()`, and
    /// by the calls waiting when `ReconnectPolicy.maximumAttempts` rounds failed in a row.
    indirect case allEndpointsFailed(tried: [SnapSyncClient.Endpoint], last: SnapSyncError)
    /// No answer within `Configuration.requestTimeout`. A write that timed out may or may not
    /// have been applied; the replica's next change tells.
    case timedOut(String)
    /// The server sent something the protocol does not allow (an undecodable frame, a SNAPSHOT
    /// whose digest never matches, an answer to no request). The client drops the connection.
    case protocolViolation(String)
    /// The request's frame would exceed the server's `max_frame_bytes`; it was not sent (the
    /// server would have closed the connection).
    case requestTooLarge(size: Int, limit: Int)
    /// The request needs a protocol version the server did not choose (an outline write to a
    /// version 1 server, PROTOCOL.md §8.2); it was not sent.
    case unsupportedByServer(String)
    /// The room is not joined: `perform` needs the replica to validate against.
    case notJoined(room: String)
    /// The calling task was cancelled. A write may or may not have been applied.
    case cancelled
    /// `close()` was called.
    case closed

    /// A REJECT: the request failed as a whole and the room is unchanged.
    public struct Rejection: Hashable, Sendable, CustomStringConvertible {
        /// The wire code, as sent; `code` is its typed form.
        public var rawCode: UInt64
        /// The failing operation's index in the batch (codes 20–32).
        public var operationIndex: Int?
        /// The identifier the rule is about, when it is about one.
        public var identifier: Identifier?
        /// The server's explanation.
        public var message: String

        public init(rawCode: UInt64, operationIndex: Int?, identifier: Identifier?, message: String) {
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
        switch self {
        case .rejected(let rejection): rejection.code
        case .serverError(let error): error.code
        case .forbidden: .forbidden
        case .unauthorized: .unauthorized
        default: nil
        }
    }

    public var description: String {
        switch self {
        case .rejected(let rejection): rejection.description
        case .serverError(let error): error.description
        case .forbidden(let room, let right, let message): "forbidden: no \(right) right on room \(room): \(message)"
        case .unauthorized(let reason): "unauthorized: the server refused the token: \(reason)"
        case .credentialsUnavailable(let why): "the credentials provider failed: \(why)"
        case .invalidBatch(let error): "invalid batch: \(error)"
        case .coding(let error): "\(error)"
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
