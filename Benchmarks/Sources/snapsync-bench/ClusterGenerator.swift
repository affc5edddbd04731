// The load generator of `snapsync-bench cluster`: W writers spread round-robin over the nodes
// and S subscribers per node, all on one thread of one process, driven by epoll
// (level-triggered) over non-blocking sockets, in the style of FanoutGenerator.
//
// - Writer w is connected to node w mod N and writes room w mod R: a MUTATE update_items(reload)
//   of the room's one item, copied from a template (BenchFrames.identifiedOverwriteTemplate)
//   with its request id (9-byte varint: base + sequence), write id (writer, sequence) and
//   payload ([send time, CLOCK_MONOTONIC ns][writer][sequence][filler]) patched in place. A
//   writer keeps at most K writes unanswered (`inFlight`): closed loop, the next write goes as
//   soon as an answer comes; with a rate, writes go at their scheduled times while fewer than K
//   are unanswered.
// - Every subscriber is joined to every room, so each write is delivered to every subscriber on
//   every node (or, with `sharedRooms` off, for independent single-node daemons, on its writer's
//   node only). Write→delivery latency is delivery time − the send time in the payload: one
//   machine, one clock.
// - Frames are cut in place with FrameCutter and not decoded: a DIFF is recognised by the bytes
//   before its payload (BenchFrames.diffOpsPrefix, the same for every room); an ACK's request id
//   is read where it lies; only REJECT, ERROR and PING are decoded.
// Per delivery: O(1) (a frame cut, a comparison of 7 or 8 bytes, a histogram increment, a few
// counters). Per write: O(payload) to copy the template. Per loop pass: O(ready sockets + W).
#if canImport(Glibc)
    import CEpoll
    import Glibc
    import SnapSyncModel
    import SnapSyncWire

    struct ClusterLoad {
        var writers: Int
        /// Writes a writer may have unanswered (sent, no ACK or REJECT yet).
        var inFlight: Int
        /// Total writes per second over all writers; 0: closed loop.
        var rate: Double
        var rooms: Int
        var subscribersPerNode: Int
        var payloadBytes: Int
        /// Nodes share the rooms (a cluster, or one node): a subscriber gets every writer's
        /// writes. Off: independent daemons, a subscriber gets only its node's writers' writes.
        var sharedRooms: Bool
        var warmupNs: UInt64
        var durationNs: UInt64
        /// How long to wait after the measured window for the last answers and deliveries.
        var drainNs: UInt64 = 10_000_000_000

        var mode: String { rate > 0 ? "open loop" : "closed loop" }
    }

    /// One node's share of a run.
    struct ClusterNodeResult {
        var endpoint: String
        var pid: Int32?
        var writers = 0
        var subscribers = 0
        var ackedMeasured: UInt64 = 0
        var deliveriesMeasured: UInt64 = 0
        /// Write → delivery at this node's subscribers, writes sent in the measured window.
        var latency = FanoutHistogram()
        /// utime + stime of the node's process over the window, in seconds.
        var cpuSeconds: Double?
    }

    struct ClusterRunResult {
        var label: String
        var load: ClusterLoad
        var nodes: [ClusterNodeResult]
        var measuredSeconds: Double = 0
        var sent: UInt64 = 0
        var acked: UInt64 = 0
        var rejected: UInt64 = 0
        /// REJECT codes by name, whole run.
        var rejectCodes: [String: Int] = [:]
        /// Write → ACK, writes sent in the window.
        var ackLatency = FanoutHistogram()
        /// Σ over (subscriber, writer whose writes it should get) of acked − received, after draining.
        var lost: UInt64 = 0
        /// Deliveries whose sequence number was not above the last one from that writer.
        var outOfOrder: UInt64 = 0
        var generatorCPU: Double = 0
        /// utime + stime of the `--also-pid` processes (NATS servers), in seconds, summed.
        var otherCPUSeconds: Double?
        var otherProcesses = 0
        var failure: String?

        var ackedMeasured: UInt64 { nodes.reduce(0) { $0 + $1.ackedMeasured } }
        var deliveriesMeasured: UInt64 { nodes.reduce(0) { $0 + $1.deliveriesMeasured } }
        var latency: FanoutHistogram {
            var all = FanoutHistogram()
            for node in nodes { all.merge(node.latency) }
            return all
        }
        func perSecond(_ count: UInt64) -> Double { measuredSeconds > 0 ? Double(count) / measuredSeconds : 0 }
        /// Node CPU-seconds per delivery, in µs (nil without every node's pid).
        var cpuPerDeliveryUs: Double? {
            let cpus = nodes.compactMap(\.cpuSeconds)
            guard cpus.count == nodes.count, deliveriesMeasured > 0 else { return nil }
            return cpus.reduce(0, +) * 1e6 / Double(deliveriesMeasured)
        }
    }

    /// Connected sockets for one run. Subscribers are node-major: node n's are
    /// n × subscribersPerNode ..< (n + 1) × subscribersPerNode. Writer w is on node w mod N.
    struct ClusterConnections {
        var endpoints: [String]
        var subscribers: [Int32]
        var writers: [Int32]
        var rooms: [String]
    }

    struct ClusterGenerator {
        static let readBufferSize = 1 << 20
        static let carryCapacity = 16 << 10
        static let maxEvents: Int32 = 1024

        let load: ClusterLoad
        let label: String
        let endpoints: [String]
        let nodePIDs: [Int32?]
        let otherPIDs: [Int32]
        let nodeCount: Int
        let subscriberCount: Int
        let writerCount: Int
        let firstWriter: Int  // token of writer 0
        let ringMask: Int  // send times per writer, indexed by sequence

        // One slot per connection (subscribers, then writers).
        let fds: UnsafeMutablePointer<Int32>
        let nodeOf: UnsafeMutablePointer<Int>
        let carry: UnsafeMutablePointer<UInt8>  // connection i's partial frame at i * carryCapacity
        let carryLength: UnsafeMutablePointer<Int>
        let closed: UnsafeMutablePointer<Bool>
        // Subscriber s, writer w at s * W + w.
        let received: UnsafeMutablePointer<UInt64>
        let nextSequence: UnsafeMutablePointer<UInt64>
        // Per node.
        let ackedWindow: UnsafeMutablePointer<UInt64>
        let deliveriesWindow: UnsafeMutablePointer<UInt64>
        let latencyBuckets: UnsafeMutablePointer<UInt64>  // node n's FanoutHistogram at n * bucketCount
        let latencyMax: UnsafeMutablePointer<UInt64>
        // Per writer.
        let sent: UnsafeMutablePointer<UInt64>
        let answered: UnsafeMutablePointer<UInt64>
        let acked: UnsafeMutablePointer<UInt64>
        let sendTimes: UnsafeMutablePointer<UInt64>  // writer w's at w * (ringMask + 1)
        let nextDue: UnsafeMutablePointer<UInt64>
        let out: UnsafeMutablePointer<UInt8>  // writer w's pending bytes at w * outCapacity
        let outStart: UnsafeMutablePointer<Int>
        let outEnd: UnsafeMutablePointer<Int>
        let wantsWritable: UnsafeMutablePointer<Bool>
        let outCapacity: Int
        /// Writer w's MUTATE, and where its request id, write id and payload are.
        let templates: [[UInt8]]
        let requestIDOffset: Int
        let writeIDOffsets: [Int]

        let readBuffer: UnsafeMutablePointer<UInt8>
        let events: UnsafeMutablePointer<epoll_event>
        let epfd: Int32
        let diffOpsPrefix: UnsafeMutablePointer<UInt8>
        let diffOpsPrefixCount: Int
        let cutter = FrameCutter(maxBodyBytes: ClusterGenerator.carryCapacity - 4)
        let ackLatencyBuckets: UnsafeMutablePointer<UInt64>
        var ackLatencyMax: UInt64 = 0

        var deliveriesAll: UInt64 = 0
        var ackedAll: UInt64 = 0
        var rejected: UInt64 = 0
        var rejectCodes: [String: Int] = [:]
        var outOfOrder: UInt64 = 0
        var inWindow = false
        var windowStart: UInt64 = .max  // writes stamped from here on are measured
        var failure: String?

        init(label: String, load: ClusterLoad, connections: ClusterConnections, nodePIDs: [Int32?], otherPIDs: [Int32]) {
            self.label = label
            self.load = load
            endpoints = connections.endpoints
            self.nodePIDs = nodePIDs
            self.otherPIDs = otherPIDs
            nodeCount = connections.endpoints.count
            subscriberCount = connections.subscribers.count
            writerCount = connections.writers.count
            firstWriter = subscriberCount
            let slots = subscriberCount + writerCount
            fds = .allocate(capacity: slots)
            nodeOf = .allocate(capacity: slots)
            for (i, fd) in connections.subscribers.enumerated() {
                fds[i] = fd
                nodeOf[i] = i / load.subscribersPerNode
            }
            for (w, fd) in connections.writers.enumerated() {
                fds[subscriberCount + w] = fd
                nodeOf[subscriberCount + w] = w % nodeCount
            }
            carry = .allocate(capacity: slots * ClusterGenerator.carryCapacity)
            carryLength = .allocate(capacity: slots); carryLength.initialize(repeating: 0, count: slots)
            closed = .allocate(capacity: slots); closed.initialize(repeating: false, count: slots)
            let pairs = subscriberCount * writerCount
            received = .allocate(capacity: pairs); received.initialize(repeating: 0, count: pairs)
            nextSequence = .allocate(capacity: pairs); nextSequence.initialize(repeating: 0, count: pairs)
            ackedWindow = .allocate(capacity: nodeCount); ackedWindow.initialize(repeating: 0, count: nodeCount)
            deliveriesWindow = .allocate(capacity: nodeCount); deliveriesWindow.initialize(repeating: 0, count: nodeCount)
            latencyBuckets = .allocate(capacity: nodeCount * FanoutHistogram.bucketCount)
            latencyBuckets.initialize(repeating: 0, count: nodeCount * FanoutHistogram.bucketCount)
            latencyMax = .allocate(capacity: nodeCount); latencyMax.initialize(repeating: 0, count: nodeCount)
            var ring = 1
            while ring < 2 * load.inFlight { ring <<= 1 }
            ringMask = ring - 1
            sent = .allocate(capacity: writerCount); sent.initialize(repeating: 0, count: writerCount)
            answered = .allocate(capacity: writerCount); answered.initialize(repeating: 0, count: writerCount)
            acked = .allocate(capacity: writerCount); acked.initialize(repeating: 0, count: writerCount)
            sendTimes = .allocate(capacity: writerCount * ring); sendTimes.initialize(repeating: 0, count: writerCount * ring)
            nextDue = .allocate(capacity: writerCount); nextDue.initialize(repeating: 0, count: writerCount)

            var templates: [[UInt8]] = []
            var writeIDOffsets: [Int] = []
            var requestIDOffset = 0
            for w in 0..<writerCount {
                let made = BenchFrames.identifiedOverwriteTemplate(
                    room: connections.rooms[w % connections.rooms.count], payloadBytes: load.payloadBytes)
                templates.append(made.frame)
                writeIDOffsets.append(made.writeIDOffset)
                requestIDOffset = made.requestIDOffset
            }
            self.templates = templates
            self.writeIDOffsets = writeIDOffsets
            self.requestIDOffset = requestIDOffset
            outCapacity = (templates.map(\.count).max() ?? 0) * load.inFlight
            out = .allocate(capacity: max(1, writerCount * outCapacity))
            outStart = .allocate(capacity: writerCount); outStart.initialize(repeating: 0, count: writerCount)
            outEnd = .allocate(capacity: writerCount); outEnd.initialize(repeating: 0, count: writerCount)
            wantsWritable = .allocate(capacity: writerCount); wantsWritable.initialize(repeating: false, count: writerCount)

            readBuffer = .allocate(capacity: ClusterGenerator.readBufferSize)
            events = .allocate(capacity: Int(ClusterGenerator.maxEvents))
            let opsPrefix = BenchFrames.diffOpsPrefix(room: connections.rooms[0], payloadBytes: load.payloadBytes)
            diffOpsPrefix = .allocate(capacity: opsPrefix.count)
            diffOpsPrefix.initialize(from: opsPrefix, count: opsPrefix.count)
            diffOpsPrefixCount = opsPrefix.count
            ackLatencyBuckets = .allocate(capacity: FanoutHistogram.bucketCount)
            ackLatencyBuckets.initialize(repeating: 0, count: FanoutHistogram.bucketCount)

            epfd = epoll_create1(0)
            if epfd < 0 { BenchSystem.fail("epoll_create1") }
            for i in 0..<slots {
                BenchSystem.setNonBlocking(fds[i])
                BenchSystem.epollSet(epfd, EPOLL_CTL_ADD, fds[i], events: EPOLLIN.rawValue, token: UInt64(i))
            }
        }

        /// Closes every socket and frees the buffers.
        func tearDown() {
            for i in 0..<(subscriberCount + writerCount) { close(fds[i]) }
            close(epfd)
            fds.deallocate(); nodeOf.deallocate(); carry.deallocate(); carryLength.deallocate(); closed.deallocate()
            received.deallocate(); nextSequence.deallocate(); ackedWindow.deallocate(); deliveriesWindow.deallocate()
            latencyBuckets.deallocate(); latencyMax.deallocate(); sent.deallocate(); answered.deallocate(); acked.deallocate()
            sendTimes.deallocate(); nextDue.deallocate(); out.deallocate(); outStart.deallocate(); outEnd.deallocate()
            wantsWritable.deallocate(); readBuffer.deallocate(); events.deallocate(); diffOpsPrefix.deallocate()
            ackLatencyBuckets.deallocate()
        }

        /// Whether subscriber `s` gets writer `w`'s writes.
        @inline(__always)
        func sees(subscriber s: Int, writer w: Int) -> Bool {
            load.sharedRooms || nodeOf[s] == w % nodeCount
        }

        mutating func fail(_ message: String) {
            if failure == nil { failure = message }
        }

        // MARK: Writing

        /// Appends writer `w`'s next write, stamped now, to its output. O(payload).
        mutating func sendOne(_ w: Int) {
            let template = templates[w]
            let size = template.count
            let base = out + w * outCapacity
            if outEnd[w] + size > outCapacity {  // compact: at most inFlight frames are ever pending
                memmove(base, base + outStart[w], outEnd[w] - outStart[w])
                outEnd[w] -= outStart[w]
                outStart[w] = 0
            }
            let frame = base + outEnd[w]
            template.withUnsafeBufferPointer { frame.update(from: $0.baseAddress!, count: size) }
            let sequence = sent[w]
            let now = BenchSystem.nowNs()
            BenchFrames.patchRequestID(frame + requestIDOffset, sequence: sequence)
            let writeID = UnsafeMutableRawPointer(frame + writeIDOffsets[w])
            writeID.storeBytes(of: UInt64(w).bigEndian, as: UInt64.self)
            writeID.storeBytes(of: sequence.bigEndian, toByteOffset: 8, as: UInt64.self)
            let payload = UnsafeMutableRawPointer(frame + size - load.payloadBytes)
            payload.storeBytes(of: now, as: UInt64.self)
            payload.storeBytes(of: UInt64(w), toByteOffset: 8, as: UInt64.self)
            payload.storeBytes(of: sequence, toByteOffset: 16, as: UInt64.self)
            sendTimes[w * (ringMask + 1) + Int(truncatingIfNeeded: sequence) & ringMask] = now
            outEnd[w] += size
            sent[w] = sequence + 1
        }

        /// Writes what writer `w` has pending; asks for EPOLLOUT only while something is left.
        mutating func flushWriter(_ w: Int) {
            let token = firstWriter + w
            let base = out + w * outCapacity
            while outEnd[w] > outStart[w] {
                let n = write(fds[token], base + outStart[w], outEnd[w] - outStart[w])
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == EAGAIN { break }
                    fail("writer \(w) write: \(String(cString: strerror(errno)))")
                    outStart[w] = outEnd[w]
                    break
                }
                outStart[w] += n
            }
            if outStart[w] == outEnd[w] { outStart[w] = 0; outEnd[w] = 0 }
            let want = outEnd[w] > outStart[w]
            if want != wantsWritable[w] {
                BenchSystem.epollSet(epfd, EPOLL_CTL_MOD, fds[token], events: EPOLLIN.rawValue | (want ? EPOLLOUT.rawValue : 0), token: UInt64(token))
                wantsWritable[w] = want
            }
        }

        // MARK: Receiving

        @inline(__always)
        mutating func deliver(subscriber s: Int, payload raw: UnsafeRawPointer, now: UInt64) {
            let stamp = raw.loadUnaligned(as: UInt64.self)
            let writer = Int(truncatingIfNeeded: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            let sequence = raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self)
            guard writer >= 0 && writer < writerCount else {
                fail("a DIFF from writer \(writer), not one of this run's")
                return
            }
            let pair = s * writerCount + writer
            received[pair] &+= 1
            if sequence < nextSequence[pair] { outOfOrder &+= 1 }  // a gap is a rejected write; the final count finds losses
            nextSequence[pair] = sequence &+ 1
            deliveriesAll &+= 1
            let node = nodeOf[s]
            if inWindow { deliveriesWindow[node] &+= 1 }
            if stamp >= windowStart {
                let latency = now &- stamp
                latencyBuckets[node * FanoutHistogram.bucketCount + FanoutHistogram.index(latency)] &+= 1
                if latency > latencyMax[node] { latencyMax[node] = latency }
            }
        }

        /// Writer `w`'s answer to request `requestID`, an ACK or not.
        @inline(__always)
        mutating func answer(writer w: Int, requestID: UInt64, ack: Bool, now: UInt64) {
            answered[w] &+= 1
            guard ack else { return }
            acked[w] &+= 1
            ackedAll &+= 1
            if inWindow { ackedWindow[nodeOf[firstWriter + w]] &+= 1 }
            let sequence = requestID &- BenchFrames.identifiedRequestBase
            let sentAt = sendTimes[w * (ringMask + 1) + Int(truncatingIfNeeded: sequence) & ringMask]
            if sentAt >= windowStart {
                let latency = now &- sentAt
                ackLatencyBuckets[FanoutHistogram.index(latency)] &+= 1
                if latency > ackLatencyMax { ackLatencyMax = latency }
            }
        }

        /// Cuts frames in `p[0..<n]` for connection `token`; returns the bytes consumed (whole frames only).
        mutating func scan(token: Int, _ p: UnsafeMutablePointer<UInt8>, _ n: Int, now: UInt64) -> Int {
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
                case MessageType.diff.rawValue where token < firstWriter:
                    let payloadStart = frame.count - load.payloadBytes
                    let prefixStart = payloadStart - diffOpsPrefixCount
                    guard prefixStart > 5, memcmp(frame.baseAddress! + prefixStart, diffOpsPrefix, diffOpsPrefixCount) == 0 else {
                        fail("a DIFF that is not the benchmark's update_items")
                        continue
                    }
                    deliver(subscriber: token, payload: frame.baseAddress! + payloadStart, now: now)
                case MessageType.ack.rawValue where token >= firstWriter && frame.count >= 14:
                    // The request id, a 9-byte varint, right after the type.
                    var requestID: UInt64 = 0
                    for i in 0..<9 { requestID |= UInt64(frame[5 + i] & 0x7F) << UInt64(7 * i) }
                    answer(writer: token - firstWriter, requestID: requestID, ack: true, now: now)
                case MessageType.pong.rawValue:
                    break
                default:
                    let message = try? FrameDecoder.decode(frame: frame, limits: BenchFrameReader.limits, accepting: .server)
                    switch message {
                    case .ping(let nonce):
                        BenchSystem.writeAll(fds[token], BenchFrames.encoder.encode(.pong(nonce: nonce)))
                    case .reject(let requestID, let code, _, _, _) where token >= firstWriter:
                        rejected &+= 1
                        rejectCodes[ErrorCode(rawValue: code)?.name ?? "code \(code)", default: 0] += 1
                        answer(writer: token - firstWriter, requestID: requestID, ack: false, now: now)
                    default:
                        let who = token >= firstWriter ? "writer \(token - firstWriter)" : "a subscriber"
                        fail(
                            "\(endpoints[nodeOf[token]]): "
                                + (message.flatMap(BenchFrames.describeFailure).map { "server sent \($0) to \(who)" }
                                    ?? "unexpected frame type \(frame[4]) on \(who)"))
                    }
                }
            }
            return offset
        }

        /// One read from connection `token` (after its carried partial frame), then a scan.
        mutating func readConnection(_ token: Int) {
            if closed[token] { return }
            let carried = carryLength[token]
            let carrySlot = carry + token * ClusterGenerator.carryCapacity
            if carried > 0 { readBuffer.update(from: carrySlot, count: carried) }
            let n = read(fds[token], readBuffer + carried, ClusterGenerator.readBufferSize - carried)
            if n <= 0 {
                if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
                closed[token] = true
                BenchSystem.epollSet(epfd, EPOLL_CTL_DEL, fds[token], events: 0, token: 0)
                let who = token >= firstWriter ? "writer \(token - firstWriter)'s" : "a subscriber's"
                fail("\(endpoints[nodeOf[token]]) closed \(who) connection")
                return
            }
            let total = carried + n
            let used = scan(token: token, readBuffer, total, now: BenchSystem.nowNs())
            let left = total - used
            if left > ClusterGenerator.carryCapacity {
                fail("a frame larger than \(ClusterGenerator.carryCapacity) bytes")
                carryLength[token] = 0
                return
            }
            if left > 0 { carrySlot.update(from: readBuffer + used, count: left) }
            carryLength[token] = left
        }

        // MARK: The run

        /// Deliveries owed for the writes acknowledged so far: Σ over writers of acked × the
        /// subscribers that see it. O(W).
        func expectedDeliveries() -> UInt64 {
            let perNode = UInt64(load.subscribersPerNode)
            var total: UInt64 = 0
            for w in 0..<writerCount {
                total &+= acked[w] &* (load.sharedRooms ? UInt64(subscriberCount) : perNode)
            }
            return total
        }

        func ticks(_ pids: [Int32?]) -> [UInt64?] { pids.map { $0.flatMap { BenchSystem.cpuTicks(pid: $0) } } }

        mutating func run() -> ClusterRunResult {
            let start = BenchSystem.nowNs()
            let warmEnds = start + load.warmupNs
            let measureEnds = warmEnds + load.durationNs
            // Open loop: writer w's writes are `interval` apart, staggered by w × interval / W.
            let interval: UInt64 = load.rate > 0 ? UInt64(1e9 * Double(writerCount) / load.rate) : 0
            for w in 0..<writerCount { nextDue[w] = start + interval * UInt64(w) / UInt64(max(1, writerCount)) }
            var windowBegan: UInt64 = 0, windowStop: UInt64 = 0, drainDeadline: UInt64 = 0
            var nodeTicks0: [UInt64?] = [], nodeTicks1: [UInt64?] = []
            var otherTicks0: [UInt64?] = [], otherTicks1: [UInt64?] = []
            var selfTicks0: UInt64 = 0, selfTicks1: UInt64 = 0
            var lastProgress = start, lastCount: UInt64 = 0
            let me = getpid()

            while true {
                var now = BenchSystem.nowNs()
                if windowBegan == 0 && now >= warmEnds {
                    windowBegan = now
                    windowStart = now
                    inWindow = true
                    selfTicks0 = BenchSystem.cpuTicks(pid: me) ?? 0
                    nodeTicks0 = ticks(nodePIDs)
                    otherTicks0 = ticks(otherPIDs)
                }
                if windowBegan != 0 && windowStop == 0 && (now >= measureEnds || failure != nil) {
                    windowStop = now
                    inWindow = false
                    selfTicks1 = BenchSystem.cpuTicks(pid: me) ?? 0
                    nodeTicks1 = ticks(nodePIDs)
                    otherTicks1 = ticks(otherPIDs)
                    drainDeadline = now + load.drainNs
                }
                var sentAll: UInt64 = 0, answeredAll: UInt64 = 0
                for w in 0..<writerCount {
                    sentAll &+= sent[w]
                    answeredAll &+= answered[w]
                }
                if windowStop != 0 {
                    if (answeredAll == sentAll && deliveriesAll >= expectedDeliveries()) || now >= drainDeadline || failure != nil { break }
                } else if failure == nil {
                    for w in 0..<writerCount where !closed[firstWriter + w] {
                        var added = false
                        while sent[w] &- answered[w] < UInt64(load.inFlight) && (interval == 0 || nextDue[w] <= now) {
                            sendOne(w)
                            added = true
                            if interval > 0 { nextDue[w] &+= interval }
                        }
                        if added { flushWriter(w) }
                    }
                }

                // Stall detection: no answer and no delivery for 10 s while writes are unanswered.
                let progress = deliveriesAll &+ answeredAll
                if progress != lastCount {
                    lastCount = progress
                    lastProgress = now
                } else if sentAll > answeredAll && now - lastProgress > 10_000_000_000 {
                    fail("no answer and no delivery for 10 s with \(sentAll - answeredAll) writes unanswered")
                    if windowBegan == 0 { windowBegan = now; windowStart = now; nodeTicks0 = ticks(nodePIDs); otherTicks0 = ticks(otherPIDs) }
                    if windowStop == 0 { windowStop = now; nodeTicks1 = ticks(nodePIDs); otherTicks1 = ticks(otherPIDs) }
                    break
                }

                var timeout: UInt64 = 10_000_000  // so the window edges are noticed within 10 ms
                if interval > 0 && windowStop == 0 {
                    now = BenchSystem.nowNs()
                    for w in 0..<writerCount where sent[w] &- answered[w] < UInt64(load.inFlight) {
                        timeout = min(timeout, nextDue[w] > now ? nextDue[w] - now : 0)
                    }
                }
                let ready = BenchSystem.epollWaitNs(epfd, events, ClusterGenerator.maxEvents, timeoutNs: timeout)
                if ready < 0 {
                    if errno == EINTR { continue }
                    BenchSystem.fail("epoll_wait")
                }
                for e in 0..<Int(ready) {
                    let flags = events[e].events
                    let token = Int(truncatingIfNeeded: events[e].data.u64)
                    if token >= firstWriter && flags & EPOLLOUT.rawValue != 0 { flushWriter(token - firstWriter) }
                    if flags & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { readConnection(token) }
                }
            }

            var result = ClusterRunResult(label: label, load: load, nodes: [])
            let seconds = Double(windowStop - windowBegan) / 1e9
            result.measuredSeconds = seconds
            let hz = BenchSystem.ticksPerSecond
            for n in 0..<nodeCount {
                var node = ClusterNodeResult(endpoint: endpoints[n], pid: nodePIDs[n])
                node.writers = (0..<writerCount).filter { $0 % nodeCount == n }.count
                node.subscribers = load.subscribersPerNode
                node.ackedMeasured = ackedWindow[n]
                node.deliveriesMeasured = deliveriesWindow[n]
                node.latency = FanoutHistogram(buckets: latencyBuckets + n * FanoutHistogram.bucketCount, maxValue: latencyMax[n])
                if n < nodeTicks0.count, n < nodeTicks1.count, let a = nodeTicks0[n], let b = nodeTicks1[n] {
                    node.cpuSeconds = Double(b - a) / hz
                }
                result.nodes.append(node)
            }
            for w in 0..<writerCount {
                result.sent += sent[w]
                result.acked += acked[w]
            }
            result.rejected = rejected
            result.rejectCodes = rejectCodes
            result.ackLatency = FanoutHistogram(buckets: ackLatencyBuckets, maxValue: ackLatencyMax)
            var lost: UInt64 = 0
            for s in 0..<subscriberCount {
                for w in 0..<writerCount where sees(subscriber: s, writer: w) {
                    let got = received[s * writerCount + w]
                    if got < acked[w] { lost += acked[w] - got }
                }
            }
            result.lost = lost
            result.outOfOrder = outOfOrder
            if seconds > 0 { result.generatorCPU = Double(selfTicks1 - selfTicks0) / hz / seconds }
            if !otherPIDs.isEmpty {
                let pairs = zip(otherTicks0, otherTicks1).compactMap { a, b in a.flatMap { x in b.map { $0 - x } } }
                result.otherProcesses = pairs.count
                if !pairs.isEmpty { result.otherCPUSeconds = Double(pairs.reduce(0, +)) / hz }
            }
            var sentAll: UInt64 = 0, answeredAll: UInt64 = 0
            for w in 0..<writerCount {
                sentAll += sent[w]
                answeredAll += answered[w]
            }
            if answeredAll < sentAll && failure == nil {
                result.failure = "only \(answeredAll) of \(sentAll) writes answered within \(load.drainNs / 1_000_000_000) s"
            }
            if let failure { result.failure = failure }
            return result
        }
    }
#endif
