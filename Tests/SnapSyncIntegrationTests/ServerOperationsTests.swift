import Testing
import SnapSyncModel
import SnapSyncWire
import Foundation
#if canImport(Glibc)
    import Glibc
#endif

// Running the daemon: signals, STATS, flags and --help, sd_notify, IPv6.

extension ServerIntegration {
    @Suite struct Operations {
        @Test(arguments: [SIGTERM, SIGINT])
        func aSignalShutsDownCleanly(signal: Int32) throws {
            let daemon = try DaemonProcess.start()
            let a = try RawClient.ready(daemon), b = try RawClient.ready(daemon)
            _ = try a.join("r")
            try b.mustMutate("r", [.appendSections([.named("s")])])
            daemon.signal(signal)
            for client in [a, b] {
                let (code, _, _) = try client.closingError(timeout: 60)
                #expect(code == .shuttingDown)
            }
            #expect(daemon.waitForExit(timeout: 60) == 0)
            #expect(daemon.log.contains("shutting down"))
            #expect(daemon.log.contains("stopped"))
            // Nothing listens any more.
            #expect(throws: RawClientError.self) { try RawClient(host: daemon.host, port: daemon.port, timeout: 2) }
        }

        /// A client that never reads cannot hold the shutdown: the shutdown timeout closes it, as
        /// the log says, and the daemon exits cleanly. The log line, not the time taken, is the
        /// proof: a slow machine stretches the time either way.
        @Test func shutdownIsBoundedEvenIfAClientNeverReads() throws {
            let daemon = try DaemonProcess.start(arguments: ["--shutdown-timeout", "500ms"])
            let stuck = try RawClient.ready(daemon, receiveBuffer: 4096)
            _ = try stuck.join("r")
            // 8 MiB of DIFFs for a member that reads nothing: far more than the sockets hold, and
            // less than the 32 MiB after which it would be cut off as a slow consumer.
            let writer = try RawClient.ready(daemon)
            try writer.mustMutate("r", [.appendSections([.named("s")])])
            let payload = String(repeating: "p", count: 64 << 10)
            for index in 0..<128 { try writer.mustMutate("r", [.appendItems([.named("i\(index)", payload)], toSection: "s")]) }
            daemon.signal(SIGTERM)
            #expect(daemon.waitForExit(timeout: 60) == 0)
            #expect(daemon.log.contains("shutdown timeout: closing connections with output undelivered connections=1"))
        }

        @Test func statsReportsEveryCounter() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let a = try RawClient.ready(daemon), b = try RawClient.ready(daemon)
            _ = try a.join("r1")
            try b.mustMutate("r1", [.appendSections([.named("s")]), .appendItems([.named("x"), .named("y")], toSection: "s")])
            try b.mustMutate("r2", [.appendSections([.named("t")]), .appendItems([.named("z")], toSection: "t")])
            _ = try b.mutate("r2", [.deleteItems(["nope"])])
            let stats = try b.stats()
            let names = [
                "connections", "rooms", "items", "frames_in", "frames_out", "bytes_in", "bytes_out",
                "frames_in_per_second", "frames_out_per_second", "slow_consumer_disconnects",
                "connections_accepted", "connections_refused", "protocol_errors", "writes_applied",
                "writes_rejected", "uptime_seconds", "loop_pass_p99_us", "loop_pass_max_us", "catchups_folded",
                "catchup_folds_deferred", "windowed_members", "window_rebuilds",
            ]
            for name in names { #expect(stats[name] != nil, "STATS lacks \(name)") }
            // Every pass with output is timed: the writes above made some.
            #expect((stats["loop_pass_max_us"] ?? 0) > 0)
            #expect((stats["loop_pass_max_us"] ?? 0) >= (stats["loop_pass_p99_us"] ?? 0))
            #expect(stats["connections"] == 2)
            #expect(stats["rooms"] == 2)
            #expect(stats["items"] == 3)
            #expect(stats["writes_applied"] == 2)
            #expect(stats["writes_rejected"] == 1)
            #expect(stats["slow_consumer_disconnects"] == 0)
            // 2 HELLO, 1 JOIN, 3 MUTATE, 1 STATS so far.
            #expect(stats["frames_in"] == 7)
            #expect((stats["frames_out"] ?? 0) >= 7)
            #expect((stats["bytes_in"] ?? 0) > 0 && (stats["bytes_out"] ?? 0) > 0)
        }

        @Test func helpDescribesEveryFlag() throws {
            let (status, output) = try DaemonProcess.run(arguments: ["--help"])
            #expect(status == 0)
            for flag in [
                "--host", "--port", "--data-dir", "--log-level", "--max-frame-bytes", "--max-connections",
                "--max-rooms", "--max-rooms-per-connection", "--max-items-per-room", "--max-sections-per-room",
                "--max-payload-bytes", "--max-identifier-bytes", "--max-snapshot-bytes", "--max-output-bytes", "--max-input-bytes",
                "--history-count", "--history-bytes", "--handshake-timeout", "--idle-timeout", "--shutdown-timeout",
                "--cluster", "--cluster-ca", "--cluster-cert", "--cluster-key", "--cluster-allow-unsafe-nats-server", "--cluster-start-timeout",
                "--cluster-presence-timeout",
            ] {
                #expect(output.contains(flag), "--help does not mention \(flag)")
            }
            #expect(output.contains("(default: 7400)") && output.contains("(default: 16MiB)"))
        }

        @Test(arguments: [
            (["--max-frame-bytes", "12X"], "unknown unit"),
            (["--port", "70000"], "--port"),
            (["--max-frame-bytes", "1MiB", "--max-snapshot-bytes", "1MiB"], "--max-snapshot-bytes"),
            (["--idle-timeout", "soon"], "not a duration"),
            (["--max-frame-bytes", "1MiB", "--max-input-bytes", "1MiB"], "--max-input-bytes"),
            (["--log-level", "loud"], "--log-level"),
            (
                ["--cluster", "nats://127.0.0.1:1", "--cluster-checkpoint-every", "100", "--cluster-retain", "199"],
                "--cluster-retain (199) must be at least twice --cluster-checkpoint-every (100)"
            ),
            (["--cluster", "nats://127.0.0.1:1,tls://127.0.0.1:2"], "--cluster mixes nats:// and tls:// URLs"),
            (["--cluster-ca", "/nonexistent/ca.pem"], "--cluster-ca, --cluster-cert and --cluster-key need --cluster with tls:// URLs"),
            (["--cluster-allow-unsafe-nats-server"], "--cluster-allow-unsafe-nats-server needs --cluster"),
            (["--cluster-start-timeout", "60"], "--cluster-start-timeout needs --cluster"),
            (["--cluster", "nats://127.0.0.1:1", "--cluster-start-timeout=-1"], "--cluster-start-timeout must be 0 or more seconds"),
            (["--cluster-presence-timeout", "5"], "--cluster-presence-timeout needs --cluster"),
            (["--cluster", "nats://127.0.0.1:1", "--cluster-presence-timeout", "0.1"], "--cluster-presence-timeout must be between 0.3 and 600 seconds"),
            (
                ["--cluster", "nats://127.0.0.1:1", "--cluster-ca", "/nonexistent/ca.pem"],
                "--cluster-ca, --cluster-cert and --cluster-key need --cluster with tls:// URLs"
            ),
            (["--cluster", "tls://127.0.0.1:1", "--cluster-cert", "/nonexistent/c.pem"], "--cluster-cert and --cluster-key go together"),
            (["--cluster", "tls://127.0.0.1:1", "--cluster-ca", "/nonexistent/ca.pem"], "--cluster-ca /nonexistent/ca.pem: cannot be read"),
            (
                ["--cluster", "tls://127.0.0.1:1", "--cluster-cert", "/nonexistent/c.pem", "--cluster-key", "/nonexistent/c.key"],
                "--cluster-cert /nonexistent/c.pem: cannot be read"
            ),
        ])
        func badFlagsAreRefusedWithAReason(arguments: [String], reason: String) throws {
            // Refused while parsing, before anything is bound (a daemon that started would be
            // killed by `run`'s timeout and fail the status check).
            let (status, output) = try DaemonProcess.run(arguments: arguments, timeout: 20)
            #expect(status == 64, "\(arguments): exit status \(status)\n\(output)")
            #expect(output.contains(reason), "\(arguments): \(output)")
        }

        @Test func systemdIsToldReadyAndStopping() throws {
            let name = "snapsync-test-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            try #require(fd >= 0)
            defer { close(fd) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = [UInt8(0)] + Array(name.utf8)  // abstract namespace
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
            let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count)
            let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
            try #require(bound == 0)
            let daemon = try DaemonProcess.start(environment: ["NOTIFY_SOCKET": "@" + name])
            let ready = try datagram(fd)
            #expect(ready.contains("READY=1"))
            #expect(ready.contains("STATUS=listening on 127.0.0.1:\(daemon.port)"))
            daemon.signal(SIGTERM)
            #expect(try datagram(fd).contains("STOPPING=1"))
            #expect(daemon.waitForExit(timeout: 60) == 0)
        }

        private func datagram(_ fd: Int32) throws -> String {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            try #require(poll(&entry, 1, 10_000) == 1, "no datagram within 10 s")
            var buffer = [UInt8](repeating: 0, count: 1024)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            try #require(n > 0)
            return String(decoding: buffer[0..<n], as: UTF8.self)
        }

        @Test(.enabled(if: FileManager.default.fileExists(atPath: "/proc/net/if_inet6"), "needs IPv6"))
        func listensOnIPv6() throws {
            let daemon = try DaemonProcess.start(arguments: ["--host", "::1"])
            defer { daemon.stop() }
            #expect(daemon.host == "::1")
            #expect(daemon.log.contains("listening on [::1]:\(daemon.port)"))
            let client = try RawClient(host: "::1", port: daemon.port)
            try client.handshake()
            #expect(try client.state(of: "v6").version == 0)
        }
    }
}
