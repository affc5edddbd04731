// `snapsync-bench fanout`: one publisher and N subscribers in one room on loopback, against
// snapsyncd and, with --compare, against redis-server and/or snapsync-ceiling (the broadcaster
// that does nothing else) in the same run, from the same generator.
// The generator is FanoutGenerator; the servers are found by ServerBinaries and started by
// ServerProcess.
#if canImport(Glibc)
    import ArgumentParser
    import Glibc
    import SnapSyncWire

    struct FanoutCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "fanout",
            abstract: "Fan-out throughput and latency: one publisher, N subscribers, one room, on loopback.",
            discussion: """
                Each publish is a MUTATE update_items(reload) of the room's one item, so the room stays \
                one item however long the run. Its payload carries the send time (CLOCK_MONOTONIC), so \
                latency is measured on one clock. Throughput: a closed loop keeps --window messages in \
                flight (published, not yet delivered to every subscriber). Latency: an open loop \
                publishes --rate messages per second. Every subscriber must receive every DIFF: any \
                loss is reported and makes the exit status 2.

                The daemon is started on an ephemeral port unless --host/--port are given; with \
                --compare redis, redis-server is started too and gets the same load (PUBLISH/SUBSCRIBE); \
                with --compare ceiling, snapsync-ceiling (--ceiling-threads threads) does, in its \
                length-prefixed protocol: what a server that only broadcasts reaches under this generator. \
                Servers run on --server-cpu and the generator on --generator-cpu where the machine has \
                two CPUs or more. A latency run of snapsyncd also reports the daemon's own flush passes \
                (STATS loop_pass_p99_us and loop_pass_max_us, the last 10-20 s): a broadcast's pass runs \
                from its DIFF's queueing to the last member's send, the daemon's part of a broadcast \
                without the generator's reading.
                """)

        enum Mode: String, ExpressibleByArgument, CaseIterable {
            case throughput, latency, both
        }

        @OptionGroup var launch: DaemonOptions

        @Option(help: "Use the daemon already listening on this IPv4 address (with --port) instead of starting one.")
        var host: String?

        @Option(help: "Port of a running daemon (with --host; default host 127.0.0.1).")
        var port: Int?

        @Option(name: .customLong("server-pid"), help: "PID of the running daemon given by --host/--port, to report its CPU.")
        var serverPID: Int32?

        @Option(help: "Subscriber counts, comma-separated.")
        var subscribers: String = "100,1000"

        @Option(help: "SnapshotPayload sizes in bytes (at least 16), comma-separated.")
        var payload: String = "64,1024"

        @Option(
            name: .customLong("protocol-version"),
            help: "The subscribers' protocol version: 2 (the default, as earlier figures), or 3, whose DIFFs carry the room's chain.")
        var protocolVersion: UInt64 = ProtocolVersion.unchained

        @Option(help: "throughput (closed loop), latency (open loop) or both.")
        var mode: Mode = .both

        @Option(help: "Closed loop: messages in flight.")
        var window: Int = 64

        @Option(help: "Open loop: messages per second.")
        var rate: Double = 100

        @Option(help: "Seconds measured per run, after the warm-up.")
        var duration: Double = 5

        @Option(help: "Seconds of warm-up per run, not measured.")
        var warmup: Double = 1

        @Option(
            name: .customLong("generator-nice"),
            help: """
                The generator's nice value, set after the servers start (they keep theirs), for \
                servers that need both cores of a small machine (--io-threads 2, --no-pin), so that \
                the cores shared with the clients are charged to neither side, as with clients on \
                other machines. 19 (latency) makes it yield its core to the servers' threads, so a \
                broadcast is not timed with the generator's reading in it; -10 (throughput, as root, \
                written --generator-nice=-10) lets it read every delivery before a server's extra \
                thread runs, so a closed loop is not slowed by a server taking the generator's \
                core. (default: 0)
                """)
        var generatorNice: Int32 = 0

        @Option(name: .customLong("repeat"), help: "Runs per server and mode, taking turns; the median run is reported.")
        var repeatCount: Int = 1

        @Option(help: "Also run the same load against these servers, comma-separated: redis, ceiling.")
        var compare: String?

        @Option(name: .customLong("ceiling-threads"), help: "With --compare ceiling: snapsync-ceiling's threads (-t).")
        var ceilingThreads: Int = 1

        @Option(name: .customLong("ceiling-binary"), help: "snapsync-ceiling to start (default: the one beside this executable).")
        var ceilingBinary: String?

        @Flag(
            help:
                "Every connection over TLS: snapsyncd's --tls-listen (with --port off) and redis-server's --tls-port, on one ECDSA P-256 certificate made now with the openssl tool."
        )
        var tls = false

        @OptionGroup var redisBinary: RedisBinaryOption

        @Option(name: .customLong("server-cpu"), help: "CPU for the servers.")
        var serverCPU: Int = 0

        @Option(name: .customLong("generator-cpu"), help: "CPU for this load generator.")
        var generatorCPU: Int = 1

        @Flag(name: .customLong("no-pin"), help: "Do not pin the servers and the generator to CPUs.")
        var noPin = false

        @OptionGroup var output: JSONOutputOption

        func validate() throws {
            guard parsedList(subscribers) != nil, parsedList(subscribers)!.allSatisfy({ $0 > 0 }) else {
                throw ValidationError("--subscribers takes positive integers separated by commas, e.g. 100,1000")
            }
            guard let sizes = parsedList(payload), sizes.allSatisfy({ $0 >= 16 }) else {
                throw ValidationError("--payload takes sizes of at least 16 bytes (the send stamp and sequence number) separated by commas")
            }
            if compared == nil { throw ValidationError("--compare takes redis, ceiling or both, comma-separated") }
            if compared!.contains(.ceiling) && tls { throw ValidationError("--compare ceiling does not go with --tls: the ceiling speaks plain TCP") }
            if ceilingThreads < 1 { throw ValidationError("--ceiling-threads must be at least 1") }
            guard protocolVersion >= 2, ProtocolVersion.supported.contains(protocolVersion) else {
                throw ValidationError("--protocol-version must be 2 or 3 (version 1's DIFF is version 2's)")
            }
            if window < 1 { throw ValidationError("--window must be at least 1") }
            if repeatCount < 1 { throw ValidationError("--repeat must be at least 1") }
            if rate <= 0 { throw ValidationError("--rate must be positive") }
            if duration <= 0 || warmup < 0 { throw ValidationError("--duration must be positive and --warmup not negative") }
            if host != nil && port == nil { throw ValidationError("--host needs --port") }
            if tls && port != nil { throw ValidationError("--tls starts its own servers (it makes their certificate): it does not go with --port") }
        }

        /// The servers --compare names; nil when it names another.
        private var compared: Set<FanoutTarget>? {
            guard let compare else { return [] }
            var targets: Set<FanoutTarget> = []
            for name in compare.split(separator: ",") {
                guard let target = FanoutTarget(rawValue: name.filter { $0 != " " }), target != .snapsync else { return nil }
                targets.insert(target)
            }
            return targets
        }

        private func parsedList(_ text: String) -> [Int]? {
            let values = text.split(separator: ",").map { Int($0.filter { $0 != " " }) }
            return values.isEmpty || values.contains(nil) ? nil : values.compactMap { $0 }
        }

        func run() throws {
            signal(SIGPIPE, SIG_IGN)
            let counts = parsedList(subscribers)!
            let sizes = parsedList(payload)!
            BenchSystem.raiseFileLimit(atLeast: (counts.max() ?? 0) + 64)
            let pin = !noPin && BenchSystem.onlineCPUs >= 2 && serverCPU != generatorCPU
            let loadAverage = BenchSystem.readFile("/proc/loadavg").flatMap { Double($0.split(separator: " ").first ?? "") }

            // Servers.
            let tlsFiles = tls ? BenchTLS.makeCertificates() : nil
            if let tlsFiles { BenchTLS.prepareClient(tlsFiles) }
            let daemonArguments =
                launch.arguments
                + (tlsFiles.map { ["--port", "off", "--tls-listen", "127.0.0.1:0", "--tls-cert", $0.certificate, "--tls-key", $0.key] } ?? [])
            var daemon: ServerProcess?
            let daemonHost: String, daemonPort: Int, daemonPID: Int32?
            if let port {
                daemonHost = host ?? "127.0.0.1"
                daemonPort = port
                daemonPID = serverPID
            } else {
                let binary = ServerBinaries.daemon(explicit: launch.binary.serverBinary)
                let started = ServerProcess.startDaemon(binary: binary, arguments: daemonArguments, cpu: pin ? serverCPU : nil)
                daemon = started
                daemonHost = started.host
                daemonPort = started.port
                daemonPID = started.pid
                note("snapsyncd \(binary) pid \(started.pid) on \(started.host):\(started.port)\(pin ? " (CPU\(serverCPU))" : "")")
            }
            var redis: ServerProcess?
            if compared!.contains(.redis) {
                let binary = ServerBinaries.redis(explicit: redisBinary.redisBinary)
                // No persistence at all: pub/sub keeps nothing to persist.
                let started = ServerProcess.startRedis(
                    binary: binary, arguments: ["--save", "", "--appendonly", "no"], cpu: pin ? serverCPU : nil, tls: tlsFiles)
                redis = started
                note("redis-server \(binary) pid \(started.pid) on 127.0.0.1:\(started.port)\(pin ? " (CPU\(serverCPU))" : "")")
            }
            var ceiling: ServerProcess?
            if compared!.contains(.ceiling) {
                let binary = ServerBinaries.ceiling(explicit: ceilingBinary)
                let started = ServerProcess.startCeiling(binary: binary, threads: ceilingThreads, cpu: pin ? serverCPU : nil)
                ceiling = started
                note("snapsync-ceiling \(binary) -t \(ceilingThreads) pid \(started.pid) on 127.0.0.1:\(started.port)\(pin ? " (CPU\(serverCPU))" : "")")
            }
            defer {
                daemon?.stop()
                redis?.stop()
                ceiling?.stop()
            }
            if pin { BenchSystem.pinCurrentThread(toCPU: generatorCPU) }
            if generatorNice != 0 && setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, generatorNice) != 0 {
                throw ValidationError("--generator-nice \(generatorNice): setpriority failed (errno \(errno))")
            }
            if !output.json {
                let load = loadAverage.map { fanoutFormat("%.2f", $0) } ?? "?"
                if port == nil {
                    let redisTLS = tls ? " --port 0 --tls-port P --tls-cert-file … --tls-key-file … --tls-ca-cert-file … --tls-auth-clients no" : ""
                    print("snapsyncd \(daemonArguments.joined(separator: " "))\(redis != nil ? "; redis-server --save '' --appendonly no\(redisTLS)" : "")")
                }
                print(
                    "snapsync-bench fanout: window \(window), rate \(Int(rate)) msg/s, \(fmt(duration)) s measured after \(fmt(warmup)) s warm-up, load average \(load)\(pin ? ", servers on CPU\(serverCPU), generator on CPU\(generatorCPU)" : ", not pinned")\(generatorNice != 0 ? ", generator at nice \(generatorNice)" : "")"
                )
            }

            var anyLoss = false
            var runIndex = 0
            for count in counts {
                for size in sizes {
                    var results: [FanoutTarget: [String: FanoutRunResult]] = [:]
                    var allRuns: [FanoutTarget: [String: [FanoutRunResult]]] = [:]
                    var targets: [(FanoutTarget, ServerProcess?)] = [(.snapsync, daemon)]
                    if let redis { targets.append((.redis, redis)) }
                    if let ceiling { targets.append((.ceiling, ceiling)) }
                    let modes: [String] = mode == .both ? ["throughput", "latency"] : [mode.rawValue]
                    // With --repeat, the servers take turns, so that both see the same spells of load.
                    for m in modes {
                        for _ in 0..<repeatCount {
                            for (target, process) in targets {
                                runIndex += 1
                                let load = FanoutLoad(
                                    subscribers: count, payloadBytes: size,
                                    window: m == "throughput" ? window : 0,
                                    rate: m == "latency" ? rate : 0,
                                    warmupNs: UInt64(warmup * 1e9), durationNs: UInt64(duration * 1e9),
                                    serverCore: pin && port == nil ? serverCPU : nil, protocolVersion: protocolVersion)
                                // Short, as in the reference instrument ("room"): every delivery carries
                                // the name, and with a 35-byte name Redis's 64 B messages grew from 99 to
                                // 130 bytes, which cost it a quarter of its throughput. Unique per run, so
                                // that no run sees another's room.
                                let room = "r\(runIndex)"
                                let connections: FanoutConnections
                                let pid: Int32?
                                switch target {
                                case .snapsync:
                                    if let process, process.hasExited {
                                        throw ValidationError("snapsyncd exited; its log: \(process.logPath)")
                                    }
                                    connections = FanoutSetup.snapsync(
                                        host: daemonHost, port: daemonPort, room: room,
                                        subscribers: count, payloadBytes: size, tls: tls, protocolVersion: protocolVersion)
                                    pid = daemonPID
                                case .redis:
                                    connections = FanoutSetup.redis(port: process!.port, channel: room, subscribers: count, tls: tls)
                                    pid = process!.pid
                                case .ceiling:
                                    connections = FanoutSetup.ceiling(port: process!.port, subscribers: count)
                                    pid = process!.pid
                                }
                                let transport = tls ? BenchTLS.describe(connections.publisher) : nil
                                var generator = FanoutGenerator(target: target, load: load, connections: connections, serverPID: pid)
                                var result = generator.run()
                                result.tls = transport
                                if target == .snapsync && m == "latency" && !tls {
                                    let stats = DurabilityBench.stats(host: daemonHost, port: daemonPort)
                                    result.daemonPassP99 = stats["loop_pass_p99_us"]
                                    result.daemonPassMax = stats["loop_pass_max_us"]
                                }
                                generator.tearDown()
                                allRuns[target, default: [:]][m, default: []].append(result)
                                if result.lost > 0 || result.failure != nil || result.outOfOrder > 0 { anyLoss = true }
                                if !output.json { print(describe(result)) }
                                BenchSystem.sleepMs(200)  // let the server close the run's connections
                            }
                        }
                    }
                    // The run of median deliveries/s (throughput) or median p99 (latency) stands for each.
                    for (target, byMode) in allRuns {
                        for (m, runs) in byMode {
                            let sorted = runs.sorted {
                                m == "throughput"
                                    ? $0.deliveriesPerSecond < $1.deliveriesPerSecond
                                    : $0.latency.quantile(0.99) < $1.latency.quantile(0.99)
                            }
                            var chosen = sorted[sorted.count / 2]
                            chosen.repeats = runs.map { m == "throughput" ? $0.deliveriesPerSecond : Double($0.latency.quantile(0.99)) / 1000 }
                            if runs.count > 1 {
                                var pooled = FanoutHistogram()
                                for run in runs { pooled.merge(run.latency) }
                                chosen.pooledLatency = pooled
                            }
                            results[target, default: [:]][m] = chosen
                        }
                    }
                    if output.json {
                        print(jsonLine(subscribers: count, payloadBytes: size, results: results, loadAverage: loadAverage, pinned: pin))
                    } else {
                        for ratio in ratios(results) { print(ratio) }
                    }
                }
            }
            if anyLoss {
                BenchSystem.printError("snapsync-bench: some runs lost deliveries or failed (see above)\n")
                daemon?.stop(); redis?.stop(); ceiling?.stop()
                throw ExitCode(2)
            }
        }

        private func note(_ message: String) { BenchSystem.printError("snapsync-bench: \(message)\n") }

        // MARK: Output

        private func describe(_ r: FanoutRunResult) -> String {
            let name = r.target == .ceiling ? "ceiling \(ceilingThreads)t" : r.target == .snapsync ? "snapsync" : "redis   "
            let head =
                "\(r.load.subscribers) subs, \(r.load.payloadBytes) B, \(name) \(r.load.mode == "throughput" ? "closed loop (window \(r.load.window))" : "open loop (\(Int(r.load.rate)) msg/s)")"
            var line = "\(head): \(human(r.deliveriesPerSecond)) deliveries/s, \(human(r.publishedPerSecond)) msg/s; "
            line += "latency p50 \(micro(r.latency.quantile(0.5))) p99 \(micro(r.latency.quantile(0.99))) max \(micro(r.latency.maxValue)); "
            if r.load.mode == "latency" {
                line +=
                    "broadcast complete p50 \(micro(r.broadcast.quantile(0.5))) p99 \(micro(r.broadcast.quantile(0.99))) max \(micro(r.broadcast.maxValue)) (\(r.broadcast.count) messages); "
                if let p99 = r.daemonPassP99, let max = r.daemonPassMax {
                    line += "daemon's flush pass p99 \(micro(p99 * 1000)) max \(micro(max * 1000)); "
                }
            }
            line += "server CPU \(r.serverCPU.map { "\(Int(($0 * 100).rounded()))%" } ?? "n/a")"
            if let perCPU = r.deliveriesPerServerCPUSecond { line += " (\(human(perCPU)) deliveries per server CPU-second)" }
            if let busy = r.serverCoreBusy, let softirq = r.serverCoreSoftirq {
                line += ", CPU\(serverCPU) busy \(Int((busy * 100).rounded()))% (softirq \(Int((softirq * 100).rounded()))%)"
            }
            line += ", generator CPU \(Int((r.generatorCPU * 100).rounded()))%; "
            line += "lost \(r.lost)"
            if let tls = r.tls { line += "; \(tls)" }
            if r.outOfOrder > 0 { line += ", out of order \(r.outOfOrder)" }
            if let failure = r.failure { line += "; FAILED: \(failure)" }
            return line
        }

        /// SnapSync against each compared server: against Redis with the targets of the issue that
        /// set them, against the ceiling as the fraction of the limit reached.
        private func ratios(_ results: [FanoutTarget: [String: FanoutRunResult]]) -> [String] {
            guard let snap = results[.snapsync] else { return [] }
            var lines: [String] = []
            for other in [FanoutTarget.redis, .ceiling] {
                guard let theirs = results[other] else { continue }
                let isRedis = other == .redis
                var parts: [String] = []
                if let a = snap["throughput"], let b = theirs["throughput"], b.deliveriesPerSecond > 0 {
                    parts.append(
                        fanoutFormat(isRedis ? "deliveries/s %.2f× (target ≥ 1.5×)" : "deliveries/s %.2f×", a.deliveriesPerSecond / b.deliveriesPerSecond))
                    if let x = a.deliveriesPerServerCPUSecond, let y = b.deliveriesPerServerCPUSecond, y > 0 {
                        parts.append(fanoutFormat("per server CPU-second %.2f×", x / y))
                    }
                }
                if let a = snap["latency"], let b = theirs["latency"], b.latency.quantile(0.99) > 0 {
                    parts.append(
                        fanoutFormat(
                            isRedis ? "latency p99 %.2f× (target ≤ 1×)" : "latency p99 %.2f×",
                            Double(a.latency.quantile(0.99)) / Double(b.latency.quantile(0.99))))
                    if b.broadcast.quantile(0.99) > 0 {
                        parts.append(fanoutFormat("broadcast complete p99 %.2f×", Double(a.broadcast.quantile(0.99)) / Double(b.broadcast.quantile(0.99))))
                    }
                    if let x = a.pooledLatency, let y = b.pooledLatency, y.quantile(0.99) > 0 {
                        parts.append(
                            fanoutFormat("p99 of all runs' deliveries pooled %.2f×", Double(x.quantile(0.99)) / Double(y.quantile(0.99)))
                                + " (\(micro(x.quantile(0.99))) vs \(micro(y.quantile(0.99))))")
                    }
                }
                let medians = repeatCount > 1 ? " (median runs of \(repeatCount))" : ""
                let name = isRedis ? "Redis" : "ceiling (\(ceilingThreads) thread\(ceilingThreads == 1 ? "" : "s"))"
                if !parts.isEmpty { lines.append("  SnapSync / \(name)\(medians): " + parts.joined(separator: ", ")) }
            }
            return lines
        }

        private func jsonLine(
            subscribers: Int, payloadBytes: Int, results: [FanoutTarget: [String: FanoutRunResult]],
            loadAverage: Double?, pinned: Bool
        ) -> String {
            var fields: [(String, JSONValue)] = [
                ("subscribers", .int(subscribers)), ("payload_bytes", .int(payloadBytes)),
                ("window", .int(window)), ("rate", .decimal(rate, digits: 3)), ("repeat", .int(repeatCount)),
                ("duration_s", .decimal(duration, digits: 3)), ("warmup_s", .decimal(warmup, digits: 3)),
                ("pinned", .bool(pinned)), ("loadavg_1m", .optional(loadAverage.map { .decimal($0, digits: 3) })),
                ("daemon_args", port == nil ? .string(launch.arguments.joined(separator: " ")) : .null),
                ("tls", .bool(tls)),
            ]
            for target in FanoutTarget.allCases {
                guard let runs = results[target] else { continue }
                var modes: [(String, JSONValue)] = []
                for m in ["throughput", "latency"] {
                    if let r = runs[m] { modes.append((m, jsonRun(r))) }
                }
                fields.append((target.rawValue, .object(modes)))
            }
            if let snap = results[.snapsync], let redis = results[.redis] {
                var ratio: [(String, JSONValue)] = []
                if let a = snap["throughput"], let b = redis["throughput"], b.deliveriesPerSecond > 0 {
                    let value = a.deliveriesPerSecond / b.deliveriesPerSecond
                    ratio.append(("deliveries_per_s", .decimal(value, digits: 3)))
                    ratio.append(("deliveries_target_met", .bool(value >= 1.5)))
                    if let x = a.deliveriesPerServerCPUSecond, let y = b.deliveriesPerServerCPUSecond, y > 0 {
                        ratio.append(("deliveries_per_server_cpu_s", .decimal(x / y, digits: 3)))
                    }
                }
                if let a = snap["latency"], let b = redis["latency"], b.latency.quantile(0.99) > 0 {
                    let value = Double(a.latency.quantile(0.99)) / Double(b.latency.quantile(0.99))
                    ratio.append(("p99", .decimal(value, digits: 3)))
                    ratio.append(("p99_target_met", .bool(value <= 1)))
                    if let x = a.pooledLatency, let y = b.pooledLatency, y.quantile(0.99) > 0 {
                        ratio.append(("p99_pooled", .decimal(Double(x.quantile(0.99)) / Double(y.quantile(0.99)), digits: 3)))
                    }
                }
                fields.append(("ratio_snapsync_to_redis", .object(ratio)))
            }
            if let snap = results[.snapsync], let ceiling = results[.ceiling] {
                var ratio: [(String, JSONValue)] = [("ceiling_threads", .int(ceilingThreads))]
                if let a = snap["throughput"], let b = ceiling["throughput"], b.deliveriesPerSecond > 0 {
                    ratio.append(("deliveries_per_s", .decimal(a.deliveriesPerSecond / b.deliveriesPerSecond, digits: 3)))
                }
                if let a = snap["latency"], let b = ceiling["latency"], b.broadcast.quantile(0.99) > 0 {
                    ratio.append(("broadcast_complete_p99", .decimal(Double(a.broadcast.quantile(0.99)) / Double(b.broadcast.quantile(0.99)), digits: 3)))
                }
                fields.append(("ratio_snapsync_to_ceiling", .object(ratio)))
            }
            return JSONValue.object(fields).json
        }

        private func jsonRun(_ r: FanoutRunResult) -> JSONValue {
            var fields: [(String, JSONValue)] = [
                ("deliveries_per_s", .decimal(r.deliveriesPerSecond, digits: 0)),
                ("published_per_s", .decimal(r.publishedPerSecond, digits: 0)),
                ("p50_us", .decimal(Double(r.latency.quantile(0.5)) / 1000, digits: 1)),
                ("p99_us", .decimal(Double(r.latency.quantile(0.99)) / 1000, digits: 1)),
                ("max_us", .decimal(Double(r.latency.maxValue) / 1000, digits: 1)),
                ("latency_samples", .int(Int(r.latency.count))),
                ("broadcast_complete_p50_us", .decimal(Double(r.broadcast.quantile(0.5)) / 1000, digits: 1)),
                ("broadcast_complete_p99_us", .decimal(Double(r.broadcast.quantile(0.99)) / 1000, digits: 1)),
                ("broadcast_complete_max_us", .decimal(Double(r.broadcast.maxValue) / 1000, digits: 1)),
                ("broadcast_complete_samples", .int(Int(r.broadcast.count))),
                ("daemon_pass_p99_us", .optional(r.daemonPassP99.map { .int(Int($0)) })),
                ("daemon_pass_max_us", .optional(r.daemonPassMax.map { .int(Int($0)) })),
                ("server_cpu", .optional(r.serverCPU.map { .decimal($0, digits: 3) })),
                ("server_core_busy", .optional(r.serverCoreBusy.map { .decimal($0, digits: 3) })),
                ("server_core_softirq", .optional(r.serverCoreSoftirq.map { .decimal($0, digits: 3) })),
                ("deliveries_per_server_cpu_s", .optional(r.deliveriesPerServerCPUSecond.map { .decimal($0, digits: 0) })),
                ("generator_cpu", .decimal(r.generatorCPU, digits: 3)),
                ("measured_s", .decimal(r.measuredSeconds, digits: 3)),
                ("published", .int(Int(r.published))),
                ("lost", .int(Int(r.lost))),
                ("out_of_order", .int(Int(r.outOfOrder))),
            ]
            if r.repeats.count > 1 {
                let key = r.load.mode == "throughput" ? "deliveries_per_s_runs" : "p99_us_runs"
                fields.append((key, .array(r.repeats.map { .decimal($0, digits: r.load.mode == "throughput" ? 0 : 1) })))
            }
            if let pooled = r.pooledLatency {
                fields.append(("pooled_p50_us", .decimal(Double(pooled.quantile(0.5)) / 1000, digits: 1)))
                fields.append(("pooled_p99_us", .decimal(Double(pooled.quantile(0.99)) / 1000, digits: 1)))
            }
            if let tls = r.tls { fields.append(("tls", .string(tls))) }
            if let failure = r.failure { fields.append(("failure", .string(failure))) }
            return .object(fields)
        }
    }

    /// printf-style formatting without Foundation (vsnprintf).
    func fanoutFormat(_ format: String, _ arguments: any CVarArg...) -> String {
        withVaList(arguments) { list in
            var buffer = [CChar](repeating: 0, count: 256)
            let n = Int(vsnprintf(&buffer, buffer.count, format, list))
            if n >= buffer.count {
                buffer = [CChar](repeating: 0, count: n + 1)
                return withVaList(arguments) { again in
                    _ = vsnprintf(&buffer, buffer.count, format, again)
                    return BenchSystem.string(cString: buffer)
                }
            }
            return BenchSystem.string(cString: buffer)
        }
    }

    private func fmt(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : fanoutFormat("%.1f", value)
    }

    private func human(_ value: Double) -> String {
        if value >= 1e6 { return fanoutFormat("%.2fM", value / 1e6) }
        if value >= 1e3 { return fanoutFormat("%.1fk", value / 1e3) }
        return fanoutFormat("%.0f", value)
    }

    private func micro(_ ns: UInt64) -> String {
        let us = Double(ns) / 1000
        return us >= 1000 ? fanoutFormat("%.2f ms", us / 1000) : fanoutFormat("%.0f µs", us)
    }
#endif
