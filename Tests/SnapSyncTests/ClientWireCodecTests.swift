import NIOCore
import NIOEmbedded
@testable import SnapSync
import SnapSyncWire
import Testing
import SnapSyncTestThreads

// The client's codec handlers (WireFrameDecoder, WireFrameEncoder) on an EmbeddedChannel: frames
// cut across reads, the length checked on its own four bytes, WELCOME's limits adopted.

@Suite("Client: the wire codec on a NIO channel", .unitTests)
struct ClientWireCodecTests {
    func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(WireFrameDecoder()))
        try channel.pipeline.syncOperations.addHandler(MessageToByteHandler(WireFrameEncoder()))
        return channel
    }

    func lengthPrefix(_ length: Int) -> ByteBuffer {
        ByteBuffer(bytes: [UInt8(length >> 24 & 0xFF), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)])
    }

    @Test("frames arriving a byte at a time decode once whole, in order, and nothing before")
    func framesAcrossReads() throws {
        let channel = try channel()
        let first = FrameEncoder().encode(.pong(nonce: 7))
        let bytes = first + FrameEncoder().encode(.ping(nonce: 300))
        var decoded: [Message] = []
        for (index, byte) in bytes.enumerated() {
            try channel.writeInbound(ByteBuffer(bytes: [byte]))
            while let message = try channel.readInbound(as: Message.self) { decoded.append(message) }
            let whole = (index + 1 >= first.count ? 1 : 0) + (index + 1 == bytes.count ? 1 : 0)
            #expect(decoded.count == whole, "after \(index + 1) bytes")
        }
        #expect(decoded == [.pong(nonce: 7), .ping(nonce: 300)])
        _ = try channel.finish()
    }

    @Test("a length over max_frame_bytes fails on its four bytes, before any of the body is there")
    func lengthCheckedFirst() throws {
        let channel = try channel()
        #expect { try channel.writeInbound(lengthPrefix(WireLimits.default.maxFrameBytes + 1)) } throws: { error in
            (error as? WireError)?.code == .frameTooLarge
        }
        try channel.close().wait()
    }

    @Test("after WELCOME the server's announced max_frame_bytes bounds the frames")
    func welcomeLimits() throws {
        let channel = try channel()
        let welcome = Message.welcome(
            version: 1, sessionID: 1, serverName: "s", limits: [.init(key: LimitKey.maxFrameBytes.rawValue, value: 64)])
        try channel.writeInbound(ByteBuffer(bytes: FrameEncoder().encode(welcome)))
        #expect(try channel.readInbound(as: Message.self) == welcome)
        try channel.writeInbound(ByteBuffer(bytes: FrameEncoder().encode(.ping(nonce: 1))))
        #expect(try channel.readInbound(as: Message.self) == .ping(nonce: 1))
        // 65 is far below the default limit (16 MiB), over the announced one.
        #expect { try channel.writeInbound(self.lengthPrefix(65)) } throws: { error in
            (error as? WireError)?.code == .frameTooLarge
        }
        try channel.close().wait()
    }

    @Test("messages and encoded frames go out as their frames' bytes")
    func encoder() throws {
        let channel = try channel()
        let frame = FrameEncoder().encode(.ping(nonce: 9))
        try channel.writeOutbound(OutboundFrame.message(.ping(nonce: 9)))
        try channel.writeOutbound(OutboundFrame.encoded(frame))
        for _ in 0..<2 {
            let buffer = try #require(try channel.readOutbound(as: ByteBuffer.self))
            #expect(Array(buffer.readableBytesView) == frame)
        }
        #expect(try channel.finish().isClean)
    }
}
