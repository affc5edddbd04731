import Foundation
import Testing
import SnapSyncModel
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

// --metrics-listen: the real daemon, scraped by curl (a real HTTP client), its text checked
// line by line; /healthz before and after a held recovery.

extension ServerIntegration {
    @Suite struct Metrics {
        /// Every metric family the README's table names (a family is present even at 0).
        static let families = [
            "snapsync_build_info", "snapsync_connections", "snapsync_connections_accepted_total",
            "snapsync_connections_refused_total", "snapsync_rooms", "snapsync_rooms_deleted_total",
            "snapsync_rooms_expired_total", "snapsync_rooms_evicted_total", "snapsync_rooms_woken_total",
            "snapsync_catchups_folded_total", "snapsync_catchup_folds_deferred_total",
            "snapsync_items", "snapsync_received_bytes_total", "snapsync_sent_bytes_total",
            "snapsync_frames_received_total", "snapsync_frame_bytes_received_total", "snapsync_frames_sent_total",
            "snapsync_frame_bytes_sent_total", "snapsync_writes_applied_total", "snapsync_writes_rejected_total",
            "snapsync_output_queue_bytes", "snapsync_slow_consumer_disconnects_total", "snapsync_protocol_errors_total",
            "snapsync_auth_refused_total", "snapsync_tokens_expired_total", "snapsync_forbidden_total",
            "snapsync_uptime_seconds", "snapsync_loop_pass_p99_seconds", "snapsync_loop_pass_max_seconds",
            "snapsync_fsync_duration_seconds", "snapsync_write_ack_duration_seconds",
        ]

        /// The endpoint has no authentication: bound to a wildcard address it is a warning at
        /// start; on loopback it is not.
        @Test func aMetricsAddressThatIsNotLoopbackIsAWarning() throws {
            let warning = "is not a loopback address, and /metrics and /healthz have no authentication"
            let wide = try DaemonProcess.start(arguments: ["--metrics-listen", "0.0.0.0:0"])
            defer { wide.stop() }
            #expect(wide.waitForLog("metrics: serving http://0.0.0.0:"))
            #expect(wide.waitForLog("metrics: 0.0.0.0:"))
            #expect(wide.log.contains(warning))
            let loopback = try DaemonProcess.start(arguments: ["--metrics-listen", "127.0.0.1:0"])
            defer { loopback.stop() }
            _ = try MetricsAddress(loopback)
            #expect(!loopback.log.contains(warning))
        }

        @Test func scrapeNamesEveryMetricAndAgreesWithStats() throws {
            let daemon = try DaemonProcess.start(arguments: ["--metrics-listen", "127.0.0.1:0"])
            defer { daemon.stop() }
            let metrics = try MetricsAddress(daemon)
            let before = try metrics.scrape()
            for family in Self.families { #expect(before.families.contains(family), "/metrics lacks \(family)") }
            #expect(before["snapsync_writes_applied_total"] == 0)

            let a = try RawClient.ready(daemon), b = try RawClient.ready(daemon)
            _ = try a.join("r1")
            try b.mustMutate("r1", [.appendSections([.named("s")]), .appendItems([.named("x"), .named("y")], toSection: "s")])
            _ = try b.mutate("r1", [.deleteItems(["nope"])])
            let stats = try b.stats()
            let after = try metrics.scrape()
            #expect(after["snapsync_writes_applied_total"] == 1)
            #expect(after["snapsync_writes_rejected_total{code=\"item_not_found\"}"] == 1)
            #expect(after["snapsync_connections"] == 2)
            #expect(after["snapsync_rooms{state=\"resident\"}"] == 1)
            #expect(after["snapsync_rooms{state=\"sleeping\"}"] == 0)
            #expect(after["snapsync_items"] == 2)
            #expect(after["snapsync_frames_received_total{type=\"MUTATE\"}"] == 2)
            #expect(after["snapsync_frames_received_total{type=\"HELLO\"}"] == 2)
            #expect(after["snapsync_frames_sent_total{type=\"ACK\"}"] == 1)
            #expect(after["snapsync_frames_sent_total{type=\"DIFF\"}"] == 1)
            #expect((after["snapsync_frame_bytes_received_total{type=\"MUTATE\"}"] ?? 0) > 0)
            // One source of truth: what STATS said (the STATS frame itself came after).
            #expect(after["snapsync_writes_applied_total"] == Double(stats["writes_applied"] ?? 99))
            #expect(after["snapsync_connections_accepted_total"] == Double(stats["connections_accepted"] ?? 99))
            #expect(after["snapsync_frames_received_total{type=\"STATS\"}"] == 1)
            let framesIn = after.sum(of: "snapsync_frames_received_total")
            #expect(framesIn == Double((stats["frames_in"] ?? 0)))
            // --fsync always: the applied write was fdatasynced before its ACK, and both were timed.
            #expect((after["snapsync_fsync_duration_seconds_count"] ?? 0) >= 1)
            #expect(after["snapsync_write_ack_duration_seconds_count"] == 1)
            #expect(after.families.contains("snapsync_write_ack_duration_seconds_bucket"))
            #expect(after.lines.contains { $0.hasPrefix("snapsync_build_info{") && $0.contains("fsync=\"always\"") })

            let health = try metrics.get("/healthz")
            #expect(health.status == 200 && health.body == "ok\n")
            #expect(try metrics.get("/nope").status == 404)
            #expect(daemon.log.contains("metrics: serving http://127.0.0.1:\(metrics.port)/metrics and /healthz"))
        }

        /// A recovery held (SNAPSYNCD_TEST_HOLD_RECOVERY) after the log was read: the endpoint
        /// already answers, /healthz 503 until the rooms are handed over and the listener is up,
        /// then 200, and /metrics reports the recovered room.
        @Test func healthzIs503UntilRecoveredAndListening() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let first = try dir.start()
            try RawClient.ready(first).mustMutate("kept", [.appendSections([.named("s")]), .appendItems([.named("x")], toSection: "s")])
            #expect(first.stop() == 0)

            let gate = dir.path + "/release"
            let daemon = try DaemonProcess.start(
                arguments: ["--data-dir", dir.data, "--metrics-listen", "127.0.0.1:0"],
                environment: ["SNAPSYNCD_TEST_HOLD_RECOVERY": gate], waitForListening: false)
            defer { daemon.stop() }
            #expect(daemon.waitForLog("holding recovery until"))
            let metrics = try MetricsAddress(daemon)
            let held = try metrics.get("/healthz")
            #expect(held.status == 503 && held.body == "recovering\n")
            let early = try metrics.scrape()
            #expect(early.families.contains("snapsync_build_info"))
            #expect(!daemon.log.contains(" listening on "))

            #expect(FileManager.default.createFile(atPath: gate, contents: nil))
            try daemon.waitUntilListening()
            #expect(try metrics.get("/healthz").status == 200)
            let after = try metrics.scrape()
            #expect(after["snapsync_rooms{state=\"resident\"}"] == 1)
            #expect(after["snapsync_items"] == 1)
        }

        /// Once SIGTERM began a shutdown, /healthz says 503 while the last connection drains:
        /// a subscriber that never reads holds megabytes of DIFFs the daemon waits to deliver.
        @Test func healthzIs503WhileShuttingDown() throws {
            let daemon = try DaemonProcess.start(arguments: ["--metrics-listen", "127.0.0.1:0", "--shutdown-timeout", "30s"])
            defer { daemon.stop() }
            let metrics = try MetricsAddress(daemon)
            #expect(try metrics.get("/healthz").status == 200)
            let writer = try RawClient.ready(daemon)
            let slow = try RawClient.ready(daemon, receiveBuffer: 4096)
            try writer.mustMutate("feed", [.appendSections([.named("s")])])
            _ = try slow.join("feed")  // then never reads again
            // 12 MB of DIFFs: beyond what the kernel buffers for the slow socket (a few MiB),
            // within --max-output-bytes (32 MiB).
            let payload = String(repeating: "x", count: 60_000)
            for round in 0..<200 {
                try writer.mustMutate("feed", [.appendItems([.named("i\(round)", payload)], toSection: "s")])
            }
            try withExtendedLifetime(slow) {
                daemon.signal(SIGTERM)
                #expect(daemon.waitForLog("shutting down"))
                let draining = try metrics.get("/healthz")
                #expect(draining.status == 503 && draining.body == "shutting down\n")
            }
        }

        @Test func aBadAddressIsRefusedAtStart() throws {
            let (status, output) = try DaemonProcess.run(arguments: ["--metrics-listen", "9400"])
            #expect(status != 0)
            #expect(output.contains("--metrics-listen must be HOST:PORT"))
        }
    }
}

/// The endpoint's address, from the daemon's `metrics: serving http://HOST:PORT/metrics` line.
struct MetricsAddress {
    let host: String
    let port: Int

    init(_ daemon: DaemonProcess) throws {
        guard daemon.waitForLog("metrics: serving http://"), let range = daemon.log.range(of: "metrics: serving http://") else {
            throw DaemonError("no metrics line", log: daemon.log)
        }
        let address = daemon.log[range.upperBound...].prefix { $0 != "/" }
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else {
            throw DaemonError("bad metrics line", log: daemon.log)
        }
        host = String(address[..<colon])
        self.port = port
    }

    /// GET `path` with curl: status and body.
    func get(_ path: String) throws -> (status: Int, body: String) {
        let curl = Process()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        curl.arguments = ["curl", "--silent", "--show-error", "--max-time", "60", "--write-out", "\n%{http_code}", "http://\(host):\(port)\(path)"]
        let pipe = Pipe()
        curl.standardOutput = pipe
        try curl.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        curl.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard curl.terminationStatus == 0, let newline = text.lastIndex(of: "\n"), let status = Int(text[text.index(after: newline)...]) else {
            throw DaemonError("curl \(path) failed (status \(curl.terminationStatus)): \(text)")
        }
        return (status, String(text[..<newline]))
    }

    /// GET /metrics, parsed.
    func scrape() throws -> Exposition {
        let (status, body) = try get("/metrics")
        guard status == 200 else { throw DaemonError("/metrics answered \(status)") }
        return Exposition(body)
    }
}

/// Prometheus text exposition, by sample: `name{labels}` → value.
struct Exposition {
    let lines: [String]
    private(set) var samples: [String: Double] = [:]
    private(set) var families: Set<String> = []

    init(_ text: String) {
        lines = text.split(separator: "\n").map(String.init)
        for line in lines where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            let key = String(line[..<space])
            samples[key] = value
            families.insert(String(key.prefix { $0 != "{" }))
        }
        for line in lines where line.hasPrefix("# TYPE ") {
            families.insert(String(line.dropFirst(7).prefix { $0 != " " }))
        }
    }

    subscript(_ key: String) -> Double? { samples[key] }

    /// The sum of every sample of `family` (all label sets).
    func sum(of family: String) -> Double {
        samples.filter { $0.key == family || $0.key.hasPrefix(family + "{") }.values.reduce(0, +)
    }
}
