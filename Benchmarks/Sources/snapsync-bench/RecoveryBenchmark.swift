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
    import SnapSyncTestSupport

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

        @Option(help: "Payload bytes per item.")
        var payloadBytes: Int = 4

        @Option(help: "Timed starts per binary.")
        var `repeat`: Int = 3

        @Option(help: "Seconds after which a start is killed and reported as timed out.")
        var timeout: Double = 120

        @Option(help: "Directory for the data directories: put it on the disk to measure (default: $TMPDIR or /var/tmp).")
        var dir: String?

        @Option(name: .customLong("server-binary"), help: "snapsyncd to time (repeatable; default: <repo>/.build/release/snapsyncd).")
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

        /// Limits that let one room hold --items items in one SNAPSHOT.
        var daemonLimits: [String] {
            let snapshotBytes = items * (payloadBytes + 16) + sections * 16 + (1 << 20)
            let frameBytes = max(16 << 20, snapshotBytes + (1 << 20))
            return [
                "--max-items-per-room", String(items), "--max-frame-bytes", String(frameBytes),
                "--max-snapshot-bytes", String(snapshotBytes), "--fsync", "no",
            ]
        }

        func run() throws {
            let base = dir ?? (getenv("TMPDIR").map { String(cString: $0) } ?? "/var/tmp")
            let binaries =
                serverBinaries.isEmpty
                ? [FanoutServers.daemonBinary(explicit: nil)]
                : serverBinaries.map { FanoutServers.daemonBinary(explicit: $0) }
            let fixtureMaker = fixtureBinary.map { FanoutServers.daemonBinary(explicit: $0) } ?? binaries[0]
            let root = DurabilityBench.temporaryDirectory(under: base, "snapsync-bench-recovery")
            defer { _ = system("rm -rf '\(root)'") }
            let fixture = root + "/fixture"
            let made = Bench.time { makeFixture(binary: fixtureMaker, data: fixture) }
            fanoutErr("snapsync-bench: data directory with \(items) items and \(writes) logged writes made in \(Int(made / 1e9)) s (\(fixture))\n")
            let copy = root + "/run"
            for run in 0..<self.repeat {
                for binary in binaries {
                    guard system("rm -rf '\(copy)' && cp -a '\(fixture)' '\(copy)' && sync") == 0 else {
                        BenchSystem.fail("copying \(fixture)")
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
            var daemon = FanoutServers.startDaemon(binary: binary, extraArguments: ["--data-dir", data] + daemonLimits, cpu: nil)
            var client = RecoveryClient(host: daemon.host, port: daemon.port)
            var sectionFrames: [[UInt8]] = []
            var itemFrames: [[UInt8]] = []
            let perSection = (items + sections - 1) / sections
            var made = 0
            for s in 0..<sections {
                let section = Array("s\(s)".utf8)
                sectionFrames.append(
                    RecoveryClient.mutate(
                        requestID: UInt64(s + 1),
                        ops: { b in
                            b.varint(1); b.u8(FanoutSnapSync.opAppendSections); b.varint(1); b.blob(section); b.blob([])
                        }))
                var start = 0
                while start < perSection && made < items {
                    let count = min(10_000, perSection - start, items - made)
                    itemFrames.append(
                        RecoveryClient.mutate(
                            requestID: UInt64(itemFrames.count + 1),
                            ops: { b in
                                b.varint(1); b.u8(FanoutSnapSync.opAppendItems); b.u8(1); b.blob(section); b.varint(UInt64(count))
                                for i in made..<made + count { b.blob(Self.itemID(i)); b.blob(payload(i)) }
                            }))
                    start += count
                    made += count
                }
            }
            client.pipeline(sectionFrames, window: 64)
            client.pipeline(itemFrames, window: 4)
            daemon.temporaryDirectory = nil
            daemon.stop()  // SIGTERM: the shutdown checkpoint
            daemon = FanoutServers.startDaemon(binary: binary, extraArguments: ["--data-dir", data] + daemonLimits, cpu: nil)
            client = RecoveryClient(host: daemon.host, port: daemon.port)
            var rng = SplitMix64(seed: 13)
            var frames: [[UInt8]] = []
            frames.reserveCapacity(writes)
            for w in 0..<writes {
                let id = Self.itemID(Int(rng.next() % UInt64(items)))
                let value = payload(w &+ 7)
                frames.append(
                    RecoveryClient.mutate(
                        requestID: UInt64(w + 1),
                        ops: { b in
                            b.varint(1); b.u8(FanoutSnapSync.opUpdateItems); b.u8(0); b.varint(1); b.blob(id); b.blob(value)
                        }))
            }
            client.pipeline(frames, window: 256)
            kill(daemon.pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(daemon.pid, &status, 0)
            FanoutServers.forget(daemon.pid)
            unlink(daemon.logPath)
        }

        static func itemID(_ i: Int) -> [UInt8] { Array("i\(i)".utf8) }

        func payload(_ i: Int) -> [UInt8] {
            (0..<payloadBytes).map { UInt8(truncatingIfNeeded: i >> (8 * ($0 % 4))) | 1 }
        }

        struct Start {
            var seconds: Double?
            var openMs: Int?
            var checkpoints: Int?
            var replayed: Int?
        }

        /// Execs `binary` on `data` and waits for "listening on" (or exit, or the timeout); kills it.
        func timedStart(binary: String, data: String) -> Start {
            let log = FanoutServers.logPath("recovery")
            defer { unlink(log) }
            let t0 = BenchSystem.nowNs()
            let pid = FanoutServers.spawn(
                [binary, "--host", "127.0.0.1", "--port", "0", "--data-dir", data] + daemonLimits,
                logPath: log, cpu: nil)
            defer {
                kill(pid, SIGKILL)
                var status: Int32 = 0
                _ = waitpid(pid, &status, 0)
                FanoutServers.forget(pid)
            }
            let deadline = t0 + UInt64(timeout * 1e9)
            while BenchSystem.nowNs() < deadline {
                if let text = BenchSystem.readFile(log), fanoutFind("listening on ", in: text) != nil {
                    let seconds = Double(BenchSystem.nowNs() - t0) / 1e9
                    return Start(
                        seconds: seconds, openMs: Self.number(before: " ms", after: ", in ", in: text),
                        checkpoints: Self.number(before: " checkpoint(s)", after: "room(s), ", in: text),
                        replayed: Self.number(before: " write(s) replayed", after: "checkpoint(s), ", in: text))
                }
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid {
                    BenchSystem.fail("\(binary) exited before listening; its output:\n\(BenchSystem.readFile(log) ?? "")")
                }
                BenchSystem.sleepMs(2)
            }
            return Start()
        }

        /// The integer between `after` and `before` on the "store: opened" line (older binaries,
        /// which a before/after comparison runs, say "storage: opened"), if any.
        static func number(before: String, after: String, in text: String) -> Int? {
            guard let line = text.split(separator: "\n").first(where: { $0.contains("store: opened") || $0.contains("storage: opened") }),
                let from = fanoutFind(after, in: String(line))
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
        var reader: FanoutFrameReader

        init(host: String, port: Int) {
            fd = BenchSystem.connectTCP(host: host, port: port)
            reader = FanoutFrameReader(fd: fd)
            BenchSystem.writeAll(fd, FanoutSnapSync.helloFrame(clientName: "recovery-bench"))
            reader.expect(FanoutSnapSync.welcome, context: "HELLO")
        }

        /// MUTATE of room "big", no expected version, no write id; `ops` writes the op count and ops.
        static func mutate(requestID: UInt64, ops: (inout FanoutFrameBuilder) -> Void) -> [UInt8] {
            FanoutFrameBuilder.build { b in
                b.u8(FanoutSnapSync.mutate); b.varint(requestID); b.string("big"); b.u8(0); b.blob([])
                ops(&b)
            }
        }

        mutating func pipeline(_ frames: [[UInt8]], window: Int) {
            var sent = 0, acked = 0
            while acked < frames.count {
                var batch: [UInt8] = []
                while sent < frames.count && sent - acked < window {
                    batch += frames[sent]
                    sent += 1
                }
                if !batch.isEmpty { BenchSystem.writeAll(fd, batch) }
                reader.expect(FanoutSnapSync.ack, context: "MUTATE \(acked + 1) of \(frames.count)")
                acked += 1
            }
        }
    }
#endif
