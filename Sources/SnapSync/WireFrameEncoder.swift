import NIOCore
import SnapSyncWire

/// What the client writes to a channel: a message, encoded on the event loop, or a frame the
/// client already encoded (a write, whose size it compared with the server's limit first).
enum OutboundFrame: Sendable {
    case message(Message)
    case encoded([UInt8])
}

/// The client's outbound codec: each `OutboundFrame` becomes its frame's bytes (PROTOCOL.md §1).
/// - Complexity: O(size of the frame).
struct WireFrameEncoder: MessageToByteEncoder {
    typealias OutboundIn = OutboundFrame

    func encode(data: OutboundFrame, out: inout ByteBuffer) throws {
        switch data {
        case .message(let message):
            out.writeBytes(FrameEncoder().encode(message))
        case .encoded(let frame):
            out.writeBytes(frame)
        }
    }
}
