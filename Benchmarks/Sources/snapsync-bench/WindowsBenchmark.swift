// `snapsync-bench windows`: what windowed subscriptions (protocol version 4, PROTOCOL.md §9
// "Windows") cost and save against members that hold the whole room (docs/benchmarks.md,
// "Windows").
//
// Each run starts a fresh snapsyncd (limits raised for the room's SNAPSHOT), fills one room with
// --items items (16-byte ids, --payload-bytes payloads) in one section, in MUTATEs of
// --fill-batch items, and fetches one full SNAPSHOT of it (one JOIN, on a connection closed
// afterwards): the bytes a whole-room member pays to join. Then --members version 4 connections
// follow the room, in one of the variants:
// - `windowed`: WINDOW of --window rows around a random item (before ⌊(w − 1) / 2⌋, after the
//   rest; or the first --window rows with --window-kind first), answered by WINDOW_STATE, whose
//   frame bytes are the bytes on join;
// - `windowed-nocoalesce`: the same with the daemon's --window-counts-interval 0 (a count-only
//   WINDOW_DIFF per version instead of one per 100 ms);
// - `whole`: JOIN resuming at the room's current position (epoch and version of the last fill
//   ACK, chain unknown), answered by an empty CATCHUP: the member acts as one that already holds
//   the room (after a reconnect), so that the set-up costs no --members × SNAPSHOT bytes; from
//   then on it receives every DIFF, as any full member.
// Then a writer, on a thread and a connection of its own, sends --rate ops a second in MUTATEs of
// --ops-per-write ops, pipelined, at random places of the room (a quarter each: insert after a
// random item, delete, move after a random item, payload update); its schedule (seed, ids,
// places) is the same in every run. Over --seconds after --warmup the bench counts each member's
// frames and bytes (length prefix included), the daemon's CPU (utime + stime) per version the
// writer got ACKed, and its RSS. When the window ends the writer inserts one more item (a count
// change every member receives) and the bench times how long until every member has a frame at
// that version or later: the drain, which says whether the members kept up.
//
// The members are read by one thread (epoll, level-triggered, non-blocking sockets); frames are
// cut by their length prefix and only their version is read (failures are decoded).
#if canImport(Glibc)
    import ArgumentParser
    import CEpoll
    import Dispatch
    import Foundation
    import Glibc
    import Synchronization
    import SnapSyncModel
    import SnapSyncWire

    struct WindowsBenchmark: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "windows",
            abstract: "Windowed members against whole-room members of one large room: bytes on join, bytes per member per second, daemon CPU per version.",
            discussion: """
                Each run starts a fresh snapsyncd, fills one room with --items items, measures one \
                full SNAPSHOT, connects --members members (windowed: WINDOW of --window rows; \
                whole: JOIN resuming at the room's position), then writes --rate mixed ops a \
                second at random places for --warmup + --seconds seconds. Variants take turns, \
                --repeat rounds. Prints one line per run (JSON with --json), then a summary.
                """)

        enum Variant: String, CaseIterable {
            case windowed
            case windowedNoCoalesce = "windowed-nocoalesce"
            case whole

            var isWindowed: Bool { self != .whole }
        }

        @OptionGroup var launch: DaemonOptions

        @Option(help: "Items of the room, in one section.")
        var items: Int = 1_000_000

        @Option(help: "Members following the room.")
        var members: Int = 1_000

        @Option(help: "Rows of each member's window (windowed variants).")
        var window: Int = 100

        @Option(help: ArgumentHelp("Where each window is: around a random item, or the first rows.", valueName: "around|first"))
        var windowKind: String = "around"

        @Option(help: "Ops a second the writer sends (a quarter each inserts, deletes, moves, payload updates).")
        var rate: Double = 1_000

        @Option(help: "Ops per MUTATE (each MUTATE is one version).")
        var opsPerWrite: Int = 1

        @Option(help: "Seconds measured.")
        var seconds: Double = 10

        @Option(help: "Writes the writer leaves unanswered at most; past it the schedule waits for ACKs (the daemon is behind).")
        var maxInFlight: Int = 1_000

        @Option(help: "Seconds of writes before the measured window.")
        var warmup: Double = 2

        @Option(help: "Bytes of each item's payload.")
        var payloadBytes: Int = 64

        @Option(help: "Items per MUTATE when filling the room.")
        var fillBatch: Int = 10_000

        @Option(help: "Seed of the windows' places and the writer's schedule.")
        var seed: UInt64 = 0x5EED

        @Option(name: .customLong("repeat"), help: "Rounds; each runs every variant once, in turn.")
        var repeatCount: Int = 2

        @Option(help: "Variants, comma-separated, in the order each round runs them: windowed, windowed-nocoalesce, whole.")
        var variants: String = "windowed,whole"

        @OptionGroup var output: JSONOutputOption

        static let idBytes = 16
        static let room = "w"
        static let section: SnapshotIdentifier = "s"

        func validate() throws {
            guard items >= 2, members >= 1, window >= 1, rate > 0, opsPerWrite >= 1, seconds > 0, warmup >= 0 else {
                throw ValidationError("--items at least 2; --members, --window, --rate, --ops-per-write, --seconds positive; --warmup not negative")
            }
            guard payloadBytes >= 8, fillBatch >= 1, repeatCount >= 1 else {
                throw ValidationError("--payload-bytes at least 8, --fill-batch and --repeat positive")
            }
            guard ["around", "first"].contains(windowKind) else { throw ValidationError("--window-kind is around or first") }
            guard parsedVariants != nil else { throw ValidationError("--variants takes windowed, windowed-nocoalesce and/or whole, comma-separated") }
        }

        var parsedVariants: [Variant]? {
            let list = variants.split(separator: ",").map { Variant(rawValue: $0.trimmingCharacters(in: .whitespaces)) }
            return list.isEmpty || list.contains(nil) ? nil : list.compactMap { $0 }
        }

        /// Item n's identifier: "i" and n in 15 decimal digits, 16 bytes.
        static func itemID(_ n: Int) -> SnapshotIdentifier {
            var bytes = [UInt8](repeating: UInt8(ascii: "0"), count: idBytes)
            bytes[0] = UInt8(ascii: "i")
            var v = n
            var i = idBytes - 1
            while v > 0 && i > 0 {
                bytes[i] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
                i -= 1
            }
            return SnapshotIdentifier(bytes)
        }

        static func payload(_ n: UInt64, bytes: Int) -> SnapshotPayload {
            var p = [UInt8](repeating: UInt8(ascii: "p"), count: bytes)
            withUnsafeBytes(of: n.littleEndian) { for (j, b) in $0.enumerated() { p[j] = b } }
            return SnapshotPayload(p)
        }

        /// The room's SNAPSHOT, estimated from above: every item's id, payload and their lengths.
        var snapshotEstimate: Int { items * (Self.idBytes + payloadBytes + 8) + (1 << 20) }

        /// The daemon's arguments for a run: the frame and snapshot limits above the room's
        /// SNAPSHOT, a connection's output above one SNAPSHOT, room for the writer's inserts.
        func daemonArguments(variant: Variant) -> [String] {
            let mib = 1 << 20
            let frame = max(16, (snapshotEstimate * 5 / 4 + mib - 1) / mib)
            var arguments =
                launch.arguments + [
                    "--max-connections", String(members + 64),
                    "--max-frame-bytes", "\(frame)MiB",
                    "--max-snapshot-bytes", String(frame * mib - 65536),
                    "--max-output-bytes", "\(frame + 2)MiB",
                    "--max-input-bytes", "\(max(256, frame + 2))MiB",
                    "--max-items-per-room", String(items * 2 + 1000),
                    "--max-window-rows", String(max(1000, window)),
                ]
            if variant == .windowedNoCoalesce { arguments += ["--window-counts-interval", "0ms"] }
            return arguments
        }

        func run() throws {
            signal(SIGPIPE, SIG_IGN)
            BenchSystem.raiseFileLimit(atLeast: members + 256)
            let binary = ServerBinaries.daemon(explicit: launch.binary.serverBinary)
            let order = parsedVariants!
            if !output.json {
                print(
                    "snapsync-bench windows: \(items) items × (\(Self.idBytes) B id, \(payloadBytes) B payload), \(members) members, window \(window) rows (\(windowKind)), writer \(Bench.decimal(rate, digits: 0)) ops/s in MUTATEs of \(opsPerWrite); \(Bench.decimal(warmup, digits: 1)) s warm-up, \(Bench.decimal(seconds, digits: 1)) s measured; \(BenchSystem.onlineCPUs) CPUs, not pinned"
                )
            }
            var runs: [Variant: [WindowsRunResult]] = [:]
            for round in 0..<repeatCount {
                for variant in order {
                    let result = runOnce(variant: variant, binary: binary, round: round)
                    runs[variant, default: []].append(result)
                    if output.json { Bench.printJSON(result.json(bench: self)) } else { print(result.describe()) }
                    BenchSystem.sleepMs(500)
                }
            }
            if !output.json { for line in summary(runs, order: order) { print(line) } }
        }

        // MARK: One run

        func runOnce(variant: Variant, binary: String, round: Int) -> WindowsRunResult {
            let server = ServerProcess.startDaemon(binary: binary, arguments: daemonArguments(variant: variant), cpu: nil)
            defer { server.stop() }
            var result = WindowsRunResult(variant: variant, round: round)
            result.loadAverage = BenchSystem.readFile("/proc/loadavg").map { String($0.split(separator: " ").prefix(3).joined(separator: " ")) } ?? "?"

            // Fill the room.
            let fillStart = BenchSystem.nowNs()
            let control = BenchSystem.connectTCP(host: server.host, port: server.port)
            var controlReader = BenchFrameReader(fd: control)
            BenchSystem.writeAll(control, BenchFrames.hello(clientName: "windows-bench control", version: ProtocolVersion.current))
            controlReader.expect(.welcome, context: "the control connection's HELLO")
            var frames: [[UInt8]] = [BenchFrames.mutate(requestID: 1, room: Self.room, ops: [.appendSections([SnapshotElement(Self.section)])])]
            var n = 0
            while n < items {
                let upper = min(items, n + fillBatch)
                let elements = (n..<upper).map { SnapshotElement(Self.itemID($0), payload: Self.payload(UInt64($0), bytes: payloadBytes)) }
                frames.append(BenchFrames.mutate(requestID: 2, room: Self.room, ops: [.appendItems(elements, toSection: Self.section)]))
                n = upper
            }
            var position = RoomPosition(epoch: 0, version: 0)
            var sent = 0
            var acked = 0
            while acked < frames.count {
                while sent < frames.count && sent - acked < 4 {
                    BenchSystem.writeAll(control, frames[sent])
                    sent += 1
                }
                let ack = controlReader.decode(controlReader.expect(.ack, context: "filling the room"), context: "filling the room")
                if case .ack(_, let epoch, let version) = ack { position = RoomPosition(epoch: epoch, version: version) }
                acked += 1
            }
            frames = []
            result.fillSeconds = Double(BenchSystem.nowNs() - fillStart) / 1e9

            // One full SNAPSHOT: what a whole-room member pays to join.
            let snapshotStart = BenchSystem.nowNs()
            BenchSystem.writeAll(control, BenchFrames.join(requestID: 3, room: Self.room))
            result.snapshotBytes = controlReader.expect(.snapshot, context: "the control connection's JOIN").count
            result.snapshotSeconds = Double(BenchSystem.nowNs() - snapshotStart) / 1e9
            close(control)
            result.rssFilled = BenchSystem.residentBytes(pid: server.pid) ?? 0

            // The members.
            var generator = WindowsGenerator(bench: self, variant: variant, host: server.host, port: server.port)
            defer { generator.tearDown() }
            let joinStart = BenchSystem.nowNs()
            generator.connectAll(position: position)
            result.joinSeconds = Double(BenchSystem.nowNs() - joinStart) / 1e9
            result.rssJoined = BenchSystem.residentBytes(pid: server.pid) ?? 0

            // The writer's schedule, and the load.
            let t0 = BenchSystem.nowNs() + 50_000_000
            let windowStart = t0 + UInt64(warmup * 1e9)
            let windowEnd = windowStart + UInt64(seconds * 1e9)
            let writer = WindowsWriter(bench: self, host: server.host, port: server.port, start: t0, end: windowEnd)
            var cpuStart: UInt64 = 0
            var versionStart: UInt64 = 0
            generator.load(
                windowStart: windowStart, windowEnd: windowEnd,
                atWindowStart: {
                    cpuStart = BenchSystem.cpuTicks(pid: server.pid) ?? 0
                    versionStart = writer.ackedVersion
                }, pid: server.pid)
            let cpuEnd = BenchSystem.cpuTicks(pid: server.pid) ?? 0
            let versionEnd = writer.ackedVersion
            let written = writer.finish()
            result.drainSeconds = written.finalVersion == .max ? .infinity : generator.drain(to: written.finalVersion, since: windowEnd)
            result.rssAfter = BenchSystem.residentBytes(pid: server.pid) ?? 0
            if server.hasExited { BenchSystem.die("snapsyncd exited during the \(variant.rawValue) run; its log: \(server.log)") }

            result.generator = generator.totals
            result.joinBytes = generator.joinBytes
            result.memberBytes = generator.windowBytes
            result.memberFrames = generator.windowFrames
            result.writer = written
            result.versionsMeasured = versionEnd &- versionStart
            result.serverCPUSeconds = Double(cpuEnd &- cpuStart) / BenchSystem.ticksPerSecond
            result.measuredSeconds = seconds
            result.rssPeak = max(generator.totals.peakRSS, result.rssAfter)
            return result
        }

        // MARK: Summary

        func summary(_ runs: [Variant: [WindowsRunResult]], order: [Variant]) -> [String] {
            var lines: [String] = []
            let joins = runs.values.flatMap { $0 }.map(\.snapshotBytes)
            if let snapshot = joins.max() {
                lines.append("full SNAPSHOT of the room: \(snapshot) B (one JOIN); 0.1% of it: \(snapshot / 1000) B")
            }
            for variant in order {
                guard let list = runs[variant], !list.isEmpty else { continue }
                let f = { (values: [Double], digits: Int) in values.map { Bench.decimal($0, digits: digits) }.joined(separator: ", ") }
                lines.append(
                    "\(variant.rawValue): join mean \(f(list.map(\.joinMean), 0)) B (max \(f(list.map { Double($0.joinMax) }, 0)) B, \(f(list.map { $0.joinMean / Double(max(1, $0.snapshotBytes)) * 100 }, 4))% of the SNAPSHOT); \(f(list.map(\.bytesPerMemberPerSecond), 0)) B and \(f(list.map(\.framesPerMemberPerSecond), 1)) frames per member per second; daemon CPU \(f(list.map(\.cpuPerVersionMicroseconds), 0)) µs per version (\(f(list.map { $0.serverCPUSeconds / $0.measuredSeconds * 100 }, 0))% of a core); drain \(f(list.map(\.drainSeconds), 2)) s"
                )
            }
            return lines
        }
    }

    // MARK: Results

    struct WindowsRunResult {
        var variant: WindowsBenchmark.Variant
        var round: Int
        var loadAverage = "?"
        var fillSeconds: Double = 0
        var snapshotBytes = 0
        var snapshotSeconds: Double = 0
        var joinSeconds: Double = 0
        var joinBytes: [Int] = []
        var memberBytes: [UInt64] = []
        var memberFrames: [UInt64] = []
        var generator = WindowsGenerator.Totals()
        var writer = WindowsWriter.Totals()
        var versionsMeasured: UInt64 = 0
        var serverCPUSeconds: Double = 0
        var measuredSeconds: Double = 0
        var drainSeconds: Double = 0
        var rssFilled = 0
        var rssJoined = 0
        var rssAfter = 0
        var rssPeak = 0

        var joinMean: Double { joinBytes.isEmpty ? 0 : Double(joinBytes.reduce(0, +)) / Double(joinBytes.count) }
        var joinMax: Int { joinBytes.max() ?? 0 }
        var bytesPerMemberPerSecond: Double {
            memberBytes.isEmpty ? 0 : Double(memberBytes.reduce(0, +)) / Double(memberBytes.count) / measuredSeconds
        }
        var maxBytesPerMemberPerSecond: Double { Double(memberBytes.max() ?? 0) / measuredSeconds }
        var framesPerMemberPerSecond: Double {
            memberFrames.isEmpty ? 0 : Double(memberFrames.reduce(0, +)) / Double(memberFrames.count) / measuredSeconds
        }
        var cpuPerVersionMicroseconds: Double { versionsMeasured == 0 ? 0 : serverCPUSeconds / Double(versionsMeasured) * 1e6 }
        var versionsPerSecond: Double { Double(versionsMeasured) / measuredSeconds }

        func json(bench: WindowsBenchmark) -> [(String, JSONValue)] {
            [
                ("benchmark", "windows"), ("variant", .string(variant.rawValue)), ("round", .int(round)), ("loadavg", .string(loadAverage)),
                ("items", .int(bench.items)), ("members", .int(bench.members)), ("window_rows", .int(bench.window)),
                ("window_kind", .string(bench.windowKind)), ("payload_bytes", .int(bench.payloadBytes)), ("rate_ops_per_s", .number(bench.rate, digits: 0)),
                ("ops_per_write", .int(bench.opsPerWrite)), ("fill_s", .number(fillSeconds, digits: 1)),
                ("snapshot_bytes", .int(snapshotBytes)), ("snapshot_s", .number(snapshotSeconds, digits: 2)),
                ("join_s", .number(joinSeconds, digits: 2)),
                ("join_bytes_mean", .number(joinMean, digits: 1)), ("join_bytes_max", .int(joinMax)),
                ("join_bytes_min", .int(joinBytes.min() ?? 0)),
                ("join_fraction_of_snapshot", .number(joinMean / Double(max(1, snapshotBytes)), digits: 6)),
                ("measured_s", .number(measuredSeconds, digits: 1)),
                ("versions_per_s", .number(versionsPerSecond, digits: 1)),
                ("writer_sent", .int(Int(writer.sent))), ("writer_throttled", .bool(writer.throttled)),
                ("writer_acks", .int(Int(writer.acks))), ("writer_failures", .int(Int(writer.failures))),
                ("writer_first_failure", writer.firstFailure.map { JSONValue.string($0) } ?? .null),
                ("writer_ack_p99_ms", .number(writer.latencies.quantile(0.99), digits: 2)),
                ("bytes_per_member_per_s", .number(bytesPerMemberPerSecond, digits: 1)),
                ("bytes_per_member_per_s_max", .number(maxBytesPerMemberPerSecond, digits: 1)),
                ("frames_per_member_per_s", .number(framesPerMemberPerSecond, digits: 2)),
                ("bytes_per_frame", .number(generator.framesInWindow == 0 ? 0 : Double(generator.bytesInWindow) / Double(generator.framesInWindow), digits: 1)),
                ("server_cpu", .number(serverCPUSeconds / measuredSeconds, digits: 3)),
                ("server_cpu_us_per_version", .number(cpuPerVersionMicroseconds, digits: 1)),
                ("generator_cpu", .number(generator.cpuSeconds / measuredSeconds, digits: 3)),
                ("drain_s", .number(drainSeconds, digits: 3)),
                ("closed", .int(Int(generator.closed))), ("failures", .int(Int(generator.failures))),
                ("first_failure", generator.firstFailure.map { JSONValue.string($0) } ?? .null),
                ("rss_filled_mb", .number(Double(rssFilled) / 1_048_576, digits: 1)),
                ("rss_joined_mb", .number(Double(rssJoined) / 1_048_576, digits: 1)),
                ("rss_peak_mb", .number(Double(rssPeak) / 1_048_576, digits: 1)),
                ("rss_after_mb", .number(Double(rssAfter) / 1_048_576, digits: 1)),
            ]
        }

        func describe() -> String {
            var line =
                "\(variant.rawValue) (round \(round + 1), load \(loadAverage)): fill \(Bench.decimal(fillSeconds, digits: 1)) s; SNAPSHOT \(snapshotBytes) B; join \(Bench.decimal(joinMean, digits: 0)) B mean, \(joinMax) B max (\(Bench.decimal(joinMean / Double(max(1, snapshotBytes)) * 100, digits: 4))% of the SNAPSHOT) in \(Bench.decimal(joinSeconds, digits: 1)) s; \(Bench.decimal(versionsPerSecond, digits: 0)) versions/s; per member \(Bench.decimal(bytesPerMemberPerSecond, digits: 0)) B/s (max \(Bench.decimal(maxBytesPerMemberPerSecond, digits: 0))), \(Bench.decimal(framesPerMemberPerSecond, digits: 1)) frames/s; daemon CPU \(Int((serverCPUSeconds / measuredSeconds * 100).rounded()))%, \(Bench.decimal(cpuPerVersionMicroseconds, digits: 0)) µs per version; generator CPU \(Int((generator.cpuSeconds / measuredSeconds * 100).rounded()))%; drain \(Bench.decimal(drainSeconds, digits: 2)) s; RSS filled \(rssFilled >> 20), joined \(rssJoined >> 20), peak \(rssPeak >> 20) MiB; writer ACK p99 \(Bench.decimal(writer.latencies.quantile(0.99), digits: 1)) ms\(writer.throttled ? " (BEHIND: the writer reached --max-in-flight)" : "")"
            if generator.failures > 0 || generator.closed > 0 || writer.failures > 0 {
                line +=
                    "; FAILURES members \(generator.failures) (\(generator.firstFailure ?? "")), closed \(generator.closed), writer \(writer.failures) (\(writer.firstFailure ?? ""))"
            }
            return line
        }
    }

    // MARK: Wire helpers

    enum WindowsWire {
        /// A LEB128 varint at `offset`, moving it past; 0 past the end.
        @inline(__always)
        static func varint(_ bytes: UnsafeBufferPointer<UInt8>, _ offset: inout Int) -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while offset < bytes.count {
                let b = bytes[offset]
                offset += 1
                value |= UInt64(b & 0x7F) << shift
                if b < 0x80 { return value }
                shift += 7
            }
            return value
        }

        /// The room version a frame carries (length prefix included), or nil: DIFF (room, epoch,
        /// version), WINDOW_DIFF and WINDOW_STATE (request id, room, epoch, version), CATCHUP
        /// (request id, room, epoch, from, to: the `to`), ACK (request id, epoch, version).
        static func version(_ frame: UnsafeBufferPointer<UInt8>) -> UInt64? {
            var offset = 5
            switch frame[4] {
            case MessageType.diff.rawValue:
                break
            case MessageType.windowDiff.rawValue, MessageType.windowState.rawValue, MessageType.catchup.rawValue:
                _ = varint(frame, &offset)
            case MessageType.ack.rawValue:
                _ = varint(frame, &offset)
                _ = varint(frame, &offset)
                return varint(frame, &offset)
            default:
                return nil
            }
            let roomLength = Int(varint(frame, &offset))
            offset += roomLength
            _ = varint(frame, &offset)  // epoch
            let version = varint(frame, &offset)
            if frame[4] == MessageType.catchup.rawValue { return varint(frame, &offset) }
            return version
        }

        static func decode(_ frame: UnsafeBufferPointer<UInt8>) -> Message? {
            try? FrameDecoder.decode(frame: Array(frame), limits: BenchFrameReader.limits, accepting: .server)
        }
    }

    /// SplitMix64: the same sequence for the same seed, in every run.
    struct WindowsRandom {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    }

    // MARK: The writer

    /// Writes the schedule on a thread and a connection of its own: MUTATEs due at a steady rate,
    /// pipelined, their ACKs read between sends. Keeps the ids of the room's items (a swap-remove
    /// array: places are named by anchors, never by index).
    final class WindowsWriter: @unchecked Sendable {
        struct Totals {
            var sent: UInt64 = 0
            var acks: UInt64 = 0
            var failures: UInt64 = 0
            var firstFailure: String?
            var finalVersion: UInt64 = 0
            /// The writes in flight reached --max-in-flight: the daemon was behind the schedule.
            var throttled = false
            var latencies = Latencies()  // send → ACK, ms
        }

        private let finished = DispatchSemaphore(value: 0)
        private let acked = Atomic<UInt64>(0)
        /// Written by the thread only, read after `finish()`.
        private var totals = Totals()

        /// The version of the last ACK the writer read.
        var ackedVersion: UInt64 { acked.load(ordering: .acquiring) }

        init(bench: WindowsBenchmark, host: String, port: Int, start: UInt64, end: UInt64) {
            let thread = Thread { [self] in
                run(bench: bench, host: host, port: port, start: start, end: end)
                finished.signal()
            }
            thread.start()
        }

        /// Waits for the thread (it stops after the window, once every write is ACKed).
        func finish() -> Totals {
            finished.wait()
            return totals
        }

        private func run(bench: WindowsBenchmark, host: String, port: Int, start: UInt64, end: UInt64) {
            let fd = BenchSystem.connectTCP(host: host, port: port)
            defer { close(fd) }
            var reader = BenchFrameReader(fd: fd)
            BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "windows-bench writer", version: ProtocolVersion.current))
            reader.expect(.welcome, context: "the writer's HELLO")
            BenchSystem.setNonBlocking(fd)

            var random = WindowsRandom(state: bench.seed ^ 0xA11CE)
            var ids = (0..<bench.items).map { WindowsBenchmark.itemID($0) }
            var nextID = bench.items
            var updates: UInt64 = 0
            let period = 1e9 * Double(bench.opsPerWrite) / bench.rate
            var sendTimes: [UInt64] = []  // of the writes not yet ACKed, in order
            var head = 0
            var buffer: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65536)

            func op() -> SnapshotOperation {
                switch random.below(4) {
                case 0:
                    let id = WindowsBenchmark.itemID(nextID)
                    nextID += 1
                    let anchor = ids[random.below(ids.count)]
                    ids.append(id)
                    return .insertItems([SnapshotElement(id, payload: WindowsBenchmark.payload(UInt64(nextID), bytes: bench.payloadBytes))], .after(anchor))
                case 1 where ids.count > 2:
                    let i = random.below(ids.count)
                    let id = ids[i]
                    ids.swapAt(i, ids.count - 1)
                    ids.removeLast()
                    return .deleteItems([id])
                case 2:
                    let i = random.below(ids.count)
                    var j = random.below(ids.count - 1)
                    if j >= i { j += 1 }
                    return .moveItem(ids[i], .after(ids[j]))
                default:
                    updates += 1
                    let id = ids[random.below(ids.count)]
                    return .updateItems([SnapshotElement(id, payload: WindowsBenchmark.payload(updates, bytes: bench.payloadBytes))], .reload)
                }
            }

            func readAcks() {
                while true {
                    let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
                    if n <= 0 {
                        if n == 0 { BenchSystem.die("windows: the daemon closed the writer's connection") }
                        return
                    }
                    buffer.append(contentsOf: chunk[0..<n])
                    var offset = 0
                    buffer.withUnsafeBufferPointer { bytes in
                        while bytes.count - offset >= 5 {
                            let length =
                                Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
                            guard bytes.count - offset >= 4 + length else { break }
                            let frame = UnsafeBufferPointer(rebasing: bytes[offset..<(offset + 4 + length)])
                            offset += 4 + length
                            switch frame[4] {
                            case MessageType.ack.rawValue:
                                totals.acks += 1
                                if let version = WindowsWire.version(frame) {
                                    totals.finalVersion = version
                                    acked.store(version, ordering: .releasing)
                                }
                                if head < sendTimes.count {
                                    totals.latencies.add(Double(BenchSystem.nowNs() - sendTimes[head]) / 1e6)
                                    head += 1
                                }
                            case MessageType.reject.rawValue, MessageType.error.rawValue:
                                totals.failures += 1
                                if head < sendTimes.count { head += 1 }
                                if totals.firstFailure == nil {
                                    totals.firstFailure = WindowsWire.decode(frame).flatMap { BenchFrames.describeFailure($0) } ?? "?"
                                }
                            case MessageType.ping.rawValue:
                                if case .ping(let nonce)? = WindowsWire.decode(frame) {
                                    BenchSystem.writeAll(fd, BenchFrames.encoder.encode(.pong(nonce: nonce)))
                                }
                            default:
                                break
                            }
                        }
                    }
                    buffer.removeFirst(offset)
                }
            }

            func send(_ ops: [SnapshotOperation]) {
                totals.sent += 1
                sendTimes.append(BenchSystem.nowNs())
                BenchSystem.writeAll(fd, BenchFrames.mutate(requestID: totals.sent, room: WindowsBenchmark.room, ops: ops))
            }

            var k: UInt64 = 0
            while true {
                let now = BenchSystem.nowNs()
                if now >= end { break }
                // At most --max-in-flight writes unanswered: past it the daemon is behind, and the
                // writes due wait (the schedule slips; `sent` says how far).
                while start + UInt64(Double(k) * period) <= now && sendTimes.count - head < bench.maxInFlight {
                    send((0..<bench.opsPerWrite).map { _ in op() })
                    k += 1
                }
                if sendTimes.count - head >= bench.maxInFlight { totals.throttled = true }
                let next = start + UInt64(Double(k) * period)
                let waitMs = next > now ? Int32(min(5, (next - now) / 1_000_000)) : 0
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&p, 1, waitMs)
                readAcks()
            }
            // The last write: one insert, a count change that reaches every member.
            let last = WindowsBenchmark.itemID(nextID)
            send([.insertItems([SnapshotElement(last, payload: WindowsBenchmark.payload(0, bytes: bench.payloadBytes))], .after(ids[0]))])
            let deadline = BenchSystem.nowNs() + 60_000_000_000
            while totals.acks + totals.failures < totals.sent {
                if BenchSystem.nowNs() > deadline {
                    BenchSystem.printError("windows: the writer's last ACKs took over 60 s; \(totals.sent - totals.acks) unanswered\n")
                    totals.finalVersion = .max
                    return
                }
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&p, 1, 10)
                readAcks()
            }
        }
    }

    // MARK: The members

    /// Every member connection, on one epoll; single-threaded.
    struct WindowsGenerator {
        struct Totals {
            var bytesInWindow: UInt64 = 0
            var framesInWindow: UInt64 = 0
            var failures: UInt64 = 0
            var firstFailure: String?
            var closed: UInt64 = 0
            var peakRSS = 0
            var cpuSeconds: Double = 0  // this thread, over the window
        }

        let bench: WindowsBenchmark
        let variant: WindowsBenchmark.Variant
        let host: String
        let port: Int
        let connections = BenchConnections()
        /// Per member: the bytes of its answer to WINDOW or JOIN, its bytes and frames in the
        /// window, the last version a frame brought it.
        var joinBytes: [Int] = []
        var windowBytes: [UInt64] = []
        var windowFrames: [UInt64] = []
        var lastVersion: [UInt64] = []
        var joined = 0
        var welcomes = 0
        var totals = Totals()
        var inWindow = false

        init(bench: WindowsBenchmark, variant: WindowsBenchmark.Variant, host: String, port: Int) {
            self.bench = bench
            self.variant = variant
            self.host = host
            self.port = port
        }

        /// Closes every connection with a reset.
        func tearDown() { connections.tearDown() }

        /// HELLO and WINDOW (windowed) or JOIN resuming at `position` (whole) from every member,
        /// 64 connections at a time, pipelined, then their answers.
        mutating func connectAll(position: RoomPosition) {
            var random = WindowsRandom(state: bench.seed)
            let before = UInt64((bench.window - 1) / 2)
            let after = UInt64(bench.window - 1) - before
            let total = bench.members
            var index = 0
            while index < total {
                let upper = min(total, index + 64)
                for _ in index..<upper {
                    let fd = BenchSystem.connectTCP(host: host, port: port)
                    connections.add(fd)
                    joinBytes.append(0)
                    windowBytes.append(0)
                    windowFrames.append(0)
                    lastVersion.append(0)
                    var frame = BenchFrames.hello(clientName: "windows-bench member", version: ProtocolVersion.current)
                    if variant.isWindowed {
                        let range: SectionWindow.Range =
                            bench.windowKind == "first"
                            ? .first(UInt64(bench.window))
                            : .around(anchor: WindowsBenchmark.itemID(random.below(bench.items)), before: before, after: after)
                        frame += BenchFrames.encoder.encode(
                            .window(requestID: 1, room: WindowsBenchmark.room, window: [SectionWindow(section: WindowsBenchmark.section, range: range)]))
                    } else {
                        frame += BenchFrames.encoder.encode(.join(requestID: 1, room: WindowsBenchmark.room, resume: position, chain: .unknown))
                    }
                    BenchSystem.writeAll(fd, frame)
                }
                pump(until: { $0.joined >= upper }, context: "joining \(upper) of \(total)")
                index = upper
            }
        }

        /// Handles events until `done`, for at most 120 s.
        mutating func pump(until done: (Self) -> Bool, context: String) {
            let deadline = BenchSystem.nowNs() + 120_000_000_000
            while !done(self) {
                if BenchSystem.nowNs() > deadline { BenchSystem.die("windows: \(context) took over 120 s (\(totals.firstFailure ?? "no failure"))") }
                if totals.failures > 0 { BenchSystem.die("windows: \(context): \(totals.firstFailure ?? "?")") }
                poll(timeoutNs: 10_000_000)
            }
        }

        /// Reads every member until `windowEnd`, counting from `windowStart`.
        mutating func load(windowStart: UInt64, windowEnd: UInt64, atWindowStart: () -> Void, pid: Int32) {
            var nextSample = BenchSystem.nowNs()
            var cpuAtStart = 0.0
            while true {
                let now = BenchSystem.nowNs()
                if now >= windowEnd { break }
                if !inWindow && now >= windowStart {
                    atWindowStart()
                    inWindow = true
                    cpuAtStart = Bench.threadCPUTime()
                }
                if now >= nextSample {
                    totals.peakRSS = max(totals.peakRSS, BenchSystem.residentBytes(pid: pid) ?? 0)
                    nextSample += 1_000_000_000
                }
                poll(timeoutNs: 5_000_000)
            }
            totals.cpuSeconds = (Bench.threadCPUTime() - cpuAtStart) / 1e9
            inWindow = false
        }

        /// Reads until every member has a frame at `version` or later (or 60 s pass); the
        /// seconds since `since`.
        mutating func drain(to version: UInt64, since: UInt64) -> Double {
            let deadline = BenchSystem.nowNs() + 60_000_000_000
            while lastVersion.indices.contains(where: { connections.isOpen($0) && lastVersion[$0] < version }) {
                if BenchSystem.nowNs() > deadline {
                    let behind = lastVersion.indices.filter { connections.isOpen($0) && lastVersion[$0] < version }.count
                    BenchSystem.printError("windows: \(behind) members short of version \(version) 60 s after the writes\n")
                    return .infinity
                }
                poll(timeoutNs: 2_000_000)
            }
            return Double(BenchSystem.nowNs() - since) / 1e9
        }

        mutating func poll(timeoutNs: UInt64) {
            connections.poll(
                timeoutNs: timeoutNs, frame: { i, frame, _ in handle(i, frame: frame) },
                closed: { i in
                    totals.closed += 1
                    if totals.firstFailure == nil { totals.firstFailure = "the daemon closed member \(i)" }
                })
        }

        mutating func handle(_ i: Int, frame: UnsafeBufferPointer<UInt8>) {
            let type = frame[4]
            switch type {
            case MessageType.diff.rawValue, MessageType.windowDiff.rawValue:
                if inWindow {
                    windowBytes[i] += UInt64(frame.count)
                    windowFrames[i] += 1
                    totals.bytesInWindow += UInt64(frame.count)
                    totals.framesInWindow += 1
                }
                if let version = WindowsWire.version(frame) { lastVersion[i] = max(lastVersion[i], version) }
            case MessageType.windowState.rawValue, MessageType.catchup.rawValue:
                joinBytes[i] = frame.count
                joined += 1
                if let version = WindowsWire.version(frame) { lastVersion[i] = max(lastVersion[i], version) }
            case MessageType.snapshot.rawValue:
                totals.failures += 1
                if totals.firstFailure == nil { totals.firstFailure = "member \(i) got a SNAPSHOT (\(frame.count) B), not the answer expected" }
            case MessageType.welcome.rawValue: welcomes += 1
            case MessageType.ping.rawValue:
                if case .ping(let nonce)? = WindowsWire.decode(frame) { connections.send(i, BenchFrames.encoder.encode(.pong(nonce: nonce))) }
            case MessageType.reject.rawValue, MessageType.error.rawValue:
                totals.failures += 1
                if totals.firstFailure == nil {
                    totals.firstFailure = "member \(i): " + (WindowsWire.decode(frame).flatMap { BenchFrames.describeFailure($0) } ?? "?")
                }
            default:
                break
            }
        }
    }
#endif
