// `snapsync-bench recovery`: how long snapsyncd takes from exec to "listening on" when its data
// directory holds one big room (a checkpoint of --items items) and --writes logged writes since
// that checkpoint, as after a kill -9 (docs/benchmarks.md, "Recovery").
//
// The data directory is made once, through the real daemon: --items items appended in MUTATEs
// of 10,000, a SIGTERM (the shutdown checkpoint), a restart, --writes pipelined MUTATEs each
// updating one item (update_items, reload) chosen by a seeded PRNG, then SIGKILL so that they
// stay in the log. Each timed start runs on a fresh copy of it; with several --server-binary,
// the binaries take turns, run by run, so that they share the machine's state alike.
#if canImport(Glibc)
    import Glibc
    import ArgumentParser
    import SnapSyncModel
    import SnapSyncTestSupport
    import SnapSyncWire

    struct RecoveryBenchmark: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "recovery",
            abstract: "Start-up time of snapsyncd with a big room checkpointed and many writes logged since.",
            discussion: """
                Builds a data directory under --dir with the first --server-binary (or --fixture-binary): \
                one room of --items items in --sections sections, checkpointed, then --writes logged \
                writes. Then, --repeat times, starts each --server-binary in turn on a fresh copy and \
                prints one JSON line: seconds from exec to "listening on", the daemon's own "opened ... \
                in N ms", and the replayed-writes count it logged. A start that takes longer than \
                --timeout is killed and reported as such.
                """)

        @Option(help: "Items in the room.")
        var items: Int = 1_000_000

        @Option(help: "Sections the items are spread over.")
        var sections: Int = 100

        @Option(help: "Writes logged after the checkpoint (each updates one item).")
        var writes: Int = 100_000

        @Option(help: "SnapshotPayload bytes per item.")
        var payloadBytes: Int = 4

        @Option(help: "Timed starts per binary.")
        var `repeat`: Int = 3

        @Option(help: "Seconds after which a start is killed and reported as timed out.")
        var timeout: Double = 120

        @OptionGroup var data: DataDirectoryOption

        @Option(
            name: .customLong("server-binary"),
            help: "snapsyncd to time (repeatable; default: <repo>/.build/release/snapsyncd, which must not be older than its sources).")
        var serverBinaries: [String] = []

        @Option(
            name: .customLong("fixture-binary"),
            help: "snapsyncd that writes the data directory; it must checkpoint at SIGTERM (default: the first --server-binary).")
        var fixtureBinary: String?

        func validate() throws {
            guard items >= 1, items <= 10_000_000 else { throw ValidationError("--items must be 1...10000000") }
            guard sections >= 1, sections <= items else { throw ValidationError("--sections must be 1...--items") }
            guard writes >= 0 else { throw ValidationError("--writes must not be negative") }
            guard payloadBytes >= 1, payloadBytes <= 1024 else { throw ValidationError("--payload-bytes must be 1...1024") }
            guard self.repeat >= 1 else { throw ValidationError("--repeat must be at least 1") }
            guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        }

        /// SnapshotLimits that let one room hold --items items in one SNAPSHOT.
        var daemonLimits: [String] {
            let snapshotBytes = items * (payloadBytes + 16) + sections * 16 + (1 << 20)
            let frameBytes = max(16 << 20, snapshotBytes + (1 << 20))
            return [
                "--max-items-per-room", String(items), "--max-frame-bytes", String(frameBytes),
                "--max-snapshot-bytes", String(snapshotBytes), "--fsync", "no",
            ]
        }

        func run() throws {
            let base = data.dir ?? BenchSystem.temporaryBase(default: "/var/tmp")
            let binaries =
                serverBinaries.isEmpty
                ? [ServerBinaries.daemon(explicit: nil)]
                : serverBinaries.map { ServerBinaries.daemon(explicit: $0) }
            let fixtureMaker = fixtureBinary.map { ServerBinaries.daemon(explicit: $0) } ?? binaries[0]
            let root = BenchCleanup.temporaryDirectory(under: base, prefix: "snapsync-bench-recovery")
            defer { BenchCommand.removeTree(root) }
            let fixture = root + "/fixture"
            let made = Bench.time { makeFixture(binary: fixtureMaker, data: fixture) }
            BenchSystem.printError("snapsync-bench: data directory with \(items) items and \(writes) logged writes made in \(Int(made / 1e9)) s (\(fixture))\n")
            let copy = root + "/run"
            for run in 0..<self.repeat {
                for binary in binaries {
                    BenchCommand.removeTree(copy)
                    guard BenchCommand.run(["cp", "-a", fixture, copy]), BenchCommand.run(["sync"]) else {
                        BenchSystem.die("cannot copy \(fixture) to \(copy)")
                    }
                    let start = timedStart(binary: binary, data: copy)
                    Bench.printJSON([
                        "benchmark": "recovery", "binary": .string(binary), "run": .int(run),
                        "items": .int(items), "sections": .int(sections), "logged_writes": .int(writes),
                        "payload_bytes": .int(payloadBytes), "dir": .string(base),
                        "timed_out": .string(start.seconds == nil ? "yes" : "no"),
                        "seconds_to_listening": start.seconds.map { .number($0, digits: 3) } ?? .number(.nan),
                        "open_ms": start.openMs.map { .int($0) } ?? .number(.nan),
                        "checkpoints_loaded": start.checkpoints.map { .int($0) } ?? .number(.nan),
                        "replayed": start.replayed.map { .int($0) } ?? .number(.nan),
                    ])
                }
            }
        }

        /// One room "big": `items` items in `sections` sections, checkpointed at SIGTERM; then
        /// `writes` updates, left in the log by a SIGKILL.
        func makeFixture(binary: String, data: String) {
            var daemon = ServerProcess.startDaemon(binary: binary, arguments: ["--data-dir", data] + daemonLimits, cpu: nil)
            var client = RecoveryClient(host: daemon.host, port: daemon.port)
            var sectionFrames: [[UInt8]] = []
            var itemFrames: [[UInt8]] = []
            let perSection = (items + sections - 1) / sections
            var made = 0
            for s in 0..<sections {
                let section = SnapshotIdentifier("s\(s)")
                sectionFrames.append(RecoveryClient.mutate(requestID: UInt64(s + 1), [.appendSections([SnapshotElement(section)])]))
                var start = 0
                while start < perSection && made < items {
                    let count = min(10_000, perSection - start, items - made)
                    let elements = (made..<made + count).map { SnapshotElement(Self.itemID($0), payload: payload($0)) }
                    itemFrames.append(RecoveryClient.mutate(requestID: UInt64(itemFrames.count + 1), [.appendItems(elements, toSection: section)]))
                    start += count
                    made += count
                }
            }
            client.pipeline(sectionFrames, window: 64)
            client.pipeline(itemFrames, window: 4)
            daemon.stop()  // SIGTERM: the shutdown checkpoint
            daemon = ServerProcess.startDaemon(binary: binary, arguments: ["--data-dir", data] + daemonLimits, cpu: nil)
            client = RecoveryClient(host: daemon.host, port: daemon.port)
            var rng = SplitMix64(seed: 13)
            var frames: [[UInt8]] = []
            frames.reserveCapacity(writes)
            for w in 0..<writes {
                let id = Self.itemID(Int(rng.next() % UInt64(items)))
                frames.append(RecoveryClient.mutate(requestID: UInt64(w + 1), [.updateItems([SnapshotElement(id, payload: payload(w &+ 7))], .reload)]))
            }
            client.pipeline(frames, window: 256)
            ServerProcess.terminate(daemon.pid, graceMs: 0)  // SIGKILL: the writes stay in the log
            unlink(daemon.logPath)
        }

        static func itemID(_ i: Int) -> SnapshotIdentifier { SnapshotIdentifier("i\(i)") }

        func payload(_ i: Int) -> SnapshotPayload {
            SnapshotPayload((0..<payloadBytes).map { UInt8(truncatingIfNeeded: i >> (8 * ($0 % 4))) | 1 })
        }

        struct Start {
            var seconds: Double?
            var openMs: Int?
            var checkpoints: Int?
            var replayed: Int?
        }

        /// Execs `binary` on `data` and waits for "listening on" (or exit, or the timeout); kills it.
        func timedStart(binary: String, data: String) -> Start {
            let log = ServerProcess.logPath("recovery")
            defer { unlink(log) }
            let t0 = BenchSystem.nowNs()
            let pid = ServerProcess.spawn(
                [binary, "--host", "127.0.0.1", "--port", "0", "--data-dir", data] + daemonLimits,
                logPath: log, cpu: nil)
            defer { ServerProcess.terminate(pid, graceMs: 0) }
            guard let listening = ServerProcess.waitForListening(pid: pid, log: log, binary: binary, timeoutNs: UInt64(timeout * 1e9)) else {
                return Start()
            }
            return Start(
                seconds: Double(BenchSystem.nowNs() - t0) / 1e9,
                openMs: Self.number(before: " ms", after: ", in ", in: listening.log),
                checkpoints: Self.number(before: " checkpoint(s)", after: "room(s), ", in: listening.log),
                replayed: Self.number(before: " write(s) replayed", after: "checkpoint(s), ", in: listening.log))
        }

        /// The integer between `after` and `before` on the "store: opened" line (older binaries,
        /// which a before/after comparison runs, say "storage: opened"), if any.
        static func number(before: String, after: String, in text: String) -> Int? {
            guard let line = text.split(separator: "\n").first(where: { $0.contains("store: opened") || $0.contains("storage: opened") }),
                let from = BenchSystem.find(after, in: String(line))
            else { return nil }
            let rest = String(line)[from...]
            let digits = rest.prefix { $0.isNumber }
            guard rest.dropFirst(digits.count).hasPrefix(before) else { return nil }
            return Int(digits)
        }
    }

    /// A client that pipelines MUTATEs, keeping at most `window` unanswered.
    struct RecoveryClient {
        let fd: Int32
        var reader: BenchFrameReader

        init(host: String, port: Int) {
            fd = BenchSystem.connectTCP(host: host, port: port)
            reader = BenchFrameReader(fd: fd)
            BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "recovery-bench"))
            reader.expect(.welcome, context: "HELLO")
        }

        /// MUTATE of room "big" applying `ops`.
        static func mutate(requestID: UInt64, _ ops: [SnapshotOperation]) -> [UInt8] {
            BenchFrames.mutate(requestID: requestID, room: "big", ops: ops)
        }

        mutating func pipeline(_ frames: [[UInt8]], window: Int) { reader.pipeline(frames, window: window) }
    }
#endif
