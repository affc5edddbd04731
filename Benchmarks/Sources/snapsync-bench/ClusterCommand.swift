// `snapsync-bench cluster`: writers and subscribers spread over already-running snapsyncd nodes
// (cluster mode), and with --start-single the same load against one single-node daemon
// this command starts, in the same session. The generator is ClusterGenerator.
#if canImport(Glibc)
    import ArgumentParser
    import Glibc

    struct ClusterCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "cluster",
            abstract: "Acked writes/s, write→delivery latency, fan-out and CPU per delivery across snapsyncd nodes.",
            discussion: """
                Drives nodes that are already running (--nodes HOST:PORT,...; e.g. the three of \
                scripts/cluster up). --writers writers are spread round-robin over the nodes, writer w \
                writing room w mod --rooms: a MUTATE update_items(reload) of the room's one item, with a \
                write id, whose payload carries the send time (CLOCK_MONOTONIC). Each writer keeps at \
                most --in-flight writes unanswered: a closed loop (the next write as soon as an answer \
                comes), or with --rate an open loop at that many writes/s in total. --subscribers per \
                node are joined to every room, so every write is delivered to every subscriber on every \
                node; latency is delivery time minus send time, on one clock. Measured for --duration \
                after --warmup: acked writes/s (total, per writer's node), write→delivery p50/p99 (per \
                subscriber's node), deliveries/s per node, and each node's CPU (utime+stime from \
                /proc/PID/stat; the PIDs from --pids or found as the processes listening on the ports) \
                per delivery. After the window, every write must be answered and every acked write \
                delivered to every subscriber that should get it: anything missing is reported as lost \
                and makes the exit status 2.

                --start-single also starts one single-node snapsyncd (--server-binary, --fsync, \
                --server-arg as for fanout) and runs the same load on it: the same writers and rooms, and \
                as many subscribers as all the nodes have together, so each write costs the same number \
                of deliveries. --independent is for testing the tool against separate single-node \
                daemons: they share no rooms, so a subscriber expects only its node's writers' writes.
                """)

        @Option(help: "Running nodes, HOST:PORT comma-separated (IPv4).")
        var nodes: String?

        @Option(help: "PIDs of the nodes, in --nodes order (default: the processes listening on their ports).")
        var pids: String?

        @Option(name: .customLong("also-pids"), help: "More PIDs whose CPU is reported as one total, e.g. the NATS servers.")
        var alsoPIDs: String?

        @Flag(name: .customLong("start-single"), help: "Also start one single-node snapsyncd and run the same load on it.")
        var startSingle = false

        @OptionGroup var launch: DaemonOptions

        @Flag(help: "The nodes share no rooms (independent single-node daemons): a subscriber expects its node's writers' writes only.")
        var independent = false

        @Option(help: "Writers, spread round-robin over the nodes.")
        var writers: Int = 6

        @Option(name: .customLong("in-flight"), help: "Writes a writer may have unanswered.")
        var inFlight: Int = 1

        @Option(help: "Writes per second over all writers (open loop); 0: closed loop.")
        var rate: Double = 0

        @Option(help: "Rooms; writer w writes room w mod ROOMS; every subscriber joins every room.")
        var rooms: Int = 1

        @Option(help: "Subscribers per node.")
        var subscribers: Int = 100

        @Option(help: "SnapshotPayload bytes per write (at least 24: send time, writer, sequence).")
        var payload: Int = 64

        @Option(help: "Seconds measured per run, after the warm-up.")
        var duration: Double = 5

        @Option(help: "Seconds of warm-up per run, not measured.")
        var warmup: Double = 1

        @Option(name: .customLong("repeat"), help: "Runs of each case, taking turns (cluster, single, cluster, ...).")
        var repeatCount: Int = 1

        @OptionGroup var output: JSONOutputOption

        func validate() throws {
            if nodes == nil && !startSingle { throw ValidationError("give --nodes HOST:PORT,... or --start-single (or both)") }
            if let nodes, nodes.split(separator: ",").isEmpty { throw ValidationError("--nodes takes HOST:PORT entries separated by commas") }
            if let pids {
                let list = pids.split(separator: ",").map { Int32($0) }
                if list.contains(nil) || list.count != nodeList.count { throw ValidationError("--pids takes one PID per --nodes entry, in the same order") }
            }
            if let alsoPIDs, alsoPIDs.split(separator: ",").contains(where: { Int32($0) == nil }) {
                throw ValidationError("--also-pids takes PIDs separated by commas")
            }
            if writers < 1 || inFlight < 1 || rooms < 1 || subscribers < 0 {
                throw ValidationError("--writers, --in-flight and --rooms must be at least 1, --subscribers at least 0")
            }
            if payload < 24 { throw ValidationError("--payload must be at least 24 bytes (send time, writer, sequence)") }
            if rate < 0 { throw ValidationError("--rate must not be negative") }
            if duration <= 0 || warmup < 0 { throw ValidationError("--duration must be positive and --warmup not negative") }
            if repeatCount < 1 { throw ValidationError("--repeat must be at least 1") }
        }

        private var nodeList: [String] { nodes.map { $0.split(separator: ",").map { String($0.filter { $0 != " " }) } } ?? [] }

        func run() throws {
            signal(SIGPIPE, SIG_IGN)
            let endpoints = nodeList
            let nodeCount = max(1, endpoints.count)
            BenchSystem.raiseFileLimit(atLeast: subscribers * nodeCount + writers + 64)
            let loadAverage = BenchSystem.readFile("/proc/loadavg").map { $0.split(separator: " ").prefix(3).joined(separator: " ") }

            var nodePIDs: [Int32?] = []
            if let pids {
                nodePIDs = pids.split(separator: ",").map { Int32($0) }
            } else {
                for endpoint in endpoints {
                    let pid = ListeningProcess.pid(port: ClusterSetup.parse(endpoint: endpoint).port)
                    if pid == nil { note("no process found listening on \(endpoint) (another user's?): its CPU is not reported; pass --pids") }
                    nodePIDs.append(pid)
                }
            }
            let otherPIDs = alsoPIDs.map { $0.split(separator: ",").compactMap { Int32($0) } } ?? []

            var single: ServerProcess?
            if startSingle {
                let binary = ServerBinaries.daemon(explicit: launch.binary.serverBinary)
                let started = ServerProcess.startDaemon(binary: binary, arguments: launch.arguments, cpu: nil)
                single = started
                note("snapsyncd \(binary) \(launch.arguments.joined(separator: " ")) pid \(started.pid) on \(started.host):\(started.port)")
            }
            defer { single?.stop() }

            if !output.json {
                let shape =
                    "\(writers) writers (\(rate > 0 ? "open loop, \(Int(rate)) writes/s in total, " : "closed loop, ")at most \(inFlight) in flight each), \(rooms) room\(rooms == 1 ? "" : "s"), \(payload) B payload"
                print(
                    "snapsync-bench cluster: \(shape); \(fmtSeconds(duration)) s measured after \(fmtSeconds(warmup)) s warm-up; load average \(loadAverage ?? "?")"
                )
            }

            var anyLoss = false
            var run = 0
            let stamp = Int(BenchSystem.nowNs() / 1_000_000_000 % 1_000_000)
            for _ in 0..<repeatCount {
                var cases: [(label: String, endpoints: [String], pids: [Int32?], perNode: Int)] = []
                if !endpoints.isEmpty { cases.append((independent ? "independent" : "cluster", endpoints, nodePIDs, subscribers)) }
                if let single { cases.append(("single", ["\(single.host):\(single.port)"], [single.pid], subscribers * nodeCount)) }
                for c in cases {
                    run += 1
                    if let single, single.hasExited { throw ValidationError("the single-node snapsyncd exited; its log: \(single.logPath)") }
                    // Unique per invocation and run: a cluster keeps its rooms between invocations.
                    let roomNames = (0..<rooms).map { "b\(stamp)p\(getpid())r\(run)x\($0)" }
                    let load = ClusterLoad(
                        writers: writers, inFlight: inFlight, rate: rate, rooms: rooms, subscribersPerNode: c.perNode,
                        payloadBytes: payload, sharedRooms: !independent || c.label == "single",
                        warmupNs: UInt64(warmup * 1e9), durationNs: UInt64(duration * 1e9))
                    let connections = ClusterSetup.connect(endpoints: c.endpoints, rooms: roomNames, load: load)
                    var generator = ClusterGenerator(
                        label: c.label, load: load, connections: connections, nodePIDs: c.pids, otherPIDs: c.label == "single" ? [] : otherPIDs)
                    let result = generator.run()
                    generator.tearDown()
                    if result.lost > 0 || result.failure != nil || result.outOfOrder > 0 { anyLoss = true }
                    print(output.json ? jsonLine(result, loadAverage: loadAverage) : table(result))
                    BenchSystem.sleepMs(300)  // let the servers close the run's connections
                }
            }
            if anyLoss {
                BenchSystem.printError("snapsync-bench: some runs lost writes or deliveries, or failed (see above)\n")
                single?.stop()
                throw ExitCode(2)
            }
        }

        private func note(_ message: String) { BenchSystem.printError("snapsync-bench: \(message)\n") }

        // MARK: Output

        private func table(_ r: ClusterRunResult) -> String {
            var lines: [String] = []
            let single = r.label == "single"
            lines.append(
                "\(r.label): \(r.nodes.count) node\(r.nodes.count == 1 ? "" : "s"), \(r.load.subscribersPerNode) subscribers per node, \(fanoutFormat("%.2f", r.measuredSeconds)) s measured"
                    + (single ? " (the same writers and rooms, every node's subscribers on one node)" : ""))
            lines.append(
                pad("node", 22) + pad("pid", 8, right: true) + pad("writers", 8, right: true) + pad("subs", 6, right: true)
                    + pad("acked w/s", 11, right: true) + pad("deliveries/s", 14, right: true) + pad("p50 ms", 9, right: true)
                    + pad("p99 ms", 9, right: true) + pad("CPU", 7, right: true) + pad("µs CPU/delivery", 17, right: true))
            func row(_ name: String, pid: String, writers: Int, subs: Int, acked: UInt64, deliveries: UInt64, latency: FanoutHistogram, cpu: Double?) -> String
            {
                let perDelivery = cpu.flatMap { c in deliveries > 0 ? fanoutFormat("%.2f", c * 1e6 / Double(deliveries)) : nil } ?? "n/a"
                return pad(name, 22) + pad(pid, 8, right: true) + pad(String(writers), 8, right: true) + pad(String(subs), 6, right: true)
                    + pad(grouped(r.perSecond(acked)), 11, right: true) + pad(grouped(r.perSecond(deliveries)), 14, right: true)
                    + pad(ms(latency.quantile(0.5)), 9, right: true) + pad(ms(latency.quantile(0.99)), 9, right: true)
                    + pad(cpu.map { "\(Int((($0 / max(r.measuredSeconds, 1e-9)) * 100).rounded()))%" } ?? "n/a", 7, right: true)
                    + pad(perDelivery, 17, right: true)
            }
            for node in r.nodes {
                lines.append(
                    row(
                        node.endpoint, pid: node.pid.map(String.init) ?? "?", writers: node.writers, subs: node.subscribers,
                        acked: node.ackedMeasured, deliveries: node.deliveriesMeasured, latency: node.latency, cpu: node.cpuSeconds))
            }
            if r.nodes.count > 1 {
                let cpus = r.nodes.compactMap(\.cpuSeconds)
                lines.append(
                    row(
                        "all", pid: "", writers: r.load.writers, subs: r.load.subscribersPerNode * r.nodes.count, acked: r.ackedMeasured,
                        deliveries: r.deliveriesMeasured, latency: r.latency, cpu: cpus.count == r.nodes.count ? cpus.reduce(0, +) : nil))
            }
            var tail =
                "  write→ACK p50 \(ms(r.ackLatency.quantile(0.5))) ms, p99 \(ms(r.ackLatency.quantile(0.99))) ms; write→delivery max \(ms(r.latency.maxValue)) ms"
            tail += "; rejected \(r.rejected)"
            if !r.rejectCodes.isEmpty { tail += " (" + r.rejectCodes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")" }
            tail += "; lost \(r.lost); out of order \(r.outOfOrder); generator CPU \(Int((r.generatorCPU * 100).rounded()))%"
            if let other = r.otherCPUSeconds {
                tail += "; --also-pids (\(r.otherProcesses)) CPU \(Int((other / max(r.measuredSeconds, 1e-9) * 100).rounded()))%"
            }
            lines.append(tail)
            if let failure = r.failure { lines.append("  FAILED: \(failure)") }
            return lines.joined(separator: "\n")
        }

        private func jsonLine(_ r: ClusterRunResult, loadAverage: String?) -> String {
            func latencyFields(_ h: FanoutHistogram, _ prefix: String) -> [(String, JSONValue)] {
                [
                    ("\(prefix)p50_us", .decimal(Double(h.quantile(0.5)) / 1000, digits: 1)),
                    ("\(prefix)p99_us", .decimal(Double(h.quantile(0.99)) / 1000, digits: 1)),
                    ("\(prefix)max_us", .decimal(Double(h.maxValue) / 1000, digits: 1)),
                ]
            }
            let nodes: [JSONValue] = r.nodes.map { node in
                var fields: [(String, JSONValue)] = [
                    ("endpoint", .string(node.endpoint)), ("pid", .optional(node.pid.map { .int(Int($0)) })),
                    ("writers", .int(node.writers)), ("subscribers", .int(node.subscribers)),
                    ("acked_writes_per_s", .decimal(r.perSecond(node.ackedMeasured), digits: 0)),
                    ("deliveries_per_s", .decimal(r.perSecond(node.deliveriesMeasured), digits: 0)),
                ]
                fields += latencyFields(node.latency, "")
                fields.append(("cpu", .optional(node.cpuSeconds.map { .decimal($0 / max(r.measuredSeconds, 1e-9), digits: 3) })))
                fields.append(
                    (
                        "cpu_us_per_delivery",
                        .optional(
                            node.cpuSeconds.flatMap { c in node.deliveriesMeasured > 0 ? .decimal(c * 1e6 / Double(node.deliveriesMeasured), digits: 3) : nil })
                    ))
                return .object(fields)
            }
            var fields: [(String, JSONValue)] = [
                ("benchmark", "cluster"), ("case", .string(r.label)), ("nodes", .int(r.nodes.count)),
                ("writers", .int(r.load.writers)), ("in_flight", .int(r.load.inFlight)), ("rate", .decimal(r.load.rate, digits: 3)),
                ("rooms", .int(r.load.rooms)), ("subscribers_per_node", .int(r.load.subscribersPerNode)),
                ("payload_bytes", .int(r.load.payloadBytes)), ("duration_s", .decimal(duration, digits: 3)),
                ("warmup_s", .decimal(warmup, digits: 3)), ("loadavg", .optional(loadAverage.map { .string($0) })),
                ("measured_s", .decimal(r.measuredSeconds, digits: 3)),
                ("acked_writes_per_s", .decimal(r.perSecond(r.ackedMeasured), digits: 0)),
                ("deliveries_per_s", .decimal(r.perSecond(r.deliveriesMeasured), digits: 0)),
            ]
            fields += latencyFields(r.latency, "")
            fields += latencyFields(r.ackLatency, "ack_")
            fields += [
                ("cpu_us_per_delivery", .optional(r.cpuPerDeliveryUs.map { .decimal($0, digits: 3) })),
                ("sent", .int(Int(r.sent))), ("acked", .int(Int(r.acked))), ("rejected", .int(Int(r.rejected))),
                ("reject_codes", .object(r.rejectCodes.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
                ("lost", .int(Int(r.lost))), ("out_of_order", .int(Int(r.outOfOrder))),
                ("generator_cpu", .decimal(r.generatorCPU, digits: 3)),
                ("also_pids_cpu", .optional(r.otherCPUSeconds.map { .decimal($0 / max(r.measuredSeconds, 1e-9), digits: 3) })),
                ("daemon_args", r.label == "single" ? .string(launch.arguments.joined(separator: " ")) : .null),
                ("per_node", .array(nodes)),
            ]
            if let failure = r.failure { fields.append(("failure", .string(failure))) }
            return JSONValue.object(fields).json
        }

        private func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
            let count = text.count
            if count >= width { return right ? " " + text : text + " " }
            let fill = String(repeating: " ", count: width - count)
            return right ? fill + text : text + fill
        }

        private func grouped(_ value: Double) -> String {
            let digits = Array(String(Int(value.rounded())))
            var out = ""
            for (i, c) in digits.enumerated() {
                if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
                out.append(c)
            }
            return out
        }

        private func ms(_ ns: UInt64) -> String { fanoutFormat("%.2f", Double(ns) / 1e6) }

        private func fmtSeconds(_ value: Double) -> String {
            value == value.rounded() ? String(Int(value)) : fanoutFormat("%.1f", value)
        }
    }
#endif
