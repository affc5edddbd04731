import Testing
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncWire

@Suite(.unitTests) struct DecoderTests {
    let encoder = FrameEncoder()

    /// A server decodes client messages only, a client server messages only; PING and PONG go
    /// both ways.
    @Test func acceptsOnlyThePeersMessages() throws {
        let diff = encoder.encode(.diff(room: "r", epoch: 1, version: 1, ops: []))
        let join = encoder.encode(.join(requestID: 1, room: "r", resume: nil))
        let ping = encoder.encode(.ping(nonce: 1))
        #expect { try FrameDecoder.decode(frame: diff, accepting: .client) } throws: { ($0 as? WireError)?.code == .unknownMessageType }
        #expect { try FrameDecoder.decode(frame: join, accepting: .server) } throws: { ($0 as? WireError)?.code == .unknownMessageType }
        #expect(try FrameDecoder.decode(frame: diff, accepting: .server).type == .diff)
        #expect(try FrameDecoder.decode(frame: join, accepting: .client).type == .join)
        for side in [Sender.client, .server, .either] {
            #expect(try FrameDecoder.decode(frame: ping, accepting: side) == .ping(nonce: 1))
        }
        for type in MessageType.allCases {
            #expect(type.sentBy == (type.rawValue >= 0x20 || type == .welcome || type == .error ? .server : type == .ping || type == .pong ? .either : .client))
        }
    }

    /// After an error inside a whole frame, the frame is gone and the next one decodes: a server
    /// can answer a bad REPLACE with REJECT and read on.
    @Test func contentErrorConsumesOnlyItsFrame() throws {
        var stream: [UInt8] = []
        // REPLACE whose snapshot repeats an item: encoded by hand, since a RoomSnapshot cannot hold it.
        stream += [0, 0, 0, 15, 0x13, 0x05, 0x01, 0x72, 0x00, 0x00, 0x01, 0x01, 0x73, 0x00, 0x02, 0x01, 0x78, 0x00, 0x01]
        stream[3] = UInt8(stream.count - 4 + 3)
        stream += [0x78, 0x00]
        stream[3] = UInt8(stream.count - 4)
        encoder.encode(.ping(nonce: 3), into: &stream)
        var decoder = FrameDecoder()
        decoder.append(stream)
        do {
            _ = try decoder.nextMessage()
            Issue.record("expected duplicate_item")
        } catch {
            #expect(error.code == .duplicateItem)
            #expect(error.requestID == 5)
            #expect(error.identifier == "x")
        }
        #expect(try decoder.nextMessage() == .ping(nonce: 3))
        #expect(try decoder.nextMessage() == nil)
    }

    @Test func errorDetailsNameTheField() {
        let cases: [([UInt8], String)] = [
            ([0x04, 0x80, 0x00], "bad varint (non-minimal: overlong encoding) in PING.nonce"),
            ([0x04] + [UInt8](repeating: 0xFF, count: 10) + [0x01], "bad varint (longer than 10 bytes) in PING.nonce"),
            ([0x04] + [UInt8](repeating: 0x80, count: 9) + [0x02], "bad varint (overflows 64 bits) in PING.nonce"),
            ([0x10, 0x01, 0x01, 0x72, 0x02], "bad presence flag 0x02 (must be 0x00 or 0x01) in JOIN.resume"),
            ([0x22, 0x01, 0x72, 0x01, 0x01, 0x01, 0x19], "unknown opcode 0x19 in DIFF.ops.opcode"),
            ([0x04, 0x01, 0x00], "1 trailing bytes after the last field of PING"),
            ([0x11, 0x01, 0x05, 0x72], "length 5 runs past the end of the body (truncated field) in LEAVE.room"),
            ([0x10, 0x01, 0x02, 0xC3, 0x28, 0x00], "invalid UTF-8 in JOIN.room"),
        ]
        for (body, detail) in cases {
            #expect(throws: WireError(.malformedFrame, detail)) { try FrameDecoder.decode(body: body) }
        }
        #expect(throws: WireError(.unknownMessageType, "unknown message type 0x30")) { try FrameDecoder.decode(body: [0x30]) }
        // Version 1 (PROTOCOL.md §8.2) has neither opcode 0x17 nor REPLACE_SECTION.
        #expect(throws: WireError(.malformedFrame, "unknown opcode 0x17 in protocol version 1 in DIFF.ops.opcode")) {
            try FrameDecoder.decode(body: [0x22, 0x01, 0x72, 0x01, 0x01, 0x01, 0x17], version: 1)
        }
        #expect(throws: WireError(.unknownMessageType, "unknown message type 0x18 in protocol version 1")) {
            try FrameDecoder.decode(body: [0x18, 0x01], version: 1)
        }
        #expect { try FrameDecoder.decode(body: [0x01] + Array("SNAQ".utf8) + [1, 1, 0, 0]) } throws: { ($0 as? WireError)?.code == .badMagic }
    }

    @Test func wholeFrameDecodeRefusesExtraOrMissingBytes() throws {
        let frame = encoder.encode(.ack(requestID: 1, epoch: 2, version: 3))
        #expect(try FrameDecoder.decode(frame: frame) == .ack(requestID: 1, epoch: 2, version: 3))
        #expect { try FrameDecoder.decode(frame: frame + [0]) } throws: { ($0 as? WireError)?.code == .malformedFrame }
        #expect { try FrameDecoder.decode(frame: Array(frame.dropLast())) } throws: { ($0 as? WireError)?.code == .malformedFrame }
        #expect { try FrameDecoder.decode(frame: [0, 0]) } throws: { ($0 as? WireError)?.code == .malformedFrame }
    }

    /// Many frames through one decoder: the buffer is compacted as frames are consumed, so it
    /// does not keep every byte ever received.
    @Test func bufferIsCompacted() throws {
        var decoder = FrameDecoder()
        let frame = encoder.encode(
            .diff(
                room: "lobby", epoch: 1, version: 1,
                ops: [.appendItems([SnapshotElement("item", payload: SnapshotPayload([UInt8](repeating: 1, count: 100)))], toSection: nil)]
            ))
        for round in 0..<10_000 {
            decoder.append(frame)
            decoder.append(frame.prefix(10))  // keep a partial frame buffered
            #expect(try decoder.nextMessage() != nil)
            #expect(try decoder.nextMessage() == nil, "round \(round)")
            decoder.append(frame.dropFirst(10))
            #expect(try decoder.nextMessage() != nil)
            #expect(decoder.bufferedByteCount == 0)
        }
    }

    @Test func limitsCanChangeBetweenFrames() throws {
        var decoder = FrameDecoder(limits: WireLimits(maxFrameBytes: 8))
        let big = encoder.encode(.error(code: 1, message: "0123456789"))
        decoder.append(encoder.encode(.welcome(version: 1, sessionID: 1, serverName: "", limits: [])).prefix(0))
        decoder.limits = WireLimits(welcome: [Message.LimitEntry(.maxFrameBytes, 64)])
        decoder.append(big)
        #expect(try decoder.nextMessage()?.type == .error)
    }

    @Test func messageEqualityIsByteExact() {
        // Canonically equivalent Swift strings, different bytes on the wire.
        let composed = Message.leave(requestID: 1, room: "\u{E9}")
        let decomposed = Message.leave(requestID: 1, room: "e\u{301}")
        #expect(composed != decomposed)
        #expect(Set([composed, decomposed, composed]).count == 2)
        #expect(Message.ping(nonce: 1) != Message.pong(nonce: 1))
    }
}
