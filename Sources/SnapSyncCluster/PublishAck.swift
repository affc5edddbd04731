/// JetStream's acknowledgement of a publish: stored (by a quorum of the stream's replicas) at
/// `sequence` of `stream`; `duplicate` when a message with the same id was stored already (the
/// sequence is then that message's).
public struct PublishAck: Sendable, Equatable {
    public let stream: String
    public let sequence: UInt64
    public let duplicate: Bool

    public init(stream: String, sequence: UInt64, duplicate: Bool) {
        self.stream = stream
        self.sequence = sequence
        self.duplicate = duplicate
    }
}
