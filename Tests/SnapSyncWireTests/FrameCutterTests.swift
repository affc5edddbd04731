import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire

/// `FrameCutter` is the one reader of length prefixes: the daemon cuts its read buffer with it
/// and `FrameDecoder` its own buffer. Cut byte by byte, whole, many at once, truncated.
@Suite(.unitTests) struct FrameCutterTests {
    let frames: [[UInt8]] = [
        FrameEncoder().encode(.ping(nonce: 7)),
        FrameEncoder().encode(.join(requestID: 1, room: "room", resume: nil)),
        FrameEncoder().encode(.mutate(requestID: 2, room: "room", expectedVersion: nil, writeID: [], ops: [.appendSections(["s"])])),
    ]

    /// Every frame of `stream`, cut front to back; the offset where an incomplete frame starts.
    private func cutAll(_ stream: [UInt8], _ cutter: FrameCutter) throws -> (frames: [[UInt8]], used: Int) {
        try stream.withUnsafeBytes { bytes in
            var out: [[UInt8]] = []
            var offset = 0
            while let frame = try cutter.nextFrame(in: bytes[offset...]) {
                out.append(Array(frame))
                offset += frame.count
            }
            return (out, offset)
        }
    }

    @Test func cutsManyFramesAtOnceWithoutCopyingThem() throws {
        let stream = frames.flatMap { $0 }
        let (cut, used) = try cutAll(stream, FrameCutter(limits: .default))
        #expect(cut == frames)
        #expect(used == stream.count)
        // A cut frame is a slice of the caller's bytes, not a copy.
        try stream.withUnsafeBytes { bytes in
            let frame = try #require(try FrameCutter(limits: .default).nextFrame(in: bytes))
            #expect(frame.baseAddress == bytes.baseAddress)
        }
    }

    /// Every prefix of the stream: the whole frames in it are cut, the rest is left untouched.
    @Test func cutsOnlyWholeFramesOfEveryPrefix() throws {
        let stream = frames.flatMap { $0 }
        var ends: [Int] = []
        var end = 0
        for frame in frames {
            end += frame.count
            ends.append(end)
        }
        for length in 0...stream.count {
            let (cut, used) = try cutAll(Array(stream[..<length]), FrameCutter(limits: .default))
            let whole = ends.filter { $0 <= length }
            #expect(cut == Array(frames.prefix(whole.count)), "prefix \(length)")
            #expect(used == (whole.last ?? 0), "prefix \(length)")
        }
    }

    /// The length is checked as soon as its four bytes are there, and the error repeats.
    @Test func checksTheLengthBeforeTheBodyArrives() throws {
        let cutter = FrameCutter(maxBodyBytes: 100)
        for _ in 0..<2 {
            #expect { try cutAll([0, 0, 0, 101], cutter) } throws: {
                ($0 as? WireError)?.code == .frameTooLarge && ($0 as? WireError)?.detail == "frame body length 101 exceeds max_frame_bytes 100"
            }
        }
        #expect { try cutAll([0, 0, 0, 0], cutter) } throws: { ($0 as? WireError)?.code == .malformedFrame }
        #expect(try cutAll([0, 0, 0], cutter).used == 0)
        #expect(try cutAll([0, 0, 0, 100] + [UInt8](repeating: 0, count: 99), cutter).used == 0)
        let named = FrameCutter(maxBodyBytes: 10, limitDescription: "the limit before HELLO")
        #expect { try cutAll([0, 0, 1, 0], named) } throws: {
            ($0 as? WireError)?.detail == "frame body length 256 exceeds the limit before HELLO"
        }
    }

    /// `FrameDecoder.decode(frame:)` in place agrees with the array form, truncation included.
    @Test func decodesACutFrameInPlace() throws {
        for frame in frames {
            let inPlace = try frame.withUnsafeBytes { try FrameDecoder.decode(frame: $0) }
            #expect(inPlace == (try FrameDecoder.decode(frame: frame)))
        }
        #expect { try [UInt8](frames[1].dropLast()).withUnsafeBytes { try FrameDecoder.decode(frame: $0) } } throws: {
            ($0 as? WireError)?.code == .malformedFrame
        }
    }
}
