/// A libnats call that failed, or a publish JetStream refused: the operation (the libnats
/// function), the identifier it concerned (stream, subject, message id), libnats's status or
/// JetStream's error code, and the text either gave.
///
/// Made in one place, `NATSConnection.swift` (its `natsCheck`, its publish-ack handler, and
/// `failed`/`notFound` for what its callers refuse in an answer), from the codes of
/// `nats/status.h`.
public struct NATSError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Code: Equatable, Sendable {
        /// A `natsStatus` other than `NATS_OK` (its raw value; `text` has `natsStatus_GetText`).
        case status(UInt32)
        /// A JetStream API error (`jsErrCode`, the server's `err_code`), e.g. 10071.
        case jetStream(UInt32)
        /// A server cluster mode will not use: its version's JetStream is known to lose
        /// acknowledged writes (`NATSServerVersionCheck`).
        case refusedServer
        /// Cluster mode's start gave up: the servers could not serve before its deadline
        /// (`ClusterStartRetry`, `--cluster-start-timeout`).
        case startDeadline
    }

    public let operation: String
    public let identifier: String
    public let code: Code
    public let text: String

    public init(operation: String, identifier: String, code: Code, text: String) {
        self.operation = operation
        self.identifier = identifier
        self.code = code
        self.text = text
    }

    public var description: String { "\(operation) \(identifier): \(text) (\(code))" }

    /// JetStream's "wrong last sequence" (`JSStreamWrongLastSequenceErr`): a publish whose
    /// expected last subject sequence was not the subject's last. Another node wrote first: catch
    /// up and validate again.
    public static let wrongLastSequence: UInt32 = 10071

    /// JetStream's "wrong last sequence" without the sequence
    /// (`JSStreamWrongLastSequenceConstantErr`): how a replicated stream of nats-server 2.10 and
    /// later refuses a publish whose subject has another expected-sequence publish in flight.
    /// The same verdict as `wrongLastSequence`: another node's write came first.
    public static let wrongLastSequenceInFlight: UInt32 = 10164

    /// JetStream's "stream name already in use" (`JSStreamNameExistErr`): the stream exists with
    /// another configuration.
    public static let streamNameExists: UInt32 = 10058

    /// JetStream's "duplicate message id is in process" (`JSStreamDuplicateMessageConflict`,
    /// nats-server 2.11 and later): a publish whose `Nats-Msg-Id` another publish, not yet
    /// stored, carries. Neither stored nor refused for good: what happened is known only once
    /// the other publish settles, so the caller reads the log (or asks again) later.
    public static let duplicateMessageInProcess: UInt32 = 10158

    /// JetStream's "JetStream system temporarily unavailable" (`JSClusterNotAvailErr`): the
    /// meta group or the stream's group has no leader at the moment (a server paused or
    /// restarting). Worth asking again after a while.
    public static let temporarilyUnavailable: UInt32 = 10008

    /// JetStream's "no suitable peers for placement" (`JSClusterNoPeersErr`): too few servers
    /// of the cluster are up to place a stream's replicas, as while servers restart.
    public static let clusterNoPeers: UInt32 = 10005

    /// JetStream's "JetStream cluster can not handle request" (`JSClusterNotLeaderErr`): the
    /// server asked is not, or no longer, the leader the request needs (a leader election).
    public static let clusterNotLeader: UInt32 = 10009

    public var isDuplicateInProcess: Bool { code == .jetStream(Self.duplicateMessageInProcess) }

    public var isTemporarilyUnavailable: Bool { code == .jetStream(Self.temporarilyUnavailable) }

    public var isWrongLastSequence: Bool {
        code == .jetStream(Self.wrongLastSequence) || code == .jetStream(Self.wrongLastSequenceInFlight)
    }
}
