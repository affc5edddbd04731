// Reading a `SnapSyncError` without matching its cases. An app's exhaustive `switch` over the
// enum breaks when the library adds a case (this release added several), and matching a payload
// in a `catch` pattern with a `where` clause crashes the Swift 6.3.1 compiler in some contexts.
// `kind` is a growable value (a struct, as swift-nio's error types are: a new kind breaks no
// code), and the accessors read the payloads apps need.

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

    /// Which error this is (its case), as a growable value.
    public var kind: Kind {
        switch self {
        case .rejected: .rejected
        case .forbidden: .forbidden
        case .unauthorized: .unauthorized
        case .credentialsUnavailable: .credentialsUnavailable
        case .serverError: .serverError
        case .invalidBatch: .invalidBatch
        case .coding: .coding
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
        if case .rejected(let rejection) = self { return rejection }
        return nil
    }

    /// The local validation failure, for `.invalidBatch`.
    public var batchError: BatchError? {
        if case .invalidBatch(let error) = self { return error }
        return nil
    }

    /// The failing operation's index in the batch: the server's (`.rejected`, codes 20–32) or
    /// the builder's (`.invalidBatch`); nil otherwise.
    public var operationIndex: Int? {
        switch self {
        case .rejected(let rejection): rejection.operationIndex
        case .invalidBatch(let error): error.operationIndex
        default: nil
        }
    }

    /// The identifier the failure is about, when it is about one: the REJECT's, or the local
    /// violation's.
    public var identifier: Identifier? {
        switch self {
        case .rejected(let rejection): rejection.identifier
        case .invalidBatch(let error): error.violation.identifier
        default: nil
        }
    }

    /// The server's message (REJECT, ERROR, `forbidden`, `unauthorized`); nil for the client's
    /// own errors, whose `description` says what happened.
    public var serverMessage: String? {
        switch self {
        case .rejected(let rejection): rejection.message
        case .serverError(let error): error.message
        case .forbidden(_, _, let message): message
        case .unauthorized(let reason): reason
        default: nil
        }
    }
}
