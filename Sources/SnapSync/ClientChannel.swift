import NIOConcurrencyHelpers
import NIOCore
import SnapSyncWire

/// One connection to the daemon, on a SwiftNIO channel (ClientTransport.swift picks the
/// transport: NIOPosix with NIOSSL, or Network.framework). The channel's pipeline is the
/// optional TLS handler, the wire codec (`WireFrameDecoder`, `WireFrameEncoder`) and a
/// `ClientChannelHandler` that reports here. It knows frames, not the protocol's rules: the
/// client's actor does.
///
/// Events come out of `events` in the order they happened: `.connected` (unless the connect or
/// the TLS handshake failed), then `.message`s, then exactly one `.closed` with the reason,
/// after which the stream finishes and the channel is closed.
final class ClientChannel: Sendable {
    enum Event: Sendable {
        case connected
        case message(Message)
        case closed(SnapSyncError)
    }

    let events: AsyncStream<Event>
    let target: TransportTarget
    private let continuation: AsyncStream<Event>.Continuation
    private let shared = NIOLockedValueBox(Shared())

    /// What the caller's side and the event loop share, under the lock.
    private struct Shared {
        /// The channel once connected; nil before, and after the connection finished.
        var channel: (any Channel)?
        /// Why the connection ends, the first reason winning: `close`, a refused certificate,
        /// an undecodable frame, `drop`.
        var closeReason: SnapSyncError?
        /// Frames sent and not yet handed to the channel (`send`).
        var outbound: [OutboundFrame] = []
        /// A `flushOutbound` is queued on the event loop.
        var flushScheduled = false
        /// The first other error the pipeline or the connect reported, described at the end.
        var failure: (any Error)?
        /// The transport connected: a failure from now on loses the connection rather than
        /// failing to make one.
        var attached = false
        var finished = false
    }

    /// What `attach` tells the handler of a channel that became active.
    enum Attachment {
        /// This is the connection's channel.
        case attached
        /// This is the connection's channel, but `close` was called meanwhile: close it.
        case closing
        /// Another channel won (happy eyeballs raced two addresses): close this one quietly.
        case superseded
    }

    /// Starts connecting to `target`; the outcome arrives in `events`.
    init(target: TransportTarget) {
        self.target = target
        (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        ClientTransport.connect(target, connection: self).whenFailure { [self] error in
            failed(error)
            finish()
        }
    }

    /// Queues one message, encoded on the event loop. After the connection closed, it is
    /// dropped: the `.closed` event has told (or is about to tell) the owner.
    func send(_ message: Message) {
        send(.message(message))
    }

    /// Queues one encoded frame (see `send(_:)`).
    func send(frame: [UInt8]) {
        send(.encoded(frame))
    }

    /// Frames sent while a flush is pending join it: under load (many writes in flight, a
    /// rejoin of many rooms) the event loop is woken once and the socket written once for many
    /// frames, not once per frame.
    private func send(_ frame: OutboundFrame) {
        let schedule: (any Channel)? = shared.withLockedValue { shared in
            guard shared.closeReason == nil, let channel = shared.channel else { return nil }
            shared.outbound.append(frame)
            guard !shared.flushScheduled else { return nil }
            shared.flushScheduled = true
            return channel
        }
        guard let channel = schedule else { return }
        channel.eventLoop.execute { [self] in flushOutbound(channel) }
    }

    /// On the event loop: writes every queued frame, then flushes once.
    private func flushOutbound(_ channel: any Channel) {
        let frames = shared.withLockedValue { shared in
            shared.flushScheduled = false
            defer { shared.outbound.removeAll(keepingCapacity: true) }
            return shared.outbound
        }
        for frame in frames { channel.write(frame, promise: nil) }
        channel.flush()
    }

    /// Closes the channel and reports `reason`. Idempotent: the first reason wins.
    func close(_ reason: SnapSyncError) {
        fail(reason)?.close(promise: nil)
    }

    /// Closes the channel as a network failure would: the connection is reported lost. For
    /// tests of reconnection.
    func drop() {
        fail(.connectionLost("the connection was dropped"))?.close(promise: nil)
    }

    // MARK: - From the event loop (ClientChannelHandler, the transports)

    /// A channel of this connection became active.
    func attach(_ channel: any Channel) -> Attachment {
        shared.withLockedValue { shared in
            guard !shared.attached, !shared.finished else { return .superseded }
            shared.attached = true
            shared.channel = channel
            return shared.closeReason == nil ? .attached : .closing
        }
    }

    /// The transport is ready for frames (TCP connected, TLS verified).
    func ready() {
        continuation.yield(.connected)
    }

    func received(_ message: Message) {
        // After a close reason, the owner no longer wants the connection's messages.
        guard shared.withLockedValue({ $0.closeReason == nil }) else { return }
        continuation.yield(.message(message))
    }

    /// Records why the connection ends, unless a reason is already known; returns the channel
    /// to close, if any.
    @discardableResult
    func fail(_ reason: SnapSyncError) -> (any Channel)? {
        shared.withLockedValue { shared in
            guard !shared.finished, shared.closeReason == nil else { return nil }
            shared.closeReason = reason
            return shared.channel
        }
    }

    /// Records an error of the pipeline or the connect: an undecodable frame is the server's
    /// protocol violation; anything else is described when the connection finishes.
    func failed(_ error: any Error) {
        if let error = error as? WireError {
            fail(.protocolViolation("undecodable frame from the server: \(error)"))
            return
        }
        shared.withLockedValue { shared in
            if shared.failure == nil { shared.failure = error }
        }
    }

    /// The channel is gone (or never came).
    func finish() {
        let outcome: (reason: SnapSyncError?, failure: (any Error)?, attached: Bool)? = shared.withLockedValue { shared in
            guard !shared.finished else { return nil }
            shared.finished = true
            shared.channel = nil
            shared.outbound = []
            return (shared.closeReason, shared.failure, shared.attached)
        }
        guard let outcome else { return }
        if let reason = outcome.reason { return report(reason) }
        let endpoint = "\(target.host):\(target.port)"
        guard let failure = outcome.failure else {
            return report(outcome.attached ? .connectionLost("the server closed the connection") : .connectFailed("\(endpoint): no connection"))
        }
        let fallback: SnapSyncError = outcome.attached ? .connectionLost("\(failure)") : .connectFailed("\(endpoint): \(failure)")
        report(ClientTransport.describe(failure, target: target) ?? fallback)
    }

    private func report(_ reason: SnapSyncError) {
        continuation.yield(.closed(reason))
        continuation.finish()
    }
}
