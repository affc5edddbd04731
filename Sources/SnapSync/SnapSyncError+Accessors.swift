// Reading a `SnapSyncError`: its kind, a growable value (a new kind breaks no app's `switch`),
// and accessors for what each kind carries, so that no app matches payload patterns (which, in a
// `catch` with a `where` clause, crash the Swift 6.3.1 compiler in some contexts).

extension SnapSyncError {
    /// Which error this is, as a value that can grow: compare with `==`
    /// (`error.kind == .rejected`) or switch with a `default` branch.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        /// The case's name (`"rejected"`, `"connectionLost"`, ...).
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        public static let rejected = Kind("rejected")
        public static let forbidden = Kind("forbidden")
        public static let unauthorized = Kind("unauthorized")
        public static let credentialsUnavailable = Kind("credentialsUnavailable")
        public static let serverError = Kind("serverError")
        public static let invalidBatch = Kind("invalidBatch")
        public static let coding = Kind("coding")
        public static let presenceCoding = Kind("presenceCoding")
        public static let batchAbandoned = Kind("batchAbandoned")
        public static let connectFailed = Kind("connectFailed")
        public static let tlsHostnameMismatch = Kind("tlsHostnameMismatch")
        public static let tlsCertificateExpired = Kind("tlsCertificateExpired")
        public static let tlsUntrustedCertificate = Kind("tlsUntrustedCertificate")
        public static let tlsPinMismatch = Kind("tlsPinMismatch")
        public static let tlsHandshakeFailed = Kind("tlsHandshakeFailed")
        public static let tlsConfigurationInvalid = Kind("tlsConfigurationInvalid")
        public static let connectionLost = Kind("connectionLost")
        public static let allEndpointsFailed = Kind("allEndpointsFailed")
        public static let timedOut = Kind("timedOut")
        public static let protocolViolation = Kind("protocolViolation")
        public static let requestTooLarge = Kind("requestTooLarge")
        public static let unsupportedByServer = Kind("unsupportedByServer")
        public static let notJoined = Kind("notJoined")
        public static let cancelled = Kind("cancelled")
        public static let closed = Kind("closed")
    }

    /// Which error this is, as a growable value.
    public var kind: Kind {
        switch detail {
        case .rejected: .rejected
        case .forbidden: .forbidden
        case .unauthorized: .unauthorized
        case .credentialsUnavailable: .credentialsUnavailable
        case .serverError: .serverError
        case .invalidBatch: .invalidBatch
        case .coding: .coding
        case .presenceCoding: .presenceCoding
        case .batchAbandoned: .batchAbandoned
        case .connectFailed: .connectFailed
        case .tlsHostnameMismatch: .tlsHostnameMismatch
        case .tlsCertificateExpired: .tlsCertificateExpired
        case .tlsUntrustedCertificate: .tlsUntrustedCertificate
        case .tlsPinMismatch: .tlsPinMismatch
        case .tlsHandshakeFailed: .tlsHandshakeFailed
        case .tlsConfigurationInvalid: .tlsConfigurationInvalid
        case .connectionLost: .connectionLost
        case .allEndpointsFailed: .allEndpointsFailed
        case .timedOut: .timedOut
        case .protocolViolation: .protocolViolation
        case .requestTooLarge: .requestTooLarge
        case .unsupportedByServer: .unsupportedByServer
        case .notJoined: .notJoined
        case .cancelled: .cancelled
        case .closed: .closed
        }
    }

    /// The REJECT, for `.rejected`: the wire code, the operation, the identifier, the message.
    public var rejection: Rejection? {
        if case .rejected(let rejection) = detail { return rejection }
        return nil
    }

    /// The local validation failure, for `.invalidBatch`.
    public var batchError: BatchError? {
        if case .invalidBatch(let error) = detail { return error }
        return nil
    }

    /// The failing operation's index in the batch: the server's (`.rejected`, codes 20–32) or
    /// the builder's (`.invalidBatch`); nil otherwise.
    public var operationIndex: Int? {
        switch detail {
        case .rejected(let rejection): rejection.operationIndex
        case .invalidBatch(let error): error.operationIndex
        default: nil
        }
    }

    /// The identifier the failure is about, when it is about one: the REJECT's, or the local
    /// violation's.
    public var identifier: SnapshotIdentifier? {
        switch detail {
        case .rejected(let rejection): rejection.identifier
        case .invalidBatch(let error): error.violation.identifier
        default: nil
        }
    }

    /// The server's message (REJECT, ERROR, `forbidden`, `unauthorized`); nil for the client's
    /// own errors, whose `description` says what happened.
    public var serverMessage: String? {
        switch detail {
        case .rejected(let rejection): rejection.message
        case .serverError(let error): error.message
        case .forbidden(_, _, let message): message
        case .unauthorized(let reason): reason
        default: nil
        }
    }

    /// The room the error is about: `.forbidden`'s and `.notJoined`'s.
    public var room: String? {
        switch detail {
        case .forbidden(let room, _, _), .notJoined(let room): room
        default: nil
        }
    }

    /// The right the token lacks (`"read"` or `"write"`), for `.forbidden`.
    public var right: String? {
        if case .forbidden(_, let right, _) = detail { return right }
        return nil
    }

    /// The host a TLS error is about (the configured `serverName`, else the endpoint's host).
    public var host: String? {
        switch detail {
        case .tlsHostnameMismatch(let host, _), .tlsCertificateExpired(let host, _), .tlsUntrustedCertificate(let host, _),
            .tlsPinMismatch(let host, _, _), .tlsHandshakeFailed(let host, _), .tlsConfigurationInvalid(let host, _):
            host
        default: nil
        }
    }

    /// For `.tlsPinMismatch`: the pinned key's base64 SHA-256, and the presented key's.
    public var pinMismatch: (pinned: String, presented: String)? {
        if case .tlsPinMismatch(_, let expected, let presented) = detail { return (expected, presented) }
        return nil
    }

    /// The server's ERROR, for `.serverError`: the wire code and the message.
    public var serverError: ServerError? {
        if case .serverError(let error) = detail { return error }
        return nil
    }

    /// The value that did not encode, for `.coding`.
    public var codingError: ElementCodingError? {
        if case .coding(let error) = detail { return error }
        return nil
    }

    /// For `.requestTooLarge`: the request's frame size and the server's `max_frame_bytes`.
    public var frameSize: (size: Int, limit: Int)? {
        if case .requestTooLarge(let size, let limit) = detail { return (size, limit) }
        return nil
    }

    /// For `.allEndpointsFailed`: the endpoints tried, in order, and why the last one failed.
    public var endpointFailures: (tried: [SnapSyncClient.Endpoint], last: SnapSyncError)? {
        if case .allEndpointsFailed(let tried, let last) = detail { return (tried, last) }
        return nil
    }

    /// The client's own explanation, for the kinds that carry one (`.connectionLost`,
    /// `.timedOut`, `.connectFailed`, `.protocolViolation`, the TLS kinds, ...); the server's
    /// words are `serverMessage`. `description` says the whole error in one line.
    public var reason: String? {
        switch detail {
        case .credentialsUnavailable(let text), .batchAbandoned(let text), .connectFailed(let text), .connectionLost(let text),
            .timedOut(let text), .protocolViolation(let text), .unsupportedByServer(let text), .presenceCoding(let text):
            text
        case .tlsHostnameMismatch(_, let text), .tlsCertificateExpired(_, let text), .tlsUntrustedCertificate(_, let text),
            .tlsHandshakeFailed(_, let text), .tlsConfigurationInvalid(_, let text):
            text
        default: nil
        }
    }
}
