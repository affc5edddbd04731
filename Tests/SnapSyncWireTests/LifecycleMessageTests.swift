import SnapSyncWire
import Testing
import SnapSyncTestThreads

/// DROP (0x16), SET_TTL (0x17) and LEFT's room_deleted / room_expired (PROTOCOL.md §11.18–§11.20),
/// byte by byte; the generated vectors cover them too (VectorTests).
@Suite(.unitTests)
struct LifecycleMessageTests {
    let encoder = FrameEncoder()

    @Test func dropEncodesFieldByField() throws {
        let message = Message.drop(requestID: 300, room: "todo")
        let frame = encoder.encode(message)
        // length 8; type 0x16; request_id 300 = ac 02; room "todo".
        #expect(frame == [0, 0, 0, 8, 0x16, 0xac, 0x02, 4, 0x74, 0x6f, 0x64, 0x6f])
        #expect(try FrameDecoder.decode(frame: frame, accepting: .client) == message)
        #expect(message.requestID == 300)
        #expect(message.type.sentBy == .client)
        #expect(message.type.name == "DROP")
    }

    @Test func setTTLEncodesFieldByField() throws {
        let message = Message.setTTL(requestID: 1, room: "r", seconds: 86_400)
        let frame = encoder.encode(message)
        // length 7; type 0x17; request_id 1; room "r"; seconds 86400 = 80 a3 05.
        #expect(frame == [0, 0, 0, 7, 0x17, 0x01, 1, 0x72, 0x80, 0xa3, 0x05])
        #expect(try FrameDecoder.decode(frame: frame, accepting: .client) == message)
        #expect(message.type.name == "SET_TTL")
    }

    /// Every proper prefix is "need more bytes" to a stream decoder, never a message or an error.
    @Test func truncatedFramesWaitForMoreBytes() throws {
        for message in [Message.drop(requestID: 7, room: "board:2"), .setTTL(requestID: 7, room: "board:2", seconds: 0)] {
            let frame = encoder.encode(message)
            for cut in 0..<frame.count {
                var decoder = FrameDecoder()
                decoder.append(Array(frame.prefix(cut)))
                #expect(try decoder.nextMessage() == nil, "\(message.type.name) cut at \(cut)")
                decoder.append(Array(frame.dropFirst(cut)))
                #expect(try decoder.nextMessage() == message)
            }
        }
    }

    @Test func missingAndTrailingFieldsAreMalformed() {
        let bodies: [[UInt8]] = [
            [0x16],  // no request_id
            [0x16, 0x01],  // no room
            [0x16, 0x01, 0x01, 0x72, 0x00],  // a byte after the room
            [0x17, 0x01, 0x01, 0x72],  // no seconds
            [0x17, 0x01, 0x01, 0x72, 0x80, 0x00],  // non-minimal seconds
            [0x17, 0x01, 0x01, 0x72, 0x01, 0x00],  // a byte after seconds
        ]
        for body in bodies {
            #expect(throws: WireError.self) { try FrameDecoder.decode(body: body) }
        }
    }

    /// A server never accepts DROP or SET_TTL from a server, nor a client from a client.
    @Test func onlyClientsSendThem() {
        let frame = encoder.encode(.drop(requestID: 1, room: "r"))
        #expect { try FrameDecoder.decode(frame: frame, accepting: .server) } throws: {
            ($0 as? WireError)?.code == .unknownMessageType
        }
    }

    @Test func leftCodesAreNamed() {
        #expect(ErrorCode.roomDeleted.rawValue == 49)
        #expect(ErrorCode.roomExpired.rawValue == 50)
        #expect(ErrorCode(name: "room_deleted") == .roomDeleted)
        #expect(ErrorCode(name: "room_expired") == .roomExpired)
        #expect(Message.left(room: "r", code: 49, message: "").errorCode == .roomDeleted)
    }
}
