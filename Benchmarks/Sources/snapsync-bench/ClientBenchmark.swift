// `snapsync-bench client`: the client library's throughput (docs/benchmarks.md, "client").
//
// --writers tasks share --connections SnapSyncClients (round robin) and each runs a closed loop
// of `mutate` (update_items(reload) of its own item in one room), awaiting the ACK before the
// next; one more client is joined to the room and receives every DIFF. The daemon is the real
// snapsyncd with --fsync no, so the figures are the client's frames and hops, not the disk.
#if canImport(Glibc)
    import ArgumentParser
    import Dispatch
    import SnapSync
    import SnapSyncModel

    struct ClientBenchmark: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "client",
            abstract: "Writes/s and write→ACK latency of concurrent writers through SnapSyncClient, with one reader.",
            discussion: """
                Starts snapsyncd (--fsync no) on a loopback port. --writers tasks, spread over \
                --connections clients, each await one mutate at a time for --seconds after a \
                one-second warm-up, while one more client is joined to the room. One JSON line: \
                writes acknowledged per second, write→ACK p50 and p99 in microseconds, and whether \
                the reader reached the last version.
                """)

        @Option(help: "Concurrent writer tasks.")
        var writers: Int = 8

        @Option(help: "SnapSyncClients the writers share (round robin).")
        var connections: Int = 1

        @Option(help: "Measured seconds (after a one-second warm-up).")
        var seconds: Double = 5

        @Option(help: "SnapshotPayload bytes per write.")
        var payloadBytes: Int = 100

        @Option(help: "A label for the JSON line (e.g. which client build this is).")
        var label: String = ""

        @OptionGroup var server: ServerBinaryOption

        func validate() throws {
            guard (1...1024).contains(writers) else { throw ValidationError("--writers must be 1...1024") }
            guard (1...writers).contains(connections) else { throw ValidationError("--connections must be 1...--writers") }
            guard seconds > 0, seconds <= 600 else { throw ValidationError("--seconds must be in (0, 600]") }
            guard (1...60_000).contains(payloadBytes) else { throw ValidationError("--payload-bytes must be 1...60000") }
        }

        func run() throws {
            let binary = ServerBinaries.daemon(explicit: server.serverBinary)
            let daemon = ServerProcess.startDaemon(binary: binary, arguments: ["--fsync", "no"], cpu: nil)
            defer { daemon.stop() }
            let run = ClientRun(
                host: daemon.host, port: daemon.port, writers: writers, connections: connections, seconds: seconds,
                payloadBytes: payloadBytes)
            let done = DispatchSemaphore(value: 0)
            let box = ResultBox()
            Task {
                box.result = await run.measure()
                done.signal()
            }
            done.wait()
            guard case .success(let result)? = box.result else {
                BenchSystem.die("client: \(box.result.map { "\($0)" } ?? "no result")")
            }
            let loadAverage = BenchSystem.readFile("/proc/loadavg").flatMap { Double($0.split(separator: " ").first ?? "") }
            let latencies = result.latenciesMicroseconds.sorted()
            Bench.printJSON([
                ("bench", "client"), ("label", .string(label)), ("writers", .int(writers)), ("connections", .int(connections)),
                ("payload_bytes", .int(payloadBytes)), ("seconds", .decimal(seconds, digits: 3)),
                ("writes", .int(latencies.count)), ("writes_per_s", .decimal(Double(latencies.count) / seconds, digits: 0)),
                ("ack_p50_us", .int(Self.percentile(latencies, 0.50))), ("ack_p99_us", .int(Self.percentile(latencies, 0.99))),
                ("reader_caught_up", .bool(result.readerCaughtUp)),
                ("loadavg_1m", .optional(loadAverage.map { .decimal($0, digits: 2) })),
            ])
        }

        static func percentile(_ sorted: [Int], _ p: Double) -> Int {
            sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
    }

    /// The result handed from the measuring task to `run()`, which waits on a semaphore: written
    /// before the signal, read after the wait.
    private final class ResultBox: @unchecked Sendable {
        var result: Result<ClientRun.Outcome, SnapSyncError>?
    }

    struct ClientRun: Sendable {
        struct Outcome: Sendable {
            var latenciesMicroseconds: [Int]
            var readerCaughtUp: Bool
        }

        let host: String
        let port: Int
        let writers: Int
        let connections: Int
        let seconds: Double
        let payloadBytes: Int

        func measure() async -> Result<Outcome, SnapSyncError> {
            let room = "client-bench"
            func client(_ name: String) -> SnapSyncClient {
                SnapSyncClient(configuration: .init(host: host, port: port, clientName: name, requestTimeout: .seconds(60)))
            }
            let clients = (0..<connections).map { client("writer-\($0)") }
            let reader = client("reader")
            do {
                for client in clients { try await client.connect() }
                try await reader.connect()
                let items = (0..<writers).map { SnapshotElement(SnapshotIdentifier("w\($0)")) }
                _ = try await clients[0].mutate(room, [.appendSections(["s"]), .appendItems(items, toSection: "s")])
                let replica = try await reader.join(room)

                let clock = ContinuousClock()
                let start = clock.now + .seconds(1)
                let end = start + .seconds(seconds)
                let payload = SnapshotPayload([UInt8](repeating: 0x61, count: payloadBytes))
                let latencies = try await withThrowingTaskGroup(of: [Int].self) { group in
                    for w in 0..<writers {
                        let client = clients[w % connections]
                        let operation = SnapshotOperation.updateItems([SnapshotElement(SnapshotIdentifier("w\(w)"), payload: payload)], .reload)
                        group.addTask {
                            var measured: [Int] = []
                            measured.reserveCapacity(16_384)
                            while true {
                                let sent = clock.now
                                if sent >= end { return measured }
                                _ = try await client.mutate(room, [operation])
                                // A write counts when it was sent in the window.
                                if sent >= start {
                                    let (s, atto) = (clock.now - sent).components
                                    measured.append(Int(s) * 1_000_000 + Int(atto / 1_000_000_000_000))
                                }
                            }
                        }
                    }
                    var all: [Int] = []
                    for try await part in group { all += part }
                    return all
                }
                // Every write is acknowledged: the last version is the room's; the reader has a
                // few seconds to receive it.
                let last = try await clients[0].mutate(room, [.updateItems([SnapshotElement("w0")], .reload)]).version
                let deadline = clock.now + .seconds(5)
                while replica.position.version < last && clock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
                let caughtUp = replica.position.version >= last
                for client in clients { await client.close() }
                await reader.close()
                return .success(Outcome(latenciesMicroseconds: latencies, readerCaughtUp: caughtUp))
            } catch let error as SnapSyncError {
                return .failure(error)
            } catch {
                return .failure(.connectionLost("\(error)"))
            }
        }
    }
#endif
