// `snapsync-bench presence`: what presence (protocol version 4, PROTOCOL.md §9 "Presence")
// costs a large room and everybody else on the daemon (docs/benchmarks.md, "Presence").
//
// One room of --members members (version 4 connections that JOINed it), then a loaded phase:
// --churn joins and --churn leaves a second by 2 × --churn extra connections (half of them
// members at the start; each second one half joins while the other leaves, each spread evenly
// over the second), and --cursors members setting a --cursor-bytes state with SET_PRESENCE at
// --cursor-hz. A bystander, on a thread and a connection of its own, writes (MUTATE) to another
// room at --bystander-rate and records write → ACK. Two variants, each on a fresh daemon, taking
// turns (--repeat rounds):
// - `presence`: every one of the --members members watches the room's presence
//   (PRESENCE_WATCH) and the cursors set their state;
// - `none`: the same members, joins and leaves, but nobody watches and nobody sets a state.
// Measured over --duration seconds after --warmup seconds of load: PRESENCE_DIFF bytes and frames
// per watcher per second (length prefix included), the smallest gap between two PRESENCE_DIFFs
// of one watcher, the daemon's STATS (loop_pass_p99_us / loop_pass_max_us, which cover the last
// 10–20 s: --duration 20 keeps them inside the loaded phase), its CPU and RSS, and the
// bystander's write latencies.
//
// Session ids ascend in connection order, so the members connected first have the smallest
// ids: the cursors are the first --cursors members, hence in the view (the --presence-view
// smallest ids) when --cursors ≤ the view; the churners connect last, so their joins and leaves
// move only the count that each PRESENCE_DIFF carries.
//
// The generator is one thread (epoll, level-triggered, non-blocking sockets); frames are cut by
// their length prefix and counted by type byte, and only failures (REJECT, ERROR) are decoded.
#if canImport(Glibc)
    import ArgumentParser
    import CEpoll
    import Dispatch
    import Foundation
    import Glibc
    import Synchronization
    import SnapSyncModel
    import SnapSyncWire

    struct PresenceBenchmark: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "presence",
            abstract: "Presence in one large room: bytes and frames per watcher, the daemon's loop, a bystander's writes; with and without presence.",
            discussion: """
                Each run starts a fresh snapsyncd (--max-connections raised to the run's \
                connections), fills one room with --members version 4 members, then loads it for \
                --warmup + --duration seconds: --churn joins and --churn leaves a second (extra \
                connections), --cursors members setting a --cursor-bytes state at --cursor-hz \
                (variant `presence` only, where every member also watches the room's presence), \
                and a bystander writing to another room at --bystander-rate. Variants take turns, \
                --repeat rounds. Prints one line per run (JSON with --json), then the comparison.
                """)

        enum Variant: String, CaseIterable {
            case presence
            case without = "none"
        }

        @OptionGroup var launch: DaemonOptions

        @Option(help: "Members of the room (each a connection that JOINs it; all watch its presence in the `presence` variant).")
        var members: Int = 10_000

        @Option(help: "Joins, and leaves, a second during the loaded phase (2 × this many extra connections).")
        var churn: Int = 1_000

        @Option(help: "Members setting their presence state (the first connected: the smallest ids).")
        var cursors: Int = 100

        @Option(name: .customLong("cursor-hz"), help: "SET_PRESENCE per cursor per second.")
        var cursorHz: Double = 30

        @Option(help: "Bytes of each cursor state.")
        var cursorBytes: Int = 24

        @Option(help: "The bystander's writes per second (MUTATE of another room, one at a time).")
        var bystanderRate: Double = 100

        @Option(help: "snapsyncd's --presence-interval, in milliseconds (the bound is computed from it).")
        var presenceIntervalMs: Int = 50

        @Option(help: "snapsyncd's --presence-view (the bound is computed from it).")
        var presenceView: Int = 100

        @Option(help: "Seconds of load before the measured window.")
        var warmup: Double = 2

        @Option(help: "Seconds measured. STATS' loop pass figures cover the last 10–20 s: at 20 or more they are all from the loaded phase.")
        var duration: Double = 20

        @Option(name: .customLong("repeat"), help: "Rounds; each runs every variant once, in turn.")
        var repeatCount: Int = 2

        @Option(help: "Variants, comma-separated, in the order each round runs them: presence, none.")
        var variants: String = "presence,none"

        @OptionGroup var output: JSONOutputOption

        func validate() throws {
            guard members >= 1, churn >= 0, cursors >= 0, cursors <= members else {
                throw ValidationError("--members must be at least 1, --churn and --cursors not negative, --cursors at most --members")
            }
            guard cursorHz > 0, cursorBytes >= 8, bystanderRate > 0 else {
                throw ValidationError("--cursor-hz and --bystander-rate must be positive, --cursor-bytes at least 8")
            }
            guard duration > 0, warmup >= 0, repeatCount >= 1, presenceIntervalMs >= 1, presenceView >= 1 else {
                throw ValidationError("--duration, --repeat, --presence-interval-ms and --presence-view must be positive, --warmup not negative")
            }
            guard parsedVariants != nil else { throw ValidationError("--variants takes presence and/or none, comma-separated") }
        }

        var parsedVariants: [Variant]? {
            let list = variants.split(separator: ",").map { Variant(rawValue: $0.trimmingCharacters(in: .whitespaces)) }
            return list.isEmpty || list.contains(nil) ? nil : list.compactMap { $0 }
        }

        /// Connections of one run: members, churners, the control connection, the bystander.
        var connections: Int { members + 2 * churn + 2 }

        func run() throws {
            signal(SIGPIPE, SIG_IGN)
            // The bench holds every client socket; the daemon, started from here, inherits the
            // limit and needs as many (it raises its own soft limit to --max-connections too).
            BenchSystem.raiseFileLimit(atLeast: connections + 256)
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            let binary = ServerBinaries.daemon(explicit: launch.binary.serverBinary)
            let order = parsedVariants!
            if !output.json {
                print(
                    "snapsync-bench presence: \(members) members, \(churn) joins + \(churn) leaves/s, \(cursors) cursors × \(Bench.decimal(cursorHz, digits: 1)) Hz × \(cursorBytes) B, bystander \(Bench.decimal(bystanderRate, digits: 0)) writes/s to another room; \(Bench.decimal(warmup, digits: 1)) s warm-up, \(Bench.decimal(duration, digits: 1)) s measured; open files \(limit.rlim_cur); \(cpuCount) CPUs, not pinned"
                )
            }
            var runs: [Variant: [PresenceRunResult]] = [:]
            for round in 0..<repeatCount {
                for variant in order {
                    let result = runOnce(variant: variant, binary: binary, round: round)
                    runs[variant, default: []].append(result)
                    if output.json { Bench.printJSON(result.json(bench: self)) } else { print(result.describe(bench: self)) }
                    BenchSystem.sleepMs(500)
                }
            }
            if !output.json { for line in summary(runs) { print(line) } }
        }

        var cpuCount: Int { BenchSystem.onlineCPUs }

        // MARK: The bound

        /// The interval the daemon uses for a room of `watchers` watchers (Hub.presenceInterval).
        func intervalMs(watchers: Int) -> Double {
            let steps = max(1, (watchers + 999) / 1000)
            return min(1000, Double(presenceIntervalMs * steps))
        }

        /// The coalescing rule's bounds for this load, in bytes per watcher per second: at most
        /// 1 s ÷ interval frames, each of at most `presence_view` changes. `any`: every change
        /// the largest one this load's members can make (a `joined` with their principal and a
        /// cursor-sized state); `state`: every change a cursor's state (what this load's view
        /// sees once the members are in). Sizes are encoded with the codec, ids as large as
        /// the run's.
        func bounds(room: String) -> (framesPerSecond: Double, anyFrameBytes: Int, stateFrameBytes: Int) {
            let framesPerSecond = 1000 / intervalMs(watchers: members)
            let count = UInt64(connections)
            let state = [UInt8](repeating: 0xFF, count: cursorBytes)
            let id = UInt64(connections)  // at least as many varint bytes as any member's id
            let joined = (0..<presenceView).map { _ in
                PresenceChange.joined(
                    PresenceMember(memberID: id, principal: Self.memberName, joinedAt: UInt64(Date().timeIntervalSince1970 * 1000), state: state))
            }
            let states = (0..<presenceView).map { _ in PresenceChange.state(memberID: id, state: state) }
            let any = BenchFrames.encoder.encode(.presenceDiff(room: room, count: count, changes: joined)).count
            let stateOnly = BenchFrames.encoder.encode(.presenceDiff(room: room, count: count, changes: states)).count
            return (framesPerSecond, any, stateOnly)
        }

        static let memberName = "pm"
        static let room = "p"
        static let bystanderRoom = "b"

        // MARK: One run

        func runOnce(variant: Variant, binary: String, round: Int) -> PresenceRunResult {
            let arguments =
                launch.arguments + [
                    "--max-connections", String(connections + 64), "--presence-interval", "\(presenceIntervalMs)ms",
                    "--presence-view", String(presenceView),
                ]
            let server = ServerProcess.startDaemon(binary: binary, arguments: arguments, cpu: nil)
            defer { server.stop() }
            let loadAverage = BenchSystem.readFile("/proc/loadavg").map { String($0.split(separator: " ").prefix(3).joined(separator: " ")) } ?? "?"

            // The control connection: the rooms, and STATS.
            let control = BenchSystem.connectTCP(host: server.host, port: server.port)
            defer { close(control) }
            var controlReader = BenchFrameReader(fd: control)
            BenchSystem.writeAll(control, BenchFrames.hello(clientName: "presence-bench control", version: ProtocolVersion.current))
            controlReader.expect(.welcome, context: "the control connection's HELLO")
            let filler = [UInt8](repeating: UInt8(ascii: "x"), count: 16)
            BenchSystem.writeAll(control, BenchFrames.createLayout(requestID: 1, room: Self.room, payload: filler))
            controlReader.expect(.ack, context: "creating room \(Self.room)")
            BenchSystem.writeAll(control, BenchFrames.createLayout(requestID: 2, room: Self.bystanderRoom, payload: filler))
            controlReader.expect(.ack, context: "creating room \(Self.bystanderRoom)")

            var generator = PresenceGenerator(bench: self, variant: variant, host: server.host, port: server.port)
            defer { generator.tearDown() }
            let setupStart = BenchSystem.nowNs()
            generator.connectAll()
            if variant == .presence { generator.watchAll() }
            let setupSeconds = Double(BenchSystem.nowNs() - setupStart) / 1e9
            let rssBefore = BenchSystem.residentBytes(pid: server.pid) ?? 0

            // The loaded phase: the bystander on its own thread, the generator on this one.
            let t0 = BenchSystem.nowNs() + 50_000_000
            let windowStart = t0 + UInt64(warmup * 1e9)
            let windowEnd = windowStart + UInt64(duration * 1e9)
            let bystander = PresenceBystander(
                host: server.host, port: server.port, rate: bystanderRate, start: t0, windowStart: windowStart, windowEnd: windowEnd)
            var statsBefore: [String: UInt64] = [:]
            var cpuBefore: UInt64 = 0
            generator.load(
                t0: t0, windowStart: windowStart, windowEnd: windowEnd,
                atWindowStart: {
                    statsBefore = ChurnSampler.stats(fd: control, reader: &controlReader)
                    cpuBefore = BenchSystem.cpuTicks(pid: server.pid) ?? 0
                },
                pid: server.pid)
            let cpuAfter = BenchSystem.cpuTicks(pid: server.pid) ?? 0
            let statsAfter = ChurnSampler.stats(fd: control, reader: &controlReader)
            let latencies = bystander.finish()
            let rssAfter = BenchSystem.residentBytes(pid: server.pid) ?? 0
            if server.hasExited { BenchSystem.die("snapsyncd exited during the \(variant.rawValue) run; its log: \(server.log)") }

            var result = PresenceRunResult(variant: variant, round: round, loadAverage: loadAverage)
            result.setupSeconds = setupSeconds
            result.measuredSeconds = duration
            result.generator = generator.totals
            result.watchers = variant == .presence ? members : 0
            result.bystander = latencies
            result.statsBefore = statsBefore
            result.statsAfter = statsAfter
            result.serverCPU = Double(cpuAfter &- cpuBefore) / BenchSystem.ticksPerSecond / duration
            result.rssBefore = rssBefore
            result.rssAfter = rssAfter
            result.rssPeak = max(generator.totals.peakRSS, rssAfter)
            return result
        }

        // MARK: Output

        func summary(_ runs: [Variant: [PresenceRunResult]]) -> [String] {
            var lines: [String] = []
            let (framesPerSecond, anyBytes, stateBytes) = bounds(room: Self.room)
            lines.append(
                "bound (coalescing rule): interval \(Bench.decimal(intervalMs(watchers: members), digits: 0)) ms for \(members) watchers → ≤ \(Bench.decimal(framesPerSecond, digits: 2)) PRESENCE_DIFF/s per watcher; ≤ \(presenceView) changes each: ≤ \(Int(framesPerSecond * Double(anyBytes))) B/s per watcher whatever the members do (\(anyBytes) B frames of `joined` entries), ≤ \(Int(framesPerSecond * Double(stateBytes))) B/s for this load's view (\(stateBytes) B frames of \(cursorBytes) B states)"
            )
            guard let with = runs[.presence], let without = runs[.without], !with.isEmpty, !without.isEmpty else { return lines }
            func range(_ values: [Double], _ digits: Int) -> String {
                let lo = values.min()!, hi = values.max()!
                return lo == hi ? Bench.decimal(lo, digits: digits) : "\(Bench.decimal(lo, digits: digits))–\(Bench.decimal(hi, digits: digits))"
            }
            let p99With = with.map { $0.bystander.quantile(0.99) }
            let p99Without = without.map { $0.bystander.quantile(0.99) }
            let medianWith = p99With.sorted()[p99With.count / 2]
            let worstWith = p99With.max()!
            let bestWithout = p99Without.min()!
            let medianWithout = p99Without.sorted()[p99Without.count / 2]
            lines.append(
                "bystander p99 with presence \(range(p99With, 2)) ms, without \(range(p99Without, 2)) ms: ratio of medians \(Bench.decimal(medianWith / medianWithout, digits: 2))× (worst with / best without \(Bench.decimal(worstWith / bestWithout, digits: 2))×; target ≤ 2×)"
            )
            let bytes = with.map { $0.bytesPerWatcherPerSecond }
            lines.append(
                "presence bytes per watcher per second \(range(bytes, 0)) (bound \(Int(framesPerSecond * Double(stateBytes))) for this load, \(Int(framesPerSecond * Double(anyBytes))) for any load)"
            )
            return lines
        }
    }

    /// What one run measured.
    struct PresenceRunResult {
        var variant: PresenceBenchmark.Variant
        var round: Int
        var loadAverage: String
        var setupSeconds: Double = 0
        var measuredSeconds: Double = 0
        var watchers = 0
        var generator = PresenceGenerator.Totals()
        var bystander = Latencies()
        var statsBefore: [String: UInt64] = [:]
        var statsAfter: [String: UInt64] = [:]
        var serverCPU: Double = 0
        var rssBefore = 0
        var rssAfter = 0
        var rssPeak = 0

        func delta(_ name: String) -> UInt64 { (statsAfter[name] ?? 0) &- (statsBefore[name] ?? 0) }

        var bytesPerWatcherPerSecond: Double {
            watchers == 0 ? 0 : Double(generator.diffBytes) / Double(watchers) / measuredSeconds
        }
        var framesPerWatcherPerSecond: Double {
            watchers == 0 ? 0 : Double(generator.diffFrames) / Double(watchers) / measuredSeconds
        }
        /// Presence changes the clients made in the window: states accepted, joins, leaves.
        var changesMade: UInt64 { generator.cursorAcks + generator.churnJoins + generator.churnLeaves }
        /// Bytes each watcher received per change the members made.
        var bytesPerChangePerWatcher: Double {
            changesMade == 0 || watchers == 0 ? 0 : Double(generator.diffBytes) / Double(watchers) / Double(changesMade)
        }

        func json(bench: PresenceBenchmark) -> [(String, JSONValue)] {
            let (framesPerSecond, anyBytes, stateBytes) = bench.bounds(room: PresenceBenchmark.room)
            return [
                ("benchmark", "presence"), ("variant", .string(variant.rawValue)), ("round", .int(round)),
                ("loadavg", .string(loadAverage)), ("members", .int(bench.members)), ("watchers", .int(watchers)),
                ("churn_per_s", .int(bench.churn)), ("cursors", .int(bench.cursors)), ("cursor_hz", .decimal(bench.cursorHz, digits: 2)),
                ("cursor_bytes", .int(bench.cursorBytes)), ("setup_s", .number(setupSeconds, digits: 1)),
                ("measured_s", .number(measuredSeconds, digits: 1)),
                ("presence_diff_bytes_per_watcher_per_s", .number(bytesPerWatcherPerSecond, digits: 1)),
                ("presence_diff_frames_per_watcher_per_s", .number(framesPerWatcherPerSecond, digits: 3)),
                (
                    "presence_diff_bytes_per_frame",
                    .number(generator.diffFrames == 0 ? 0 : Double(generator.diffBytes) / Double(generator.diffFrames), digits: 1)
                ),
                ("min_gap_between_diffs_ms", generator.minGapNs == .max ? .null : .number(Double(generator.minGapNs) / 1e6, digits: 1)),
                ("presence_changes_made", .int(Int(changesMade))),
                ("bytes_per_change_per_watcher", .number(bytesPerChangePerWatcher, digits: 2)),
                ("bound_frames_per_s", .number(framesPerSecond, digits: 2)),
                ("bound_bytes_per_s_any", .int(Int(framesPerSecond * Double(anyBytes)))),
                ("bound_bytes_per_s_states", .int(Int(framesPerSecond * Double(stateBytes)))),
                ("set_presence_acked", .int(Int(generator.cursorAcks))), ("set_presence_refused", .int(Int(generator.cursorBusy))),
                ("joins", .int(Int(generator.churnJoins))), ("leaves", .int(Int(generator.churnLeaves))),
                ("failures", .int(Int(generator.failures))), ("first_failure", generator.firstFailure.map { JSONValue.string($0) } ?? .null),
                ("closed", .int(Int(generator.closed))),
                ("bystander_writes", .int(bystander.count)),
                ("bystander_p50_ms", .number(bystander.quantile(0.5), digits: 3)),
                ("bystander_p99_ms", .number(bystander.quantile(0.99), digits: 3)),
                ("bystander_max_ms", .number(bystander.quantile(1), digits: 3)),
                ("loop_pass_p99_us", .int(Int(statsAfter["loop_pass_p99_us"] ?? 0))),
                ("loop_pass_max_us", .int(Int(statsAfter["loop_pass_max_us"] ?? 0))),
                ("stats_presence_frames_out", .int(Int(delta("presence_frames_out")))),
                ("stats_presence_changes", .int(Int(delta("presence_changes")))),
                ("stats_presence_updates", .int(Int(delta("presence_updates")))),
                ("stats_bytes_out", .int(Int(delta("bytes_out")))),
                ("stats_slow_consumer_disconnects", .int(Int(delta("slow_consumer_disconnects")))),
                ("server_cpu", .number(serverCPU, digits: 3)),
                ("generator_cpu", .number(generator.cpuSeconds / measuredSeconds, digits: 3)),
                ("rss_before_mb", .number(Double(rssBefore) / 1_048_576, digits: 1)),
                ("rss_after_mb", .number(Double(rssAfter) / 1_048_576, digits: 1)),
                ("rss_peak_mb", .number(Double(rssPeak) / 1_048_576, digits: 1)),
            ]
        }

        func describe(bench: PresenceBenchmark) -> String {
            let ms = { (x: Double) in Bench.decimal(x, digits: 2) }
            var line = "\(variant.rawValue) (round \(round + 1), load \(loadAverage)): setup \(Bench.decimal(setupSeconds, digits: 1)) s; "
            if watchers > 0 {
                line +=
                    "\(Bench.decimal(bytesPerWatcherPerSecond, digits: 0)) B and \(Bench.decimal(framesPerWatcherPerSecond, digits: 2)) PRESENCE_DIFF/s per watcher (\(Bench.decimal(Double(generator.diffBytes) / Double(max(1, generator.diffFrames)), digits: 0)) B each, min gap \(generator.minGapNs == .max ? "n/a" : Bench.decimal(Double(generator.minGapNs) / 1e6, digits: 0)) ms), \(Bench.decimal(bytesPerChangePerWatcher, digits: 2)) B per change per watcher; "
            }
            line +=
                "changes \(changesMade) (states \(generator.cursorAcks), refused \(generator.cursorBusy), joins \(generator.churnJoins), leaves \(generator.churnLeaves)); bystander \(bystander.count) writes p50 \(ms(bystander.quantile(0.5))) p99 \(ms(bystander.quantile(0.99))) max \(ms(bystander.quantile(1))) ms; loop pass p99 \(ms(Double(statsAfter["loop_pass_p99_us"] ?? 0) / 1000)) max \(ms(Double(statsAfter["loop_pass_max_us"] ?? 0) / 1000)) ms; server CPU \(Int((serverCPU * 100).rounded()))%, generator CPU \(Int((generator.cpuSeconds / measuredSeconds * 100).rounded()))%; RSS \(rssBefore >> 20) → \(rssAfter >> 20) MiB (peak \(rssPeak >> 20))"
            if generator.failures > 0 || generator.closed > 0 {
                line += "; FAILURES \(generator.failures) (\(generator.firstFailure ?? "")), closed \(generator.closed)"
            }
            return line
        }
    }

    // MARK: The bystander

    /// Writes to the bystander room at a steady rate, one write at a time, on a thread and a
    /// connection of its own; keeps the latencies of writes sent inside the window.
    final class PresenceBystander: @unchecked Sendable {
        private let finished = DispatchSemaphore(value: 0)
        private let stopping = Atomic<Bool>(false)
        /// Written by the thread only, read after `finish()`.
        private var latencies = Latencies()

        init(host: String, port: Int, rate: Double, start: UInt64, windowStart: UInt64, windowEnd: UInt64) {
            let thread = Thread { [self] in
                let fd = BenchSystem.connectTCP(host: host, port: port)
                defer { close(fd) }
                var reader = BenchFrameReader(fd: fd)
                BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "presence-bench bystander"))
                reader.expect(.welcome, context: "the bystander's HELLO")
                let template = BenchFrames.overwriteTemplate(
                    requestID: 9, room: PresenceBenchmark.bystanderRoom, payloadBytes: 16, fill: UInt8(ascii: "b"))
                let period = 1e9 / rate
                var k: UInt64 = 0
                while !stopping.load(ordering: .relaxed) {
                    let due = start + UInt64(Double(k) * period)
                    k += 1
                    var now = BenchSystem.nowNs()
                    if due > now {
                        let wait = due - now
                        var request = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
                        var remaining = timespec()
                        while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
                        now = BenchSystem.nowNs()
                    }
                    if now >= windowEnd { break }
                    BenchSystem.writeAll(fd, template)
                    reader.expect(.ack, context: "the bystander's MUTATE")
                    let took = BenchSystem.nowNs() - now
                    if now >= windowStart { latencies.add(Double(took) / 1e6) }
                }
                finished.signal()
            }
            thread.start()
        }

        /// Waits for the thread (it stops at the window's end); the latencies in ms.
        func finish() -> Latencies {
            finished.wait()
            return latencies
        }
    }

    // MARK: The generator

    /// Every member and churner connection, on one epoll; single-threaded.
    struct PresenceGenerator {
        struct Totals {
            var diffBytes: UInt64 = 0  // PRESENCE_DIFF bytes received by watchers in the window
            var diffFrames: UInt64 = 0
            var minGapNs: UInt64 = .max
            var cursorAcks: UInt64 = 0  // SET_PRESENCE ACKed in the window
            var cursorBusy: UInt64 = 0  // SET_PRESENCE refused (REJECT busy) in the window
            var churnJoins: UInt64 = 0  // JOINs answered in the window
            var churnLeaves: UInt64 = 0  // LEAVEs answered in the window
            var failures: UInt64 = 0  // other REJECTs and ERRORs, whole run
            var firstFailure: String?
            var closed: UInt64 = 0  // connections the daemon closed
            var peakRSS = 0
            var cpuSeconds: Double = 0  // the generator's thread, over the window
        }

        enum Kind { case member, churner }

        let bench: PresenceBenchmark
        let variant: PresenceBenchmark.Variant
        let host: String
        let port: Int
        let connections = BenchConnections()
        var lastDiff: [UInt64] = []
        /// Churner c (index members + c) is a member of the room.
        var churnerJoined: [Bool] = []
        var totals = Totals()
        var inWindow = false
        var welcomes = 0
        var snapshots = 0
        var presences = 0
        var acks = 0

        init(bench: PresenceBenchmark, variant: PresenceBenchmark.Variant, host: String, port: Int) {
            self.bench = bench
            self.variant = variant
            self.host = host
            self.port = port
        }

        /// Closes every connection with a reset.
        func tearDown() { connections.tearDown() }

        func kind(_ i: Int) -> Kind { i < bench.members ? .member : .churner }

        // MARK: Setup

        /// Members (HELLO + JOIN), then the churners: the first half joined, the second half
        /// only said HELLO. 64 connections at a time, pipelined, then their answers.
        mutating func connectAll() {
            let total = bench.members + 2 * bench.churn
            var index = 0
            while index < total {
                let upper = min(total, index + 64)
                for i in index..<upper {
                    let fd = BenchSystem.connectTCP(host: host, port: port)
                    connections.add(fd)
                    lastDiff.append(0)
                    let joins = i < bench.members + bench.churn
                    if kind(i) == .churner { churnerJoined.append(joins) }
                    let hello = BenchFrames.hello(clientName: PresenceBenchmark.memberName, version: ProtocolVersion.current)
                    BenchSystem.writeAll(fd, joins ? hello + BenchFrames.join(requestID: 1, room: PresenceBenchmark.room) : hello)
                }
                let joinsWanted = min(upper, bench.members + bench.churn)
                pump(until: { $0.welcomes >= upper && $0.snapshots >= joinsWanted }, context: "connecting \(upper) of \(total)")
                index = upper
            }
        }

        /// PRESENCE_WATCH from every member, 256 at a time, each answered PRESENCE.
        mutating func watchAll() {
            let watch = BenchFrames.encoder.encode(.presenceWatch(requestID: 2, room: PresenceBenchmark.room, watch: true))
            var index = 0
            while index < bench.members {
                let upper = min(bench.members, index + 256)
                for i in index..<upper { connections.send(i, watch) }
                pump(until: { $0.presences >= upper }, context: "PRESENCE_WATCH \(upper) of \(bench.members)")
                index = upper
            }
        }

        /// Handles events until `done`, for at most 60 s.
        mutating func pump(until done: (Self) -> Bool, context: String) {
            let deadline = BenchSystem.nowNs() + 60_000_000_000
            while !done(self) {
                if BenchSystem.nowNs() > deadline { BenchSystem.die("presence: \(context) took over 60 s (\(totals.firstFailure ?? "no failure"))") }
                poll(timeoutNs: 10_000_000)
            }
        }

        // MARK: Load

        /// The loaded phase from `t0` to `windowEnd`: churn and cursors on their schedules,
        /// every frame read and counted.
        mutating func load(t0: UInt64, windowStart: UInt64, windowEnd: UInt64, atWindowStart: () -> Void, pid: Int32) {
            let churn = bench.churn
            let cursors = variant == .presence ? bench.cursors : 0
            let churnPeriod = churn > 0 ? 1e9 / Double(churn) : 0
            let cursorPeriod = cursors > 0 ? 1e9 / (Double(cursors) * bench.cursorHz) : 0
            var churnEvents: UInt64 = 0
            var cursorEvents: UInt64 = 0
            var nextSample = t0
            var cpuAtStart = 0.0
            var requestID: UInt64 = 100
            var state = [UInt8](repeating: 0, count: bench.cursorBytes)
            while BenchSystem.nowNs() < t0 { poll(timeoutNs: 1_000_000) }
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
                // Churn: event e is second e / churn's k-th pair: one half leaves, the other joins.
                while churn > 0 && t0 + UInt64(Double(churnEvents) * churnPeriod) <= now {
                    let second = Int(churnEvents) / churn
                    let k = Int(churnEvents) % churn
                    let (leaver, joiner) = second % 2 == 0 ? (k, churn + k) : (churn + k, k)
                    requestID += 1
                    if churnerJoined[leaver] {
                        send(bench.members + leaver, BenchFrames.encoder.encode(.leave(requestID: requestID, room: PresenceBenchmark.room)))
                        churnerJoined[leaver] = false
                    }
                    if !churnerJoined[joiner] {
                        send(bench.members + joiner, BenchFrames.join(requestID: requestID, room: PresenceBenchmark.room))
                        churnerJoined[joiner] = true
                    }
                    churnEvents += 1
                }
                // Cursors: event e is cursor e % cursors's state number e / cursors.
                while cursors > 0 && t0 + UInt64(Double(cursorEvents) * cursorPeriod) <= now {
                    let cursor = Int(cursorEvents) % cursors
                    withUnsafeBytes(of: cursorEvents.littleEndian) { for (j, b) in $0.enumerated() { state[j] = b } }
                    requestID += 1
                    send(cursor, BenchFrames.encoder.encode(.setPresence(requestID: requestID, room: PresenceBenchmark.room, state: state)))
                    cursorEvents += 1
                }
                let nextChurn = churn > 0 ? t0 + UInt64(Double(churnEvents) * churnPeriod) : UInt64.max
                let nextCursor = cursors > 0 ? t0 + UInt64(Double(cursorEvents) * cursorPeriod) : UInt64.max
                let next = min(nextChurn, nextCursor, windowEnd, nextSample)
                poll(timeoutNs: next > now ? min(next - now, 5_000_000) : 0)
            }
            totals.cpuSeconds = (Bench.threadCPUTime() - cpuAtStart) / 1e9
            inWindow = false
        }

        /// A small request: written at once (a non-blocking socket whose send buffer is full
        /// waits in writeAll).
        func send(_ i: Int, _ frame: [UInt8]) {
            connections.send(i, frame)
        }

        // MARK: Reading

        mutating func poll(timeoutNs: UInt64) {
            connections.poll(
                timeoutNs: timeoutNs, frame: { i, frame, now in handle(i, type: frame[4], frame: frame, now: now) },
                closed: { i in
                    totals.closed += 1
                    if totals.firstFailure == nil { totals.firstFailure = "the daemon closed connection \(i)" }
                })
        }

        mutating func handle(_ i: Int, type: UInt8, frame: UnsafeBufferPointer<UInt8>, now: UInt64) {
            switch type {
            case MessageType.presenceDiff.rawValue:
                if inWindow {
                    totals.diffBytes += UInt64(frame.count)
                    totals.diffFrames += 1
                    if lastDiff[i] != 0 { totals.minGapNs = min(totals.minGapNs, now - lastDiff[i]) }
                    lastDiff[i] = now
                }
            case MessageType.welcome.rawValue: welcomes += 1
            case MessageType.snapshot.rawValue, MessageType.catchup.rawValue:
                snapshots += 1
                if inWindow && kind(i) == .churner { totals.churnJoins += 1 }
            case MessageType.presence.rawValue: presences += 1
            case MessageType.ack.rawValue:
                acks += 1
                if inWindow {
                    if kind(i) == .churner { totals.churnLeaves += 1 } else { totals.cursorAcks += 1 }
                }
            case MessageType.ping.rawValue:
                if case .ping(let nonce) = decode(frame) { send(i, BenchFrames.encoder.encode(.pong(nonce: nonce))) }
            case MessageType.reject.rawValue, MessageType.error.rawValue:
                let message = decode(frame)
                if case .reject(_, let code, _, _, _) = message, code == ErrorCode.busy.rawValue, kind(i) == .member {
                    if inWindow { totals.cursorBusy += 1 }
                    return
                }
                totals.failures += 1
                if totals.firstFailure == nil { totals.firstFailure = "connection \(i): " + (BenchFrames.describeFailure(message) ?? "?") }
            default:
                break
            }
        }

        func decode(_ frame: UnsafeBufferPointer<UInt8>) -> Message {
            do {
                return try FrameDecoder.decode(frame: Array(frame), limits: BenchFrameReader.limits, accepting: .server)
            } catch {
                BenchSystem.die("presence: the server sent a frame that does not decode: \(error)")
            }
        }
    }
#endif
