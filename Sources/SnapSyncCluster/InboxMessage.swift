/// A message of one of the connection's subscriptions (`NATSConnection.onMessage`): a reply to
/// a request, or a delivery of a push consumer. Copied off libnats's message on its thread.
struct InboxMessage: Sendable {
    /// Which subscription got it (`NATSConnection.subscribe`'s id): a JetStream delivery keeps
    /// its stored subject, so only the subscription says which consumer sent it.
    var subscription: UInt64
    var subject: String
    /// The message's reply subject (a JetStream delivery's `$JS.ACK...`, with its metadata).
    var reply: String
    var data: [UInt8]
    /// The status of a status message (`NATS/1.0 503`, `100` for a heartbeat), else nil.
    var status: String?
    /// A status message's `Description`.
    var statusDescription: String?
    /// A heartbeat's `Nats-Last-Consumer`: the consumer sequence of the last delivery sent.
    var lastConsumerSequence: UInt64?
    /// A stored record's `Nats-Expected-Last-Subject-Sequence`: the subject's last sequence its
    /// publisher expected (JetStream keeps the publisher's headers with the message).
    var expectedLastSubjectSequence: UInt64?
}
