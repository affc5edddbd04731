// The fan-out load generator: one publisher and N subscribers in one room, all on one thread of
// one process, driven by epoll (level-triggered) over non-blocking sockets.
//
// Leanness, so that it measures the server and not itself:
// - one 1 MiB read buffer shared by every socket; each readable socket gets one large read per
//   loop pass, and a partial frame at the end is carried in a small per-connection buffer;
// - frames are cut in place with Wire's FrameCutter and not decoded: the benchmark's DIFF ends
//   with its one item's payload, so a DIFF is recognised by comparing the few bytes before the
//   payload with the ones FrameEncoder makes for it (BenchFrames.diffOpsPrefix); a Redis
//   "message" is matched against its known prefix, a ceiling frame (4-byte big-endian length,
//   then the payload: snapsync-ceiling's protocol) by its length; the payload's send stamp and
//   sequence number are read straight from the buffer;
// - the publisher copies a pre-encoded frame (BenchFrames.overwriteTemplate, or the RESP
//   PUBLISH) into one output buffer, patches the stamp and sequence into its payload, and writes
//   everything pending with one write() per loop pass;
// - all state is in a struct driven by mutating methods, so Swift checks exclusivity statically.
// Per delivery: O(1) (a frame cut, a comparison of 7 or 8 bytes, a histogram increment and two counters).
// Per loop pass: O(ready sockets).
#if canImport(Glibc)
    import CEpoll
    import Glibc
    import SnapSyncModel
    import SnapSyncWire

    enum FanoutTarget: String, CaseIterable {
        case snapsync
        case redis
        /// snapsync-ceiling: the broadcaster that does nothing else, the limit for the design.
        case ceiling

        /// Whether the server answers each publish (SnapSync's ACK, Redis's ":N"): the ceiling
        /// does not, so a run is drained when every delivery is in.
        var answersPublishes: Bool { self != .ceiling }
    }

    struct FanoutLoad {
        var subscribers: Int
        var payloadBytes: Int
        /// > 0: closed loop, keep this many messages in flight (published, not yet delivered to all).
        var window: Int
        /// > 0: open loop, publish at this rate (messages per second) whatever the deliveries.
        var rate: Double
        var warmupNs: UInt64
        var durationNs: UInt64
        /// How long to wait after the measured window for the last deliveries before counting losses.
        var drainNs: UInt64 = 5_000_000_000
        /// The CPU the server is pinned to, if it is: its /proc/stat busy time is reported too.
        var serverCore: Int? = nil
        /// The subscribers' protocol version: from 3 on, each DIFF ends with the room's chain
        /// (the server makes one chained copy of each DIFF for such members).
        var protocolVersion: UInt64 = ProtocolVersion.unchained

        var mode: String { window > 0 ? "throughput" : "latency" }
    }

    struct FanoutRunResult {
        var target: FanoutTarget
        var load: FanoutLoad
        var measuredSeconds: Double = 0
        var published: UInt64 = 0  // whole run, warm-up included
        var publishedMeasured: UInt64 = 0  // inside the measured window
        var deliveriesMeasured: UInt64 = 0  // deliveries that arrived inside the measured window
        var lost: UInt64 = 0  // Σ over subscribers of (published - received) after draining
        var outOfOrder: UInt64 = 0  // deliveries whose sequence number was not the next one expected
        var latency = FanoutHistogram()  // publish → delivery, messages published in the window
        /// Publish → delivery to the last subscriber, once per message published in the window:
        /// how long a broadcast takes to complete (a room's slowest member).
        var broadcast = FanoutHistogram()
        var serverCPU: Double?  // fraction of one core, utime+stime over the window
        /// snapsyncd's own STATS after the run: the p99 and longest of its flush passes over the
        /// last 10–20 s, in µs. A broadcast's pass runs from its DIFF's queueing to the last
        /// member's send, so these time the daemon's part of a broadcast without the
        /// generator's reading, which on a small machine shares the daemon's cores.
        var daemonPassP99: UInt64?
        var daemonPassMax: UInt64?
        var serverCoreBusy: Double?  // the server's CPU, /proc/stat busy (softirq and others included)
        var serverCoreSoftirq: Double?
        var generatorCPU: Double = 0
        var failure: String?
        /// `fanout --tls`: the version and cipher the server negotiated (e.g. "TLSv1.3
        /// TLS_AES_256_GCM_SHA384"); nil over plain TCP.
        var tls: String?
        /// With --repeat: every run's deliveries/s (throughput) or p99 in µs (latency).
        var repeats: [Double] = []
        /// With --repeat: every delivery of every run of this server, case and mode, pooled. Its p99
        /// is steadier than any one run's when the machine's noise moves single runs' tails.
        var pooledLatency: FanoutHistogram?

        var deliveriesPerSecond: Double { measuredSeconds > 0 ? Double(deliveriesMeasured) / measuredSeconds : 0 }
        var publishedPerSecond: Double { measuredSeconds > 0 ? Double(publishedMeasured) / measuredSeconds : 0 }
        /// Deliveries per second of server CPU time: what the server would deliver with a core to
        /// itself, a figure that holds up better than deliveries/s when other work shares the CPU.
        var deliveriesPerServerCPUSecond: Double? {
            guard let cpu = serverCPU, cpu > 0 else { return nil }
            return deliveriesPerSecond / cpu
        }
    }

    /// Connected sockets for one run: subscribers 0..<N, then the publisher.
    struct FanoutConnections {
        var subscribers: [Int32]
        var publisher: Int32
        var room: String
    }

    enum FanoutSetup {
        /// SnapSync: the publisher creates the room's layout (section "s", item "i"), then every
        /// subscriber says HELLO and JOINs and gets its SNAPSHOT. The publisher does not join.
        /// With `tls`, every connection is a TLS client of `BenchTLS` (prepared by the caller).
        static func snapsync(
            host: String, port: Int, room: String, subscribers: Int, payloadBytes: Int, tls: Bool,
            protocolVersion: UInt64 = ProtocolVersion.unchained
        ) -> FanoutConnections {
            let publisher = connect(host: host, port: port, tls: tls)
            var reader = BenchFrameReader(fd: publisher)
            BenchSystem.writeAll(publisher, BenchFrames.hello(clientName: "snapsync-bench publisher"))
            let limits = reader.expectWelcome(context: "the publisher's HELLO")
            if payloadBytes > limits.model.maxPayloadBytes {
                BenchSystem.die("payload \(payloadBytes) B exceeds the server's max_payload_bytes \(limits.model.maxPayloadBytes)")
            }
            let payload = [UInt8](repeating: UInt8(ascii: "x"), count: payloadBytes)
            BenchSystem.writeAll(publisher, BenchFrames.createLayout(requestID: 1, room: room, payload: payload))
            reader.expect(.ack, context: "creating room \(room)")

            var fds: [Int32] = []
            fds.reserveCapacity(subscribers)
            let batch = 64  // pipelined HELLO+JOIN, then collect the answers: 2 round trips per 64
            var index = 0
            while index < subscribers {
                let upper = min(subscribers, index + batch)
                var pending: [Int32] = []
                for _ in index..<upper {
                    let fd = connect(host: host, port: port, tls: tls)
                    BenchSystem.writeAll(fd, BenchFrames.hello(version: protocolVersion) + BenchFrames.join(requestID: 1, room: room))
                    pending.append(fd)
                }
                for fd in pending {
                    var r = BenchFrameReader(fd: fd)
                    r.expect(.welcome, context: "subscriber HELLO")
                    r.expect(.snapshot, context: "subscriber JOIN \(room)")
                    fds.append(fd)
                }
                index = upper
            }
            return FanoutConnections(subscribers: fds, publisher: publisher, room: room)
        }

        /// Redis: every subscriber SUBSCRIBEs to the channel; the publisher PUBLISHes to it.
        static func redis(port: Int, channel: String, subscribers: Int, tls: Bool) -> FanoutConnections {
            var fds: [Int32] = []
            fds.reserveCapacity(subscribers)
            let subscribe = RESP.command([Array("SUBSCRIBE".utf8), Array(channel.utf8)])
            let reply = RESP.subscribeReply(channel: channel)
            var index = 0
            while index < subscribers {
                let upper = min(subscribers, index + 64)
                var pending: [Int32] = []
                for _ in index..<upper {
                    let fd = connect(host: "127.0.0.1", port: port, tls: tls)
                    BenchSystem.writeAll(fd, subscribe)
                    pending.append(fd)
                }
                for fd in pending {
                    RESP.readExactly(fd, reply, context: "SUBSCRIBE")
                    fds.append(fd)
                }
                index = upper
            }
            let publisher = connect(host: "127.0.0.1", port: port, tls: tls)
            return FanoutConnections(subscribers: fds, publisher: publisher, room: channel)
        }

        /// snapsync-ceiling: every connection gets a 0-length frame first; what the publisher
        /// sends, every other connection gets.
        static func ceiling(port: Int, subscribers: Int) -> FanoutConnections {
            var fds: [Int32] = []
            fds.reserveCapacity(subscribers + 1)
            for _ in 0...subscribers {
                let fd = connect(host: "127.0.0.1", port: port, tls: false)
                RESP.readExactly(fd, [0, 0, 0, 0], server: "snapsync-ceiling", context: "its greeting (a 0-length frame)")
                fds.append(fd)
            }
            let publisher = fds.removeLast()
            return FanoutConnections(subscribers: fds, publisher: publisher, room: "ceiling")
        }

        /// A blocking TCP connection, and its TLS handshake with `tls`.
        private static func connect(host: String, port: Int, tls: Bool) -> Int32 {
            let fd = BenchSystem.connectTCP(host: host, port: port)
            if tls { BenchTLS.connect(fd) }
            return fd
        }
    }

    struct FanoutGenerator {
        static let readBufferSize = 1 << 20
        static let carryCapacity = 16 << 10  // the largest frame a run produces is ~1.1 KiB
        static let ringSize = 1 << 22  // per-sequence delivery counters for the closed loop
        static let maxEvents: Int32 = 1024

        let target: FanoutTarget
        let load: FanoutLoad
        let serverPID: Int32?
        let subscriberCount: Int
        let publisherToken: Int

        // One slot per connection (subscribers, then the publisher).
        let fds: UnsafeMutablePointer<Int32>
        /// Each connection's TLS session (`fanout --tls`), nil on plain TCP.
        let sessions: UnsafeMutablePointer<OpaquePointer?>
        let carry: UnsafeMutablePointer<UInt8>  // connection i's partial frame at i * carryCapacity
        let carryLength: UnsafeMutablePointer<Int>
        let received: UnsafeMutablePointer<UInt64>  // per subscriber
        let nextSequence: UnsafeMutablePointer<UInt64>
        let closed: UnsafeMutablePointer<Bool>
        let ring: UnsafeMutablePointer<UInt32>
        let readBuffer: UnsafeMutablePointer<UInt8>
        let events: UnsafeMutablePointer<epoll_event>
        let epfd: Int32

        // The publisher's pending output and its template.
        var out: UnsafeMutablePointer<UInt8>
        var outCapacity: Int
        var outStart = 0
        var outEnd = 0
        var wantsWritable = false
        /// One whole publish (MUTATE or RESP PUBLISH) and where its payload starts in it.
        let publishTemplate: [UInt8]
        let payloadOffset: Int
        /// SnapSync: the bytes just before the payload in every DIFF of the benchmark's write.
        let diffOpsPrefix: UnsafeMutablePointer<UInt8>
        let diffOpsPrefixCount: Int
        /// SnapSync: the bytes after the payload in every DIFF: the room's chain from version 3 on.
        let chainBytes: Int
        /// Cuts SnapSync frames; a frame must fit a connection's carry buffer.
        let cutter = FrameCutter(maxBodyBytes: FanoutGenerator.carryCapacity - 4)
        let messagePrefix: [UInt8]  // Redis: a subscriber's frame before the payload

        // Progress.
        var published: UInt64 = 0
        var completed: UInt64 = 0  // messages delivered to every subscriber
        var acknowledged: UInt64 = 0
        var deliveriesAll: UInt64 = 0
        var deliveriesWindow: UInt64 = 0
        var inWindow = false
        var firstMeasuredSequence: UInt64 = .max
        var endMeasuredSequence: UInt64 = .max
        var closedSubscribers = 0
        var outOfOrder: UInt64 = 0
        /// FanoutHistogram buckets, recorded in place: no array uniqueness check per delivery.
        let latencyBuckets: UnsafeMutablePointer<UInt64>
        var latencyMax: UInt64 = 0
        let completeBuckets: UnsafeMutablePointer<UInt64>
        var completeMax: UInt64 = 0
        var failure: String?

        init(target: FanoutTarget, load: FanoutLoad, connections: FanoutConnections, serverPID: Int32?) {
            self.target = target
            self.load = load
            self.serverPID = serverPID
            subscriberCount = connections.subscribers.count
            publisherToken = subscriberCount
            let slots = subscriberCount + 1
            fds = .allocate(capacity: slots)
            for (i, fd) in connections.subscribers.enumerated() { fds[i] = fd }
            fds[publisherToken] = connections.publisher
            sessions = .allocate(capacity: slots)
            for i in 0..<slots { sessions[i] = BenchTLS.session(fds[i]) }
            carry = .allocate(capacity: slots * FanoutGenerator.carryCapacity)
            carryLength = .allocate(capacity: slots); carryLength.initialize(repeating: 0, count: slots)
            received = .allocate(capacity: slots); received.initialize(repeating: 0, count: slots)
            nextSequence = .allocate(capacity: slots); nextSequence.initialize(repeating: 0, count: slots)
            closed = .allocate(capacity: slots); closed.initialize(repeating: false, count: slots)
            ring = .allocate(capacity: FanoutGenerator.ringSize)
            ring.initialize(repeating: 0, count: FanoutGenerator.ringSize)
            latencyBuckets = .allocate(capacity: FanoutHistogram.bucketCount)
            latencyBuckets.initialize(repeating: 0, count: FanoutHistogram.bucketCount)
            completeBuckets = .allocate(capacity: FanoutHistogram.bucketCount)
            completeBuckets.initialize(repeating: 0, count: FanoutHistogram.bucketCount)
            readBuffer = .allocate(capacity: FanoutGenerator.readBufferSize)
            events = .allocate(capacity: Int(FanoutGenerator.maxEvents))
            outCapacity = 1 << 20
            out = .allocate(capacity: outCapacity)
            switch target {
            case .snapsync:
                publishTemplate = BenchFrames.overwriteTemplate(
                    requestID: 2, room: connections.room, payloadBytes: load.payloadBytes, fill: UInt8(ascii: "x"))
                payloadOffset = publishTemplate.count - load.payloadBytes
            case .redis:
                let prefix = RESP.publishPrefix(channel: connections.room, payloadBytes: load.payloadBytes)
                publishTemplate = prefix + [UInt8](repeating: UInt8(ascii: "x"), count: load.payloadBytes) + [13, 10]
                payloadOffset = prefix.count
            case .ceiling:
                let length = UInt32(load.payloadBytes).bigEndian
                publishTemplate = withUnsafeBytes(of: length) { Array($0) } + [UInt8](repeating: UInt8(ascii: "x"), count: load.payloadBytes)
                payloadOffset = 4
            }
            let opsPrefix = BenchFrames.diffOpsPrefix(room: connections.room, payloadBytes: load.payloadBytes)
            diffOpsPrefix = .allocate(capacity: opsPrefix.count)
            diffOpsPrefix.initialize(from: opsPrefix, count: opsPrefix.count)
            diffOpsPrefixCount = opsPrefix.count
            chainBytes = ProtocolVersion.hasChain(version: load.protocolVersion) ? RoomChain.byteCount : 0
            messagePrefix = RESP.messagePrefix(channel: connections.room, payloadBytes: load.payloadBytes)

            epfd = epoll_create1(0)
            if epfd < 0 { BenchSystem.fail("epoll_create1") }
            for i in 0..<slots {
                BenchSystem.setNonBlocking(fds[i])
                BenchSystem.epollSet(epfd, EPOLL_CTL_ADD, fds[i], events: EPOLLIN.rawValue, token: UInt64(i))
            }
        }

        /// Closes every socket and frees the buffers.
        func tearDown() {
            for i in 0...subscriberCount {
                BenchTLS.forget(fds[i])
                close(fds[i])
            }
            sessions.deallocate()
            close(epfd)
            fds.deallocate(); carry.deallocate(); carryLength.deallocate(); received.deallocate()
            nextSequence.deallocate(); closed.deallocate(); ring.deallocate(); readBuffer.deallocate()
            latencyBuckets.deallocate(); completeBuckets.deallocate(); diffOpsPrefix.deallocate()
            events.deallocate(); out.deallocate()
        }

        // MARK: Publishing

        @inline(__always)
        mutating func reserveOutput(_ bytes: Int) {
            if outEnd + bytes <= outCapacity { return }
            if outStart > 0 {  // compact
                memmove(out, out + outStart, outEnd - outStart)
                outEnd -= outStart
                outStart = 0
            }
            if outEnd + bytes > outCapacity {
                let capacity = max(outCapacity * 2, outEnd + bytes)
                let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
                grown.update(from: out, count: outEnd)
                out.deallocate()
                out = grown
                outCapacity = capacity
            }
        }

        /// Appends one message, stamped now, to the publisher's output. O(payload).
        mutating func publishOne() {
            let size = publishTemplate.count
            reserveOutput(size)
            let frame = out + outEnd
            publishTemplate.withUnsafeBufferPointer { frame.update(from: $0.baseAddress!, count: size) }
            let payload = UnsafeMutableRawPointer(frame + payloadOffset)
            payload.storeBytes(of: BenchSystem.nowNs(), as: UInt64.self)
            payload.storeBytes(of: published, toByteOffset: 8, as: UInt64.self)
            outEnd += size
            published += 1
        }

        /// Writes what the publisher has pending; asks for EPOLLOUT only while something is left.
        mutating func flushPublisher() {
            let fd = fds[publisherToken]
            while outEnd > outStart {
                // Through TLS, a write that returned EAGAIN is retried with the same bytes and
                // perhaps more after them, which OpenSSL allows (the buffer may move: compaction).
                let n =
                    sessions[publisherToken].map { BenchTLS.sslWrite($0, out + outStart, outEnd - outStart) } ?? write(fd, out + outStart, outEnd - outStart)
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN { break }
                    fail("publisher write: \(String(cString: strerror(errno)))")
                    outStart = outEnd
                    break
                }
                outStart += n
            }
            if outStart == outEnd { outStart = 0; outEnd = 0 }
            let want = outEnd > outStart
            if want != wantsWritable {
                BenchSystem.epollSet(
                    epfd, EPOLL_CTL_MOD, fd,
                    events: EPOLLIN.rawValue | (want ? EPOLLOUT.rawValue : 0), token: UInt64(publisherToken))
                wantsWritable = want
            }
        }

        mutating func fail(_ message: String) {
            if failure == nil { failure = message }
        }

        // MARK: Receiving

        @inline(__always)
        mutating func deliver(subscriber: Int, payload raw: UnsafeRawPointer, now: UInt64) {
            let stamp = raw.loadUnaligned(as: UInt64.self)
            let sequence = raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
            received[subscriber] &+= 1
            if sequence != nextSequence[subscriber] { outOfOrder &+= 1 }
            nextSequence[subscriber] = sequence &+ 1
            deliveriesAll &+= 1
            if inWindow { deliveriesWindow &+= 1 }
            if sequence >= firstMeasuredSequence && sequence < endMeasuredSequence {
                let latency = now &- stamp
                latencyBuckets[FanoutHistogram.index(latency)] &+= 1
                if latency > latencyMax { latencyMax = latency }
            }
            let slot = Int(truncatingIfNeeded: sequence) & (FanoutGenerator.ringSize - 1)
            ring[slot] &+= 1
            if ring[slot] == UInt32(subscriberCount) {
                ring[slot] = 0
                completed &+= 1
                // This delivery completes the message's broadcast (every subscriber gets each
                // sequence number once, so the ring counts it whole).
                if sequence >= firstMeasuredSequence && sequence < endMeasuredSequence {
                    let latency = now &- stamp
                    completeBuckets[FanoutHistogram.index(latency)] &+= 1
                    if latency > completeMax { completeMax = latency }
                }
            }
        }

        /// Cuts SnapSync frames in `p[0..<n]` for connection `token`; returns the bytes consumed
        /// (whole frames only). A DIFF is the benchmark's if the bytes before its last
        /// `payloadBytes` (and its chain, `chainBytes`) are `diffOpsPrefix`: O(1) per frame,
        /// nothing decoded.
        mutating func scanSnapSync(token: Int, _ p: UnsafeMutablePointer<UInt8>, _ n: Int, now: UInt64) -> Int {
            let bytes = UnsafeRawBufferPointer(start: p, count: n)
            var offset = 0
            while true {
                let frame: UnsafeRawBufferPointer
                do {
                    guard let cut = try cutter.nextFrame(in: bytes[offset...]) else { break }
                    frame = cut
                } catch {
                    fail("\(error)")
                    return n
                }
                offset += frame.count
                switch frame[4] {
                case MessageType.diff.rawValue where token != publisherToken:
                    let payloadStart = frame.count - load.payloadBytes - chainBytes
                    let prefixStart = payloadStart - diffOpsPrefixCount
                    guard prefixStart > 5, memcmp(frame.baseAddress! + prefixStart, diffOpsPrefix, diffOpsPrefixCount) == 0 else {
                        fail("a DIFF that is not the benchmark's update_items")
                        continue
                    }
                    deliver(subscriber: token, payload: frame.baseAddress! + payloadStart, now: now)
                case MessageType.ack.rawValue:
                    acknowledged &+= 1
                case MessageType.pong.rawValue:
                    break
                default:
                    // Rare (a PING) or the end of the run (a failure): decoded.
                    let message = try? FrameDecoder.decode(frame: frame, limits: BenchFrameReader.limits, accepting: .server)
                    if case .ping(let nonce) = message {
                        BenchSystem.writeAll(fds[token], BenchFrames.encoder.encode(.pong(nonce: nonce)))
                    } else {
                        fail(
                            message.flatMap(BenchFrames.describeFailure).map { "server sent \($0)" }
                                ?? "unexpected frame type \(frame[4]) on \(token == publisherToken ? "the publisher" : "a subscriber")")
                    }
                }
            }
            return offset
        }

        /// Scans Redis replies: ":N\r\n" on the publisher, "message" arrays of known shape on subscribers.
        mutating func scanRedis(token: Int, _ p: UnsafeMutablePointer<UInt8>, _ n: Int, now: UInt64) -> Int {
            var offset = 0
            if token == publisherToken {
                while offset < n {
                    guard let newline = memchr(p + offset, 10, n - offset) else { break }
                    let lineEnd = UnsafeMutableRawPointer(newline).assumingMemoryBound(to: UInt8.self) - p + 1
                    if p[offset] == UInt8(ascii: ":") {
                        acknowledged &+= 1
                    } else {
                        fail(
                            "redis answered PUBLISH with "
                                + String(decoding: UnsafeBufferPointer(start: p + offset, count: lineEnd - offset), as: UTF8.self).debugDescription)
                    }
                    offset = lineEnd
                }
                return offset
            }
            let prefixCount = messagePrefix.count
            let frameLength = prefixCount + load.payloadBytes + 2
            return messagePrefix.withUnsafeBufferPointer { prefix in
                while n - offset >= frameLength {
                    if memcmp(p + offset, prefix.baseAddress!, prefixCount) != 0 {
                        fail(
                            "unexpected frame from redis: "
                                + String(decoding: UnsafeBufferPointer(start: p + offset, count: min(40, n - offset)), as: UTF8.self).debugDescription)
                        return n
                    }
                    deliver(subscriber: token, payload: UnsafeRawPointer(p + offset + prefixCount), now: now)
                    offset += frameLength
                }
                return offset
            }
        }

        /// Scans the ceiling's frames (a 4-byte big-endian length, then the payload) on a
        /// subscriber; the publisher gets none.
        mutating func scanCeiling(token: Int, _ p: UnsafeMutablePointer<UInt8>, _ n: Int, now: UInt64) -> Int {
            var offset = 0
            while n - offset >= 4 {
                let length = Int(UInt32(bigEndian: UnsafeRawPointer(p + offset).loadUnaligned(as: UInt32.self)))
                guard n - offset - 4 >= length else { break }
                guard token != publisherToken, length == load.payloadBytes else {
                    fail("the ceiling sent a frame of \(length) bytes to \(token == publisherToken ? "the publisher" : "a subscriber")")
                    return n
                }
                deliver(subscriber: token, payload: UnsafeRawPointer(p + offset + 4), now: now)
                offset += 4 + length
            }
            return offset
        }

        /// One read from connection `token` (after its carried partial frame), then a scan.
        /// Through TLS: records until OpenSSL and the socket have no more (epoll does not see
        /// records OpenSSL already holds), scanned each time the buffer is nearly full.
        mutating func readConnection(_ token: Int) {
            if closed[token] { return }
            if let session = sessions[token] {
                readTLS(token, session)
                return
            }
            let carried = carryLength[token]
            let carrySlot = carry + token * FanoutGenerator.carryCapacity
            if carried > 0 { readBuffer.update(from: carrySlot, count: carried) }
            let n = read(fds[token], readBuffer + carried, FanoutGenerator.readBufferSize - carried)
            if n <= 0 {
                if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
                lost(token)
                return
            }
            scan(token, total: carried + n)
        }

        mutating func readTLS(_ token: Int, _ session: OpaquePointer) {
            let carrySlot = carry + token * FanoutGenerator.carryCapacity
            let record = 16 << 10
            while true {
                var total = carryLength[token]
                if total > 0 { readBuffer.update(from: carrySlot, count: total) }
                var full = false, ended = false
                while true {
                    if FanoutGenerator.readBufferSize - total < record {
                        full = true
                        break
                    }
                    let n = BenchTLS.sslRead(session, readBuffer + total, FanoutGenerator.readBufferSize - total)
                    if n > 0 {
                        total += n
                    } else {
                        ended = !(n < 0 && (errno == EAGAIN || errno == EINTR))
                        break
                    }
                }
                scan(token, total: total)
                if ended { lost(token) }
                if !full || closed[token] { return }
            }
        }

        /// The server closed connection `token`: a failure of the run.
        mutating func lost(_ token: Int) {
            closed[token] = true
            BenchSystem.epollSet(epfd, EPOLL_CTL_DEL, fds[token], events: 0, token: 0)
            if token == publisherToken {
                fail("the server closed the publisher's connection")
            } else {
                closedSubscribers += 1
                fail("the server closed \(closedSubscribers) subscriber connection(s)")
            }
            // Whatever complete frames were carried were already counted.
        }

        /// Scans `readBuffer[0..<total]` (the carried partial frame, then what was read) and
        /// carries the partial frame at its end.
        mutating func scan(_ token: Int, total: Int) {
            let carrySlot = carry + token * FanoutGenerator.carryCapacity
            let now = BenchSystem.nowNs()
            let used: Int
            switch target {
            case .snapsync: used = scanSnapSync(token: token, readBuffer, total, now: now)
            case .redis: used = scanRedis(token: token, readBuffer, total, now: now)
            case .ceiling: used = scanCeiling(token: token, readBuffer, total, now: now)
            }
            let left = total - used
            if left > FanoutGenerator.carryCapacity {
                fail("a frame larger than \(FanoutGenerator.carryCapacity) bytes")
                carryLength[token] = 0
                return
            }
            if left > 0 { carrySlot.update(from: readBuffer + used, count: left) }
            carryLength[token] = left
        }

        // MARK: The run

        mutating func run() -> FanoutRunResult {
            var result = FanoutRunResult(target: target, load: load)
            let start = BenchSystem.nowNs()
            let warmEnds = start + load.warmupNs
            let measureEnds = warmEnds + load.durationNs
            let interval: UInt64 = load.rate > 0 ? UInt64(1e9 / load.rate) : 0
            var nextPublish = start
            var windowStart: UInt64 = 0, windowStop: UInt64 = 0
            var publishedAtWindowStart: UInt64 = 0, publishedAtWindowStop: UInt64 = 0
            var serverTicks0: UInt64 = 0, serverTicks1: UInt64 = 0
            var selfTicks0: UInt64 = 0, selfTicks1: UInt64 = 0
            var core0: (busy: UInt64, softirq: UInt64, total: UInt64)?, core1: (busy: UInt64, softirq: UInt64, total: UInt64)?
            var drainDeadline: UInt64 = 0
            var lastProgress = start, lastDeliveries: UInt64 = 0
            let me = getpid()

            while true {
                var now = BenchSystem.nowNs()
                if windowStart == 0 && now >= warmEnds {
                    windowStart = now
                    inWindow = true
                    publishedAtWindowStart = published
                    firstMeasuredSequence = published
                    selfTicks0 = BenchSystem.cpuTicks(pid: me) ?? 0
                    if let pid = serverPID { serverTicks0 = BenchSystem.cpuTicks(pid: pid) ?? 0 }
                    if let core = load.serverCore { core0 = BenchSystem.cpuJiffies(cpu: core) }
                }
                if windowStart != 0 && windowStop == 0 && (now >= measureEnds || failure != nil) {
                    windowStop = now
                    inWindow = false
                    publishedAtWindowStop = published
                    endMeasuredSequence = published
                    selfTicks1 = BenchSystem.cpuTicks(pid: me) ?? 0
                    if let pid = serverPID { serverTicks1 = BenchSystem.cpuTicks(pid: pid) ?? 0 }
                    if let core = load.serverCore { core1 = BenchSystem.cpuJiffies(cpu: core) }
                    drainDeadline = now + load.drainNs
                }
                if windowStop != 0 {
                    // Drained: every DIFF delivered and every publish answered (ACK, or redis's ":N").
                    let delivered = deliveriesAll >= published &* UInt64(subscriberCount)
                    let answered = acknowledged >= published || !target.answersPublishes
                    if (delivered && answered) || now >= drainDeadline || failure != nil { break }
                } else if failure == nil {
                    if load.rate > 0 {
                        var burst = 0
                        while nextPublish <= now && burst < 100_000 {
                            publishOne()
                            nextPublish += interval
                            burst += 1
                        }
                    } else {
                        while published &- completed < UInt64(load.window) { publishOne() }
                    }
                }
                if outEnd > outStart { flushPublisher() }

                // Stall detection: nothing delivered for 5 s while messages are outstanding.
                if deliveriesAll != lastDeliveries {
                    lastDeliveries = deliveriesAll
                    lastProgress = now
                } else if published &* UInt64(subscriberCount) > deliveriesAll && now - lastProgress > 5_000_000_000 {
                    fail("no delivery for 5 s with \(published &* UInt64(subscriberCount) &- deliveriesAll) outstanding")
                    if windowStart == 0 { windowStart = now; publishedAtWindowStart = published }
                    if windowStop == 0 { windowStop = now; publishedAtWindowStop = published }
                    break
                }

                var timeout: UInt64 = 10_000_000  // so the window edges are noticed within 10 ms
                if load.rate > 0 && windowStop == 0 {
                    now = BenchSystem.nowNs()
                    timeout = nextPublish > now ? min(nextPublish - now, timeout) : 0
                }
                let ready = BenchSystem.epollWaitNs(epfd, events, FanoutGenerator.maxEvents, timeoutNs: timeout)
                if ready < 0 {
                    if errno == EINTR { continue }
                    BenchSystem.fail("epoll_wait")
                }
                for e in 0..<Int(ready) {
                    let flags = events[e].events
                    let token = Int(truncatingIfNeeded: events[e].data.u64)
                    if token == publisherToken && flags & EPOLLOUT.rawValue != 0 { flushPublisher() }
                    if flags & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
                        readConnection(token)
                    }
                }
            }

            let seconds = Double(windowStop - windowStart) / 1e9
            result.measuredSeconds = seconds
            result.published = published
            result.publishedMeasured = publishedAtWindowStop - publishedAtWindowStart
            result.deliveriesMeasured = deliveriesWindow
            var lost: UInt64 = 0
            for s in 0..<subscriberCount where received[s] < published { lost += published - received[s] }
            result.lost = lost
            result.outOfOrder = outOfOrder
            result.latency = FanoutHistogram(buckets: latencyBuckets, maxValue: latencyMax)
            result.broadcast = FanoutHistogram(buckets: completeBuckets, maxValue: completeMax)
            let hz = BenchSystem.ticksPerSecond
            if seconds > 0 {
                result.generatorCPU = Double(selfTicks1 - selfTicks0) / hz / seconds
                if serverPID != nil { result.serverCPU = Double(serverTicks1 - serverTicks0) / hz / seconds }
            }
            if let a = core0, let b = core1, b.total > a.total {
                result.serverCoreBusy = Double(b.busy - a.busy) / Double(b.total - a.total)
                result.serverCoreSoftirq = Double(b.softirq - a.softirq) / Double(b.total - a.total)
            }
            if acknowledged < published && target.answersPublishes && failure == nil {
                result.failure = "only \(acknowledged) of \(published) publishes answered within \(load.drainNs / 1_000_000_000) s"
            }
            if let failure { result.failure = failure }
            return result
        }
    }
#endif
