import NIOCore
import SnapSyncWire

/// The client's inbound codec: cuts whole frames out of NIO's cumulation buffer with
/// `FrameCutter` and decodes each in place with `FrameDecoder.decode(frame:)` (PROTOCOL.md §1).
///
/// The length prefix is checked against `limits.maxFrameBytes` as soon as its 4 bytes are
/// there, before the body is waited for: a frame over the limit is an error (and the connection
/// ends) without its bytes ever being buffered. Frames after WELCOME are bounded by the limits
/// the server announced in it, as the protocol says (§3).
///
/// - Complexity: O(bytes of the frame) per frame; nothing is copied but the decoded fields.
struct WireFrameDecoder: ByteToMessageDecoder {
    typealias InboundOut = Message

    private var limits = WireLimits.default
    /// The connection's protocol version: the current one until WELCOME (which reads the same in
    /// every version, PROTOCOL.md §8.2) names the one the server chose.
    private var version = ProtocolVersion.current

    mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let limits = limits, version = version
        let decoded = try buffer.withUnsafeReadableBytes { bytes throws(WireError) -> (length: Int, message: Message)? in
            guard let frame = try FrameCutter(limits: limits).nextFrame(in: bytes) else { return nil }
            return (frame.count, try FrameDecoder.decode(frame: frame, limits: limits, accepting: .server, version: version))
        }
        guard let decoded else { return .needMoreData }
        buffer.moveReaderIndex(forwardBy: decoded.length)
        if case .welcome(let chosen, _, _, let announced) = decoded.message {
            self.limits = WireLimits(welcome: announced)
            self.version = chosen
        }
        context.fireChannelRead(wrapInboundOut(decoded.message))
        return .continue
    }

    /// At end of stream a partial frame is dropped: the connection is gone, and the frames
    /// (not the stream's end) say whether a message is whole.
    mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        while try decode(context: context, buffer: &buffer) == .continue {}
        return .needMoreData
    }
}
