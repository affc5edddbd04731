// Foundation (for Process) only in this file: see ClientFoundationTests.swift.
#if canImport(Foundation)
    import Foundation
    import Testing
    import SnapSyncTestThreads

    // Synchronous: each test waits on the example's process. On a thread of its own, off the pool.
    @Suite("Client: the README example program", .ownThread("README example"))
    struct ClientExampleTests {
        @Test("snapsync-example connects, joins, prints the changes and appends an item", .timeLimit(.minutes(1)))
        func exampleRuns() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            try runExample(daemon, port: daemon.port)
        }

        @Test("snapsync-example over TLS (SNAPSYNC_CA) to the daemon's --tls-listen port", .timeLimit(.minutes(1)))
        func exampleRunsOverTLS() throws {
            let certificates = try TestCertificates()
            let daemon = try DaemonProcess.start(arguments: certificates.daemonArguments)
            defer { daemon.stop() }
            try runExample(daemon, port: try daemon.tlsPort(), environment: ["SNAPSYNC_CA": certificates.path("ca.pem")])
        }

        @Test("snapsync-example over a list of endpoints (SNAPSYNC_ENDPOINTS): past a dead one to the daemon", .timeLimit(.minutes(1)))
        func exampleFailsOverBetweenEndpoints() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let dead = try ClosedPort()
            // The port argument is ignored: the list wins.
            try runExample(
                daemon, port: 1, environment: ["SNAPSYNC_ENDPOINTS": "\(dead.host):\(dead.port),\(daemon.host):\(daemon.port)"],
                connectsTo: "\(daemon.host):\(daemon.port)")
        }

        /// Runs the example twice on room "readme": each run joins, appends one item and sees its DIFF.
        func runExample(_ daemon: DaemonProcess, port: Int, environment: [String: String] = [:], connectsTo: String? = nil) throws {
            // Built with every build, next to snapsyncd.
            let example = URL(fileURLWithPath: daemon.binary).deletingLastPathComponent().appendingPathComponent("snapsync-example")
            guard FileManager.default.isExecutableFile(atPath: example.path) else {
                Issue.record("\(example.path) is missing: build the package (swift build) first")
                return
            }
            for run in 1...2 {
                let process = Process()
                process.executableURL = example
                process.arguments = [daemon.host, String(port), "readme"]
                process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
                let output = Pipe()
                process.standardOutput = output
                process.standardError = output
                try process.run()
                let deadline = Date().addingTimeInterval(30)
                while process.isRunning && Date() < deadline { usleep(10_000) }
                if process.isRunning {
                    process.terminate()
                    Issue.record("snapsync-example did not finish within 30 s")
                    return
                }
                let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                #expect(process.terminationStatus == 0, "\(text)")
                #expect(text.contains("joined readme at v\(run - 1) "), "\(text)")
                #expect(text.contains(") on \(connectsTo ?? "\(daemon.host):\(port)")\n"), "\(text)")
                #expect(text.contains("appended item-"), "\(text)")
                #expect(text.contains("diff → v\(run): +"), "its own change is printed: \(text)")
            }
        }
    }
#endif
