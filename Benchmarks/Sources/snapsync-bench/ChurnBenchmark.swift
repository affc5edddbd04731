// `snapsync-bench churn`: many distinct rooms, each created and written once and then left, in
// a daemon whose rooms sleep (--room-idle, docs/persistence.md "Sleeping rooms"): resident
// rooms, RSS and the data directory's size sampled over the run; afterwards a sample of the
// rooms is read back (JOIN of a sleeping room, timed), each checked for its content and digest
// (docs/benchmarks.md, "Churn").
//
// The creation phase is bounded by --seconds: a run that cannot create --rooms in time says how
// many it did. The deletion phase (--drop-phase) DROPs every room and samples until the data
// directory has shrunk back.
#if canImport(Glibc)
    import Glibc
    #if canImport(CoreFoundation)
        // With the SnapSync client in the graph, Foundation's CoreFoundation declares Glibc's
        // `stat` and `dirent` too and MemberImportVisibility asks for its import; `S_IF*` are
        // then ambiguous, hence `Glibc.S_IF*`.
        import CoreFoundation
    #endif
    import ArgumentParser
    import Synchronization
    import SnapSyncModel
    import SnapSyncWire

    struct ChurnBenchmark: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "churn",
            abstract: "Rooms created, written once and left, in a daemon whose idle rooms sleep: memory, disk, wake latency.",
            discussion: """
                Starts snapsyncd (--room-idle, --max-rooms as given) with its data under --dir, and \
                pipelines one MUTATE per new room (a section and one item with a payload made from \
                the room's number) until --rooms rooms exist or --seconds have passed. A second \
                thread samples STATS (rooms, rooms_sleeping), the daemon's RSS and the data \
                directory's size every --sample-every seconds, written as JSON lines to --samples. \
                After --settle seconds more, --read-back rooms spread over those created are JOINed \
                one at a time (each a sleeping room: the daemon loads it from its checkpoint), each \
                checked (version 1, its item and payload, the SNAPSHOT's digest), then JOINed again \
                (now resident). Prints one JSON summary line with the JOIN latencies.
                """)

        @Option(help: "Distinct rooms to create.")
        var rooms: Int = 1_000_000

        @Option(help: "Longest creation phase, in seconds: the run stops creating rooms then, and says how many it made.")
        var seconds: Double = 1800

        @Option(help: "snapsyncd's --room-idle.")
        var roomIdle: String = "1s"

        @Option(help: "snapsyncd's --max-rooms (resident rooms); default: the daemon's.")
        var maxRooms: Int?

        @Option(help: "MUTATEs in flight.")
        var window: Int = 64

        @Option(help: "SnapshotPayload bytes of each room's one item.")
        var payloadBytes: Int = 32

        @Option(help: "Seconds between samples.")
        var sampleEvery: Double = 1

        @Option(help: "Seconds between two measurements of the data directory's size (a walk of every file).")
        var diskEvery: Double = 5

        @Option(help: "Seconds to keep sampling after the last room was created (the rooms go to sleep).")
        var settle: Double = 10

        @Option(help: "Rooms read back afterwards, spread evenly over those created (0: all).")
        var readBack: Int = 10_000

        @Option(help: "Where the samples go (JSON lines; default: stderr).")
        var samples: String?

        @Flag(
            help: "At the end, stop the daemon (SIGTERM) and time a start on its data directory with every room asleep, then read back --read-back rooms again."
        )
        var restart = false

        @Flag(
            help:
                "After the read-back, DROP every room and sample until the data directory shrinks back (to a hundredth of its size, or for at most 600 s)."
        )
        var dropPhase = false

        @OptionGroup var daemon: DaemonOptions
        @OptionGroup var data: DataDirectoryOption

        /// The DROP request for the deletion phase (request id, room).
        static let dropFrame: @Sendable (UInt64, String) -> [UInt8] = { BenchFrames.encoder.encode(.drop(requestID: $0, room: $1)) }

        func validate() throws {
            guard rooms >= 1 else { throw ValidationError("--rooms must be at least 1") }
            guard seconds > 0, settle >= 0, sampleEvery > 0, diskEvery > 0 else {
                throw ValidationError("--seconds, --sample-every and --disk-every must be positive, --settle not negative")
            }
            guard window >= 1, payloadBytes >= 1, payloadBytes <= 4096 else {
                throw ValidationError("--window must be at least 1, --payload-bytes 1...4096")
            }
            guard readBack >= 0 else { throw ValidationError("--read-back must not be negative") }
        }

        static func roomName(_ i: Int) -> String { "churn-\(i)" }

        /// Room i's one item's payload: its number, then filler, so every room differs.
        func payload(_ i: Int) -> SnapshotPayload {
            SnapshotPayload((0..<payloadBytes).map { UInt8(truncatingIfNeeded: (i >> (8 * ($0 % 8))) &+ $0) })
        }

        /// What room i holds after its one write.
        func expected(_ i: Int) -> RoomSnapshot {
            var snapshot = RoomSnapshot()
            try! snapshot.apply(Self.ops(payload(i)), limits: .unlimited)
            return snapshot
        }

        static func ops(_ payload: SnapshotPayload) -> [SnapshotOperation] {
            [.appendSections([SnapshotElement("s")]), .appendItems([SnapshotElement("k", payload: payload)], toSection: "s")]
        }

        func run() throws {
            let base = data.dir ?? BenchSystem.temporaryBase(default: "/var/tmp")
            let binary = ServerBinaries.daemon(explicit: daemon.binary.serverBinary)
            // One client creates every room: the per-principal quota on new rooms is lifted, and
            // the stored-room limit raised to the run's rooms.
            var arguments =
                daemon.arguments + [
                    "--room-idle", roomIdle, "--room-creations-per-minute", "0", "--max-stored-rooms", String(max(rooms, 1_000_000)),
                ]
            if let maxRooms { arguments += ["--max-rooms", String(maxRooms)] }
            let server = ServerProcess.startDaemon(binary: binary, arguments: arguments, cpu: nil, dataBase: base)
            // After --restart the first daemon is gone (reaped): only its directory and log are left.
            var restarted = false
            defer {
                if restarted {
                    if let dir = server.temporaryDirectory { BenchCommand.removeTree(dir) }
                    unlink(server.logPath)
                } else {
                    server.stop()
                }
            }
            guard let dataDir = server.temporaryDirectory else { BenchSystem.die("no data directory") }
            let samplesPath = samples ?? "/dev/stderr"
            guard let output = fopen(samplesPath, "w") else { BenchSystem.die("cannot write \(samplesPath)") }
            let sampler = ChurnSampler(
                host: server.host, port: server.port, pid: server.pid, dataDirectory: dataDir,
                every: sampleEvery, diskEvery: diskEvery, output: UInt(bitPattern: output))
            let thread = sampler.start()
            BenchSystem.printError(
                "snapsync-bench churn: \(rooms) rooms, --room-idle \(roomIdle), \(arguments.joined(separator: " ")), data in \(dataDir)\n")

            let t0 = BenchSystem.nowNs()
            let created = create(server: server, sampler: sampler, deadline: t0 + UInt64(seconds * 1e9))
            let createSeconds = Double(BenchSystem.nowNs() - t0) / 1e9
            BenchSystem.printError("snapsync-bench churn: created \(created) of \(rooms) rooms in \(Int(createSeconds)) s\n")
            let settleEnd = BenchSystem.nowNs() + UInt64(settle * 1e9)
            while BenchSystem.nowNs() < settleEnd { BenchSystem.sleepMs(100) }
            let settled = sampler.last()
            let reads = readBackRooms(created: created, server: server)
            var dropped: (seconds: Double, dataBytes: Int)?
            if dropPhase {
                dropped = drop(created: created, server: server, sampler: sampler, frame: Self.dropFrame)
            }
            sampler.stop.store(true, ordering: .relaxed)
            pthread_join(thread, nil)
            fclose(output)
            let peak = sampler.peakRSS.load(ordering: .relaxed)
            var fields: [(String, JSONValue)] = [
                ("benchmark", "churn"), ("rooms_asked", .int(rooms)), ("rooms_created", .int(created)),
                ("create_seconds", .number(createSeconds, digits: 1)),
                ("rooms_per_second", .number(Double(created) / createSeconds, digits: 0)),
                ("room_idle", .string(roomIdle)), ("max_rooms", maxRooms.map { .int($0) } ?? .string("default")),
                ("fsync", .string(daemon.fsync)), ("payload_bytes", .int(payloadBytes)),
                ("settled_rooms_resident", .int(settled.rooms)), ("settled_rooms_sleeping", .int(settled.sleeping)),
                ("settled_rss_bytes", .int(settled.rss)), ("settled_data_bytes", .int(settled.dataBytes)),
                ("baseline_rss_bytes", .int(sampler.baselineRSS.load(ordering: .relaxed))),
                ("peak_rss_bytes", .int(peak)),
                ("read_back", .int(reads.checked)), ("read_back_woken", .int(reads.woken)),
                ("join_sleeping_p50_ms", .number(reads.sleeping.quantile(0.5), digits: 3)),
                ("join_sleeping_p99_ms", .number(reads.sleeping.quantile(0.99), digits: 3)),
                ("join_sleeping_max_ms", .number(reads.sleeping.quantile(1), digits: 3)),
                ("join_resident_p50_ms", .number(reads.resident.quantile(0.5), digits: 3)),
                ("join_resident_p99_ms", .number(reads.resident.quantile(0.99), digits: 3)),
                ("loop_pass_max_us", .int(settled.loopPassMaxUs)),
            ]
            if restart {
                restarted = true
                let again = restartAndReadBack(server: server, binary: binary, arguments: arguments, created: created)
                fields += again
            }
            if let dropped {
                fields += [("drop_seconds", .number(dropped.seconds, digits: 1)), ("dropped_data_bytes", .int(dropped.dataBytes))]
            }
            Bench.printJSON(fields)
        }

        /// Pipelines one MUTATE per new room, `window` in flight, until `rooms` or `deadline`.
        /// - Returns: the rooms created (each ACKed at version 1).
        func create(server: ServerProcess, sampler: ChurnSampler, deadline: UInt64) -> Int {
            let fd = BenchSystem.connectTCP(host: server.host, port: server.port)
            defer { close(fd) }
            var reader = BenchFrameReader(fd: fd)
            BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "churn-bench"))
            reader.expect(.welcome, context: "HELLO")
            var sent = 0, acked = 0
            var batch: [UInt8] = []
            while acked < sent || (sent < rooms && BenchSystem.nowNs() < deadline) {
                batch.removeAll(keepingCapacity: true)
                while sent < rooms && sent - acked < window && BenchSystem.nowNs() < deadline {
                    batch += BenchFrames.mutate(requestID: UInt64(sent + 1), room: Self.roomName(sent), ops: Self.ops(payload(sent)))
                    sent += 1
                }
                if !batch.isEmpty { BenchSystem.writeAll(fd, batch) }
                let frame = reader.expect(.ack, context: "MUTATE of room \(acked)")
                guard case .ack(_, _, 1) = reader.decode(frame, context: "ACK") else {
                    BenchSystem.die("room \(Self.roomName(acked)) was not acknowledged at version 1")
                }
                acked += 1
                sampler.created.store(acked, ordering: .relaxed)
            }
            return acked
        }

        struct ReadBack {
            var checked = 0
            var woken = 0
            var sleeping = Latencies()
            var resident = Latencies()
        }

        /// JOINs (and LEAVEs) rooms spread over the `created` ones, one at a time: first while
        /// asleep, then again while resident; checks each SNAPSHOT.
        func readBackRooms(created: Int, server: ServerProcess) -> ReadBack {
            var result = ReadBack()
            guard created > 0 else { return result }
            let count = readBack == 0 ? created : min(readBack, created)
            let fd = BenchSystem.connectTCP(host: server.host, port: server.port)
            defer { close(fd) }
            var reader = BenchFrameReader(fd: fd)
            BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "churn-bench-read"))
            reader.expect(.welcome, context: "HELLO")
            let wokenBefore = ChurnSampler.stats(fd: fd, reader: &reader)["rooms_woken"] ?? 0
            var requestID: UInt64 = 10
            func join(_ i: Int) -> Double {
                let room = Self.roomName(i)
                requestID += 1
                let t0 = BenchSystem.nowNs()
                BenchSystem.writeAll(fd, BenchFrames.join(requestID: requestID, room: room))
                let frame = reader.expect(.snapshot, context: "JOIN \(room)")
                let ms = Double(BenchSystem.nowNs() - t0) / 1e6
                guard case .snapshot(_, room, _, let version, _, let digest, let snapshot, _) = reader.decode(frame, context: "SNAPSHOT") else {
                    BenchSystem.die("JOIN \(room): a SNAPSHOT of another room")
                }
                let want = expected(i)
                guard version == 1, snapshot == want, digest == want.digest else {
                    BenchSystem.die(
                        "room \(room) came back wrong: version \(version), \(snapshot.numberOfItems) items, digest \(digest == want.digest ? "right" : "wrong")"
                    )
                }
                requestID += 1
                BenchSystem.writeAll(fd, BenchFrames.encoder.encode(.leave(requestID: requestID, room: room)))
                reader.expect(.ack, context: "LEAVE \(room)")
                return ms
            }
            for k in 0..<count {
                let i = count == created ? k : Int((Double(k) + 0.5) * Double(created) / Double(count))
                result.sleeping.add(join(i))
                result.resident.add(join(i))
                result.checked += 1
            }
            result.woken = Int((ChurnSampler.stats(fd: fd, reader: &reader)["rooms_woken"] ?? 0) - wokenBefore)
            return result
        }

        /// The deletion phase: DROP every created room (pipelined), then sample until the data
        /// directory is back under 10% of its size (at most 10 minutes).
        func drop(
            created: Int, server: ServerProcess, sampler: ChurnSampler, frame: (UInt64, String) -> [UInt8]
        ) -> (seconds: Double, dataBytes: Int) {
            let fd = BenchSystem.connectTCP(host: server.host, port: server.port)
            defer { close(fd) }
            var reader = BenchFrameReader(fd: fd)
            BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "churn-bench-drop"))
            reader.expect(.welcome, context: "HELLO")
            let t0 = BenchSystem.nowNs()
            let before = ChurnSampler.directoryBytes(sampler.dataDirectory)
            var sent = 0, acked = 0
            while acked < created {
                var batch: [UInt8] = []
                while sent < created && sent - acked < window {
                    batch += frame(UInt64(sent + 1), Self.roomName(sent))
                    sent += 1
                }
                if !batch.isEmpty { BenchSystem.writeAll(fd, batch) }
                reader.expect(.ack, context: "DROP of room \(acked)")
                acked += 1
            }
            var size = ChurnSampler.directoryBytes(sampler.dataDirectory)
            while size > before / 100 && BenchSystem.nowNs() - t0 < 600_000_000_000 {
                BenchSystem.sleepMs(1000)
                size = ChurnSampler.directoryBytes(sampler.dataDirectory)
            }
            return (Double(BenchSystem.nowNs() - t0) / 1e9, size)
        }
    }

    extension ChurnBenchmark {
        /// Stops the daemon (SIGTERM: it lists what it evicted), starts it on the same data
        /// directory and reports how long that took (exec to "listening on"), its RSS and STATS
        /// once listening, then reads back rooms again (all asleep after the start).
        func restartAndReadBack(server: ServerProcess, binary: String, arguments: [String], created: Int) -> [(String, JSONValue)] {
            guard let dataDir = server.temporaryDirectory else { return [] }
            ServerProcess.terminate(server.pid, graceMs: 60_000)
            let log = ServerProcess.logPath("churn-restart")
            let t0 = BenchSystem.nowNs()
            let pid = ServerProcess.spawn(
                [binary, "--host", "127.0.0.1", "--port", "0"] + arguments + ["--data-dir", dataDir], logPath: log, cpu: nil)
            defer {
                ServerProcess.terminate(pid, graceMs: 10_000)
                unlink(log)
            }
            guard let listening = ServerProcess.waitForListening(pid: pid, log: log, binary: binary, timeoutNs: 600_000_000_000) else {
                BenchSystem.die("the restarted daemon did not listen within 600 s (log: \(log))")
            }
            let seconds = Double(BenchSystem.nowNs() - t0) / 1e9
            let again = ServerProcess(pid: pid, host: listening.host, port: listening.port, logPath: log, name: "snapsyncd")
            let rss = BenchSystem.residentBytes(pid: again.pid) ?? 0
            let fd = BenchSystem.connectTCP(host: again.host, port: again.port)
            var reader = BenchFrameReader(fd: fd)
            BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "churn-bench-restart"))
            reader.expect(.welcome, context: "HELLO")
            let stats = ChurnSampler.stats(fd: fd, reader: &reader)
            close(fd)
            let reads = readBackRooms(created: created, server: again)
            return [
                ("restart_seconds_to_listening", .number(seconds, digits: 2)), ("restart_rss_bytes", .int(rss)),
                ("restart_rooms_resident", .int(Int(stats["rooms"] ?? 0))), ("restart_rooms_sleeping", .int(Int(stats["rooms_sleeping"] ?? 0))),
                ("restart_read_back", .int(reads.checked)), ("restart_read_back_woken", .int(reads.woken)),
                ("restart_join_sleeping_p50_ms", .number(reads.sleeping.quantile(0.5), digits: 3)),
                ("restart_join_sleeping_p99_ms", .number(reads.sleeping.quantile(0.99), digits: 3)),
            ]
        }
    }

    /// Latencies in milliseconds, for quantiles.
    struct Latencies {
        private var values: [Double] = []
        mutating func add(_ ms: Double) { values.append(ms) }
        var count: Int { values.count }
        /// The `q` quantile (nearest rank); NaN when empty.
        func quantile(_ q: Double) -> Double {
            guard !values.isEmpty else { return .nan }
            let sorted = values.sorted()
            return sorted[min(sorted.count - 1, Int((q * Double(sorted.count)).rounded(.up)) - (q > 0 ? 1 : 0))]
        }
    }

    /// The churn run's sampler, on a thread of its own: STATS over its own connection, the
    /// daemon's RSS, and (every `diskEvery` seconds) the data directory's size.
    final class ChurnSampler: Sendable {
        let host: String
        let port: Int
        let pid: Int32
        let dataDirectory: String
        let every: Double
        let diskEvery: Double
        /// The samples' `FILE *`, as a bit pattern.
        let output: UInt
        let created = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let peakRSS = Atomic<Int>(0)
        let baselineRSS = Atomic<Int>(0)
        private let latest = Mutex<Sample>(Sample())

        struct Sample {
            var rooms = 0
            var sleeping = 0
            var rss = 0
            var dataBytes = 0
            var loopPassMaxUs = 0
        }

        init(host: String, port: Int, pid: Int32, dataDirectory: String, every: Double, diskEvery: Double, output: UInt) {
            (self.host, self.port, self.pid, self.dataDirectory) = (host, port, pid, dataDirectory)
            (self.every, self.diskEvery, self.output) = (every, diskEvery, output)
        }

        func last() -> Sample { latest.withLock { $0 } }

        func start() -> pthread_t {
            var thread = pthread_t()
            let context = Unmanaged.passRetained(self).toOpaque()
            let rc = pthread_create(
                &thread, nil,
                { raw in
                    let sampler = Unmanaged<ChurnSampler>.fromOpaque(raw!).takeRetainedValue()
                    sampler.run()
                    return nil
                }, context)
            if rc != 0 { BenchSystem.fail("pthread_create") }
            return thread
        }

        private func run() {
            let fd = BenchSystem.connectTCP(host: host, port: port)
            defer { close(fd) }
            var reader = BenchFrameReader(fd: fd)
            BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "churn-bench-stats"))
            reader.expect(.welcome, context: "HELLO")
            baselineRSS.store(BenchSystem.residentBytes(pid: pid) ?? 0, ordering: .relaxed)
            let t0 = BenchSystem.nowNs()
            var nextDisk: UInt64 = 0
            var dataBytes = 0
            var tick: UInt64 = 0
            while !stop.load(ordering: .relaxed) {
                let now = BenchSystem.nowNs()
                if now >= nextDisk {
                    dataBytes = Self.directoryBytes(dataDirectory)
                    nextDisk = BenchSystem.nowNs() + UInt64(diskEvery * 1e9)
                }
                let stats = Self.stats(fd: fd, reader: &reader)
                let rss = BenchSystem.residentBytes(pid: pid) ?? 0
                if rss > peakRSS.load(ordering: .relaxed) { peakRSS.store(rss, ordering: .relaxed) }
                let sample = Sample(
                    rooms: Int(stats["rooms"] ?? 0), sleeping: Int(stats["rooms_sleeping"] ?? 0), rss: rss,
                    dataBytes: dataBytes, loopPassMaxUs: Int(stats["loop_pass_max_us"] ?? 0))
                latest.withLock { $0 = sample }
                let line =
                    JSONValue.object([
                        ("t", .number(Double(now - t0) / 1e9, digits: 2)), ("created", .int(created.load(ordering: .relaxed))),
                        ("rooms", .int(sample.rooms)), ("rooms_sleeping", .int(sample.sleeping)),
                        ("rooms_evicted", .int(Int(stats["rooms_evicted"] ?? 0))), ("rooms_woken", .int(Int(stats["rooms_woken"] ?? 0))),
                        ("rss_bytes", .int(rss)), ("data_bytes", .int(dataBytes)),
                        ("loop_pass_p99_us", .int(Int(stats["loop_pass_p99_us"] ?? 0))), ("loop_pass_max_us", .int(sample.loopPassMaxUs)),
                    ]).json + "\n"
                let file = UnsafeMutablePointer<FILE>(bitPattern: output)
                fputs(line, file)
                fflush(file)
                tick += 1
                let next = t0 + tick * UInt64(every * 1e9)
                let after = BenchSystem.nowNs()
                if next > after { usleep(UInt32((next - after) / 1000)) }
            }
        }

        /// STATS over `fd`.
        static func stats(fd: Int32, reader: inout BenchFrameReader) -> [String: UInt64] {
            BenchSystem.writeAll(fd, BenchFrames.encoder.encode(.stats(requestID: 1)))
            while true {
                if case .statsReply(_, let stats) = reader.next(context: "STATS") {
                    return Dictionary(stats.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a })
                }
            }
        }

        /// Bytes the files directly in `directory` take on disk (st_blocks × 512).
        /// - Complexity: one fstatat per file.
        static func directoryBytes(_ directory: String) -> Int {
            guard let dir = opendir(directory) else { return 0 }
            defer { closedir(dir) }
            let dirFD = dirfd(dir)
            var total = 0
            while let entry = readdir(dir) {
                var info = stat()
                let ok = withUnsafePointer(to: entry.pointee.d_name) {
                    $0.withMemoryRebound(to: CChar.self, capacity: 256) { fstatat(dirFD, $0, &info, AT_SYMLINK_NOFOLLOW) == 0 }
                }
                if ok && (info.st_mode & Glibc.S_IFMT) == Glibc.S_IFREG { total += Int(info.st_blocks) * 512 }
            }
            return total
        }
    }
#endif
