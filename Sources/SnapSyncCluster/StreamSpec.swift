/// A JetStream stream's configuration, as far as cluster mode sets it: what
/// `StreamProvisioning.ensureStream` makes or updates (through `NATSAdminConnection`), and, with
/// `saltSubject`, where it reads the salt. SnapSync's own streams are `rooms(retain:)` and
/// `checkpoints` (StreamProvisioning.swift).
public struct StreamSpec: Sendable, Equatable {
    public var name: String
    public var subjects: [String]
    public var replicas: Int
    /// JetStream de-duplicates publishes with the same `Nats-Msg-Id` within this window: it must
    /// cover the longest time a client may retry one write (through any node).
    public var duplicateWindow: Duration
    /// Messages kept per subject (older ones go); nil: no limit.
    public var maxMessagesPerSubject: Int?
    /// The key-value bucket settings (a bucket is a stream): reads by `$JS.API.DIRECT.GET` from
    /// any replica, a put may replace the subject's history (`Nats-Rollup`), no deletes, and a
    /// full stream refuses new messages instead of dropping old ones.
    public var keyValue: Bool
    /// One of `subjects` whose first message is the stream's salt (`StreamInfo.salt`), nil: none.
    /// `StreamProvisioning`'s, not the stream's: JetStream is never told of it.
    public var saltSubject: String?

    public init(
        name: String, subjects: [String], replicas: Int, duplicateWindow: Duration, maxMessagesPerSubject: Int? = nil,
        keyValue: Bool = false, saltSubject: String? = nil
    ) {
        self.name = name
        self.subjects = subjects
        self.replicas = replicas
        self.duplicateWindow = duplicateWindow
        self.maxMessagesPerSubject = maxMessagesPerSubject
        self.keyValue = keyValue
        self.saltSubject = saltSubject
    }
}

/// What `StreamProvisioning.ensureStream` found or made.
public struct StreamInfo: Sendable, Equatable {
    /// The payload of the first message of the spec's `saltSubject` (32 lowercase hex digits),
    /// nil without one: the same for every client until the stream is deleted and made again.
    public var salt: String?
    /// The server that leads the stream's replicas (its `server_name`), when it has one.
    public var leader: String?
    /// The stream's `max_msgs_per_subject` before this call changed it (-1: no limit), nil when
    /// the call made the stream or left that limit as it was: a node started with another
    /// retention than the cluster's replaces it for every node.
    public var replacedMaxMessagesPerSubject: Int64? = nil
}
