import NIOCore
import NIOTLS
import SnapSyncWire

/// The last handler of a connection's pipeline: tells its `ClientChannel` when the transport is
/// ready (channel active, or the TLS handshake completed: the transport verified the server in it),
/// hands it each decoded message, records errors and closes the channel on the first one.
final class ClientChannelHandler: ChannelInboundHandler {
    typealias InboundIn = Message

    private let connection: ClientChannel
    /// With TLS, frames may flow only after the handshake.
    private let waitsForTLSHandshake: Bool
    /// This channel is the connection's (see `ClientChannel.Attachment`).
    private var isCurrent = false

    init(connection: ClientChannel, waitsForTLSHandshake: Bool) {
        self.connection = connection
        self.waitsForTLSHandshake = waitsForTLSHandshake
    }

    func channelActive(context: ChannelHandlerContext) {
        switch connection.attach(context.channel) {
        case .superseded:
            context.close(promise: nil)
        case .closing:
            isCurrent = true
            context.close(promise: nil)
        case .attached:
            isCurrent = true
            if !waitsForTLSHandshake { connection.ready() }
        }
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if isCurrent, waitsForTLSHandshake, let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            connection.ready()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard isCurrent else { return }
        connection.received(unwrapInboundIn(data))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard isCurrent else { return }
        connection.failed(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if isCurrent { connection.finish() }
        context.fireChannelInactive()
    }
}

@available(*, unavailable)
extension ClientChannelHandler: Sendable {}

extension ClientChannel {
    /// The codec and the handler, after the transport's own handlers (TLS). Runs on the
    /// channel's event loop, in its initializer.
    func installHandlers(on pipeline: ChannelPipeline.SynchronousOperations, waitsForTLSHandshake: Bool) throws {
        try pipeline.addHandler(ByteToMessageHandler(WireFrameDecoder()))
        try pipeline.addHandler(MessageToByteHandler(WireFrameEncoder()))
        try pipeline.addHandler(ClientChannelHandler(connection: self, waitsForTLSHandshake: waitsForTLSHandshake))
    }
}
