// Reads SnapSync frames from a blocking socket (TLS or not: BenchTLS.read) during setup (the measured loops cut their own
// read buffers with the same FrameCutter). Frames are cut, not decoded: a JOIN's SNAPSHOT of a
// big room is only skipped, and only the frames setup looks into (WELCOME, failures, STATS_REPLY)
// are decoded, with FrameDecoder.decode(frame:).
#if canImport(Glibc)
    import Glibc
    import SnapSyncModel
    import SnapSyncWire

    struct BenchFrameReader {
        /// What the bench accepts from the server: its limits are checked by the daemon's tests,
        /// not here, and a SNAPSHOT of a room filled for `recovery` or `memory` may be large.
        static let limits = WireLimits(maxFrameBytes: Int(Int32.max), model: .unlimited)

        let fd: Int32
        private var buffer: [UInt8] = []
        private var start = 0
        private let cutter = FrameCutter(limits: BenchFrameReader.limits)

        init(fd: Int32) { self.fd = fd }

        /// The next frame (length prefix included) other than PING, which it answers. Exits on
        /// EOF or a length prefix the cutter refuses.
        mutating func nextFrame(context: String) -> [UInt8] {
            while true {
                let cut: [UInt8]?
                do {
                    cut = try buffer.withUnsafeBytes { raw in try cutter.nextFrame(in: raw[start...]).map { Array($0) } }
                } catch {
                    BenchSystem.die("the server sent a frame the cutter refuses during \(context): \(error)")
                }
                if let frame = cut {
                    start += frame.count
                    if start == buffer.count {
                        buffer.removeAll(keepingCapacity: true)
                        start = 0
                    }
                    if frame[4] == MessageType.ping.rawValue, case .ping(let nonce) = decode(frame, context: context) {
                        BenchSystem.writeAll(fd, BenchFrames.encoder.encode(.pong(nonce: nonce)))
                        continue
                    }
                    return frame
                }
                if start > 0 {
                    buffer.removeFirst(start)
                    start = 0
                }
                var chunk = [UInt8](repeating: 0, count: 65536)
                let n = chunk.withUnsafeMutableBytes { BenchTLS.read(fd, $0.baseAddress!, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n < 0 && errno == EAGAIN {
                    var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    _ = poll(&p, 1, 1000)
                    continue
                }
                if n <= 0 { BenchSystem.die("the server closed the connection during \(context)") }
                buffer.append(contentsOf: chunk[0..<n])
            }
        }

        /// The next message other than PING, decoded.
        mutating func next(context: String) -> Message {
            decode(nextFrame(context: context), context: context)
        }

        /// Reads frames until one of `type`, skipping others (a DIFF from an earlier step, say);
        /// exits with the server's message on ERROR or REJECT. Returns the frame undecoded.
        @discardableResult
        mutating func expect(_ type: MessageType, context: String) -> [UInt8] {
            while true {
                let frame = nextFrame(context: context)
                if frame[4] == type.rawValue { return frame }
                if frame[4] == MessageType.error.rawValue || frame[4] == MessageType.reject.rawValue {
                    let failure = BenchFrames.describeFailure(decode(frame, context: context)) ?? "type \(frame[4])"
                    BenchSystem.die("\(context): the server answered \(failure)")
                }
            }
        }

        /// Sends `frames` (MUTATEs), at most `window` unanswered at a time, and reads an ACK
        /// for each; exits on a REJECT or ERROR.
        mutating func pipeline(_ frames: [[UInt8]], window: Int) {
            var sent = 0, acked = 0
            while acked < frames.count {
                var batch: [UInt8] = []
                while sent < frames.count && sent - acked < window {
                    batch += frames[sent]
                    sent += 1
                }
                if !batch.isEmpty { BenchSystem.writeAll(fd, batch) }
                expect(.ack, context: "MUTATE \(acked + 1) of \(frames.count)")
                acked += 1
            }
        }

        /// The server's limits from its WELCOME.
        mutating func expectWelcome(context: String) -> WireLimits {
            guard case .welcome(_, _, _, let limits) = decode(expect(.welcome, context: context), context: context) else {
                BenchSystem.die("\(context): no WELCOME")
            }
            return WireLimits(welcome: limits)
        }

        func decode(_ frame: [UInt8], context: String) -> Message {
            do {
                return try FrameDecoder.decode(frame: frame, limits: Self.limits, accepting: .server)
            } catch {
                BenchSystem.die("\(context): the server sent a frame that does not decode: \(error)")
            }
        }
    }
#endif
