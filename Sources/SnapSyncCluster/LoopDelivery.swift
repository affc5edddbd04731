/// What libnats's threads hand to the loop thread, through the connection's
/// `LoopMailbox<LoopDelivery>` (SnapSyncLoop).
enum LoopDelivery: Sendable {
    /// The outcome of one asynchronous publish, by its message id.
    case published(messageID: String, Result<PublishAck, NATSError>)
    /// A message of one of the connection's subscriptions.
    case inbox(InboxMessage)
    /// The connection was lost (nil) or made again to the server at this URL.
    case connection(reconnectedTo: String?)
}
