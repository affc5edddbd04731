// `snapsync-bench durability`: acknowledged writes per second through snapsyncd's write-ahead
// log, by fsync policy, next to redis-server with `appendonly yes, appendfsync always` on the
// same disk in the same run (docs/benchmarks.md, "Durability").
//
// A closed loop per client: send one write, wait for its acknowledgement, send the next. Each
// client writes its own room (snapsyncd: MUTATE update_items(reload) of one item; Redis: SET of
// one key), so the daemon gets writes to several rooms in one loop pass and group-commits them
// under one fdatasync, as Redis does with its AOF.
//
// Segment switches: with a small `--log-segment-bytes` the daemon switches log
// segments at every one-second maintenance, so a short run crosses many switches; each
// snapsyncd line then also gives the switches seen, the write→ACK p99.9 and maximum, and the
// daemon's own STATS `loop_pass_p99_us` / `loop_pass_max_us` at the end of the run.
#if canImport(Glibc)
    import Glibc
    import ArgumentParser
    import SnapSyncModel
    import SnapSyncWire

    struct DurabilityBenchmark: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "durability",
            abstract: "Acknowledged writes/s with --fsync always and everysec, and redis-server with appendfsync always.",
            discussion: """
                Starts snapsyncd once per policy, with a fresh data directory under --dir, and \
                redis-server (appendonly yes, appendfsync always, its AOF under --dir too), each on a \
                loopback port. --clients closed-loop writers run for --seconds after a one-second \
                warm-up; one JSON line per server and policy: writes acknowledged per second and the \
                latency of one acknowledged write (p50, p99, p99.9, max). --log-segment-bytes \
                makes segment switches frequent; then the daemon's segment switches and its \
                loop_pass STATS are reported too.
                """)

        @Option(help: "Concurrent writers, each in its own room (snapsyncd) or on its own key (Redis).")
        var clients: Int = 8

        @Option(help: "Measured seconds per case (after a one-second warm-up).")
        var seconds: Double = 5

        @Option(help: "SnapshotPayload bytes per write.")
        var payloadBytes: Int = 100

        @OptionGroup var data: DataDirectoryOption

        @Option(help: "Policies to measure, comma-separated.")
        var policies: String = "always,everysec"

        @Flag(help: "Skip the redis-server comparison.")
        var noRedis = false

        @OptionGroup var server: ServerBinaryOption

        @OptionGroup var redisBinary: RedisBinaryOption

        @Option(help: "snapsyncd's --log-segment-bytes (default: the daemon's, 64 MiB).")
        var logSegmentBytes: Int?

        @Option(
            help:
                "snapsyncd's --history-count (default: the daemon's, 1024). Each checkpoint holds a room's history, so a small value leaves the segment switch itself in the figures."
        )
        var historyCount: Int?

        func validate() throws {
            guard clients >= 1, clients <= 256 else { throw ValidationError("--clients must be 1...256") }
            guard seconds > 0 else { throw ValidationError("--seconds must be positive") }
            guard payloadBytes >= 1, payloadBytes <= 60_000 else { throw ValidationError("--payload-bytes must be 1...60000") }
            for p in policies.split(separator: ",") where !["always", "everysec", "no"].contains(String(p)) {
                throw ValidationError("--policies: \(p) is not always, everysec or no")
            }
        }

        func run() throws {
            let base = data.dir ?? BenchSystem.temporaryBase(default: "/var/tmp")
            let binary = ServerBinaries.daemon(explicit: server.serverBinary)
            for policy in policies.split(separator: ",").map(String.init) {
                var arguments = ["--fsync", policy]
                if let logSegmentBytes { arguments += ["--log-segment-bytes", String(logSegmentBytes)] }
                if let historyCount { arguments += ["--history-count", String(historyCount)] }
                let daemon = ServerProcess.startDaemon(binary: binary, arguments: arguments, cpu: nil, dataBase: base)
                defer { daemon.stop() }
                var result = DurabilityBench.measure(clients: clients, seconds: seconds) { index in
                    SnapSyncWriter(host: daemon.host, port: daemon.port, room: "durable-\(index)", payloadBytes: payloadBytes)
                }
                result.daemon = [
                    ("segment_switches", .int(daemon.log.split(separator: "\n").filter { $0.contains("started log segment") }.count)),
                    ("binary", .string(binary)),
                ]
                let stats = DurabilityBench.stats(host: daemon.host, port: daemon.port)
                for name in ["loop_pass_p99_us", "loop_pass_max_us"] {
                    // null for a daemon that does not report it.
                    result.daemon.append((name, stats[name].map { .int(Int($0)) } ?? .number(.nan)))
                }
                result.print(server: "snapsyncd", fsync: policy, clients: clients, payloadBytes: payloadBytes, dir: base)
            }
            if !noRedis {
                let redis = ServerBinaries.redis(explicit: redisBinary.redisBinary)
                let directory = BenchCleanup.temporaryDirectory(under: base, prefix: "snapsync-bench-redis")
                let server = ServerProcess.startRedis(
                    binary: redis, arguments: ["--dir", directory, "--save", "", "--appendonly", "yes", "--appendfsync", "always"], cpu: nil,
                    temporaryDirectory: directory)
                defer { server.stop() }
                let result = DurabilityBench.measure(clients: clients, seconds: seconds) { index in
                    RedisWriter(port: server.port, key: "durable-\(index)", payloadBytes: payloadBytes)
                }
                result.print(server: "redis-server", fsync: "always", clients: clients, payloadBytes: payloadBytes, dir: base)
            }
        }
    }

    /// One closed-loop writer: `write()` sends one write and returns once it is acknowledged.
    protocol DurabilityWriter {
        mutating func write()
    }

    /// MUTATE update_items(reload) of item "i" in the writer's own room, waiting for its ACK.
    /// The measured loop reuses one frame buffer and one read buffer, as the Redis writer does, so
    /// the two clients cost the same CPU per write (it matters: clients and server share 2 cores).
    struct SnapSyncWriter: DurabilityWriter {
        let fd: Int32
        let room: String
        /// The MUTATE, encoded once; each write changes its payload's first byte.
        var frame: [UInt8]
        let payloadStart: Int
        var writes: UInt8 = 0
        var input = [UInt8](repeating: 0, count: 65536)
        var filled = 0
        let cutter = FrameCutter(maxBodyBytes: 65536 - 4)

        init(host: String, port: Int, room: String, payloadBytes: Int) {
            fd = BenchSystem.connectTCP(host: host, port: port)
            self.room = room
            var reader = BenchFrameReader(fd: fd)
            BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "durability-bench"))
            reader.expect(.welcome, context: "HELLO")
            let payload = [UInt8](repeating: 0x61, count: payloadBytes)
            BenchSystem.writeAll(fd, BenchFrames.createLayout(requestID: 1, room: room, payload: payload))
            reader.expect(.ack, context: "creating room \(room)")
            frame = BenchFrames.overwriteTemplate(requestID: 2, room: room, payloadBytes: payloadBytes, fill: 0x61)
            payloadStart = frame.count - payloadBytes
        }

        mutating func write() {
            writes &+= 1
            frame[payloadStart] = writes
            BenchSystem.writeAll(fd, frame)
            // Read frames until the ACK (nothing else is expected: the writer has not joined).
            while true {
                let length: Int?
                do {
                    length = try input.withUnsafeBytes { try cutter.nextFrame(in: $0[0..<filled])?.count }
                } catch {
                    BenchSystem.die("MUTATE in \(room): \(error)")
                }
                if let length {
                    if input[4] != MessageType.ack.rawValue {
                        let answer = try? FrameDecoder.decode(frame: Array(input[0..<length]), limits: BenchFrameReader.limits, accepting: .server)
                        BenchSystem.die("MUTATE in \(room) answered \(answer.flatMap(BenchFrames.describeFailure) ?? "type \(input[4])")")
                    }
                    input.withUnsafeMutableBytes { raw in
                        raw.baseAddress!.copyMemory(from: raw.baseAddress! + length, byteCount: filled - length)
                    }
                    filled -= length
                    return
                }
                let got = input.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
                if got < 0 && errno == EINTR { continue }
                if got <= 0 { BenchSystem.fail("snapsyncd closed the connection") }
                filled += got
            }
        }
    }

    /// SET key payload over RESP, waiting for "+OK".
    struct RedisWriter: DurabilityWriter {
        let fd: Int32
        let key: [UInt8]
        var payload: [UInt8]
        var buffer = [UInt8](repeating: 0, count: 4096)
        var counter: UInt64 = 0

        init(port: Int, key: String, payloadBytes: Int) {
            fd = BenchSystem.connectTCP(host: "127.0.0.1", port: port)
            self.key = Array(key.utf8)
            payload = [UInt8](repeating: 0x61, count: payloadBytes)
        }

        mutating func write() {
            counter += 1
            payload[0] = UInt8(truncatingIfNeeded: counter)
            BenchSystem.writeAll(fd, RESP.command([Array("SET".utf8), key, payload]))
            // "+OK\r\n": read until the line ends (it may come in pieces).
            var got: [UInt8] = []
            while got.last != 0x0A {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { BenchSystem.fail("redis-server closed the connection") }
                got += buffer[0..<n]
            }
            if got.first != 0x2B { BenchSystem.fail("redis-server answered \(String(decoding: got, as: UTF8.self))") }
        }
    }

    enum DurabilityBench {
        struct Result {
            var writes: Int
            var seconds: Double
            var latenciesNs: [UInt64]
            /// Extra fields about the daemon (segment switches, its STATS).
            var daemon: [(String, JSONValue)] = []

            func print(server: String, fsync: String, clients: Int, payloadBytes: Int, dir: String) {
                let sorted = latenciesNs.sorted()
                func ms(_ q: Double) -> JSONValue {
                    guard !sorted.isEmpty else { return .number(.nan) }
                    return .number(Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]) / 1e6, digits: 3)
                }
                let fields: [(String, JSONValue)] =
                    [
                        ("benchmark", "durability"), ("server", .string(server)), ("fsync", .string(fsync)),
                        ("clients", .int(clients)), ("payload_bytes", .int(payloadBytes)), ("dir", .string(dir)),
                        ("seconds", .number(seconds, digits: 2)), ("acked_writes", .int(writes)),
                        ("acked_writes_per_s", .number(Double(writes) / seconds, digits: 0)),
                        ("latency_p50_ms", ms(0.5)), ("latency_p99_ms", ms(0.99)), ("latency_p999_ms", ms(0.999)),
                        ("latency_max_ms", ms(1.0)),
                    ] + daemon
                Bench.printJSON(fields)
            }
        }

        /// Box for one writer thread's closure and results.
        final class Worker {
            let make: (Int) -> any DurabilityWriter
            let index: Int
            let start: UInt64, warmupEnd: UInt64, end: UInt64
            var writes = 0
            var latencies: [UInt64] = []

            init(index: Int, start: UInt64, warmupEnd: UInt64, end: UInt64, make: @escaping (Int) -> any DurabilityWriter) {
                self.index = index
                self.start = start
                self.warmupEnd = warmupEnd
                self.end = end
                self.make = make
            }

            func run() {
                var writer = make(index)
                while BenchSystem.nowNs() < start { BenchSystem.sleepMs(1) }
                while true {
                    let t0 = BenchSystem.nowNs()
                    if t0 >= end { break }
                    writer.write()
                    let t1 = BenchSystem.nowNs()
                    if t0 >= warmupEnd {
                        writes += 1
                        latencies.append(t1 - t0)
                    }
                }
            }
        }

        /// Runs `clients` writers on their own threads: connect, wait for a common start, one
        /// second of warm-up, then `seconds` measured.
        static func measure(clients: Int, seconds: Double, make: @escaping (Int) -> any DurabilityWriter) -> Result {
            let start = BenchSystem.nowNs() + 500_000_000
            let warmupEnd = start + 1_000_000_000
            let end = warmupEnd + UInt64(seconds * 1e9)
            let workers = (0..<clients).map { Worker(index: $0, start: start, warmupEnd: warmupEnd, end: end, make: make) }
            var threads: [pthread_t] = []
            for worker in workers {
                var thread = pthread_t()
                let context = Unmanaged.passRetained(worker).toOpaque()
                let rc = pthread_create(
                    &thread, nil,
                    { raw in
                        let worker = Unmanaged<Worker>.fromOpaque(raw!).takeRetainedValue()
                        worker.run()
                        return nil
                    }, context)
                if rc != 0 { BenchSystem.fail("pthread_create") }
                threads.append(thread)
            }
            for thread in threads { pthread_join(thread, nil) }
            return Result(
                writes: workers.reduce(0) { $0 + $1.writes }, seconds: seconds,
                latenciesNs: workers.flatMap(\.latencies))
        }

        /// The daemon's STATS (name → value), over a fresh connection.
        static func stats(host: String, port: Int) -> [String: UInt64] {
            let fd = BenchSystem.connectTCP(host: host, port: port)
            defer { close(fd) }
            var reader = BenchFrameReader(fd: fd)
            BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "durability-bench-stats"))
            reader.expect(.welcome, context: "HELLO")
            BenchSystem.writeAll(fd, BenchFrames.encoder.encode(.stats(requestID: 1)))
            while true {
                if case .statsReply(_, let stats) = reader.next(context: "STATS") {
                    return Dictionary(stats.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
                }
            }
        }
    }
#endif
