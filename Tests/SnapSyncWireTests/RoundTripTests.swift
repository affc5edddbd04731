import SnapSyncTestSupport
import Testing
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncWire

/// Law: for every message m, decode(encode(m)) == m, and the frame is consumed exactly.
@Suite(.unitTests) struct RoundTripTests {
    @Test(arguments: [1, 2, 3, 0x5EED] as [UInt64], [ProtocolVersion.unchained, ProtocolVersion.current])
    func randomMessagesRoundTrip(seed: UInt64, version: UInt64) throws {
        var factory = MessageFactory(rng: SplitMix64(seed: seed), version: version)
        let encoder = FrameEncoder()
        var stream: [UInt8] = []
        var messages: [Message] = []
        for _ in 0..<500 {
            let message = factory.message()
            let frame = encoder.encode(message)
            let size = encoder.encode(message, into: &stream)
            #expect(size == frame.count)
            let decoded = try FrameDecoder.decode(frame: frame, limits: .init(model: .unlimited), version: version)
            #expect(decoded == message, "seed \(seed): \(message)")
            #expect(JSONForm.message(decoded) == JSONForm.message(message))
            if case .snapshot(_, _, _, _, _, _, let a, _) = message, case .snapshot(_, _, _, _, _, _, let b, _) = decoded {
                #expect(a == b)
                try b.checkInvariants()
            }
            messages.append(message)
        }
        // The same messages as one stream, fed in irregular chunks.
        var decoder = FrameDecoder(limits: .init(model: .unlimited))
        decoder.version = version
        var decoded: [Message] = []
        var offset = 0
        var rng = SplitMix64(seed: seed)
        while offset < stream.count {
            let end = min(stream.count, offset + Int.random(in: 1...300, using: &rng))
            decoder.append(stream[offset..<end])
            offset = end
            while let m = try decoder.nextMessage() { decoded.append(m) }
        }
        #expect(decoded == messages)
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test func diffFastPathMatchesMessageEncoding() {
        var factory = MessageFactory(rng: SplitMix64(seed: 99))
        let encoder = FrameEncoder()
        for _ in 0..<200 {
            let room = factory.text(), epoch = factory.uint(), version = factory.uint(), ops = factory.ops()
            var fast: [UInt8] = [0xAA]  // appends after what is there
            let size = encoder.encodeDiff(room: room, epoch: epoch, version: version, ops: ops, into: &fast)
            let slow = encoder.encode(.diff(room: room, epoch: epoch, version: version, ops: ops))
            #expect(Array(fast.dropFirst()) == slow)
            #expect(size == slow.count)
        }
    }

    /// Every byte sequence is either a message or a typed error, never a crash: random
    /// mutations of valid frames.
    @Test func mutatedFramesNeverCrash() {
        var rng = SplitMix64(seed: 7)
        let valid = Vectors.valid
        var decodedCount = 0, errorCount = 0
        for _ in 0..<5000 {
            let v = valid.randomElement(using: &rng)!
            var bytes = v.bytes
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let i = Int.random(in: 4..<bytes.count, using: &rng)
                bytes[i] = UInt8.random(in: 0...255, using: &rng)
            }
            do {
                let m = try FrameDecoder.decode(frame: bytes, limits: v.limits, version: v.version)
                // Whatever decodes re-encodes to the same bytes: there is one encoding.
                #expect(FrameEncoder().encode(m) == bytes)
                decodedCount += 1
            } catch {
                errorCount += 1
            }
        }
        #expect(decodedCount > 0 && errorCount > 0)
    }
}
