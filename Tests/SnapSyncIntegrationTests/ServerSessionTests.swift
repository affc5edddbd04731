import Testing
import SnapSyncModel
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

// The connection state machine of the real daemon: handshake, its refusals and timeout,
// PING/PONG and the idle timeout (PROTOCOL.md §8).

extension ServerIntegration {
    @Suite struct Session {
        @Test func welcomeAnnouncesTheConfiguredLimits() throws {
            let daemon = try DaemonProcess.start(arguments: [
                "--max-frame-bytes", "1MiB", "--max-snapshot-bytes", "512KiB",
                "--max-payload-bytes", "1000", "--history-count", "7",
            ])
            defer { daemon.stop() }
            let client = try RawClient(host: daemon.host, port: daemon.port)
            let welcome = try client.handshake()
            guard case .welcome(let version, let session, let name, let entries) = welcome else {
                Issue.record("no WELCOME")
                return
            }
            #expect(version == 1 && session > 0 && name.hasPrefix("snapsyncd"))
            let limits = WireLimits(welcome: entries)
            #expect(limits.maxFrameBytes == 1 << 20)
            #expect(limits.model.maxSnapshotBytes == 512 << 10)
            #expect(limits.model.maxPayloadBytes == 1000)
            #expect(limits.historyCount == 7)
            #expect(limits.maxRoomsPerConnection == 64)
        }

        @Test func aFrameBeforeHelloIsRefusedWithHandshakeRequired() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let client = try RawClient(host: daemon.host, port: daemon.port)
            try client.send(.join(requestID: 1, room: "r", resume: nil))
            let (code, _, before) = try client.closingError()
            #expect(code == .handshakeRequired)
            #expect(before.isEmpty)
            #expect(daemon.waitForLog("frame before HELLO"))
        }

        @Test func helloTwiceIsRefused() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let client = try RawClient.ready(daemon)
            try client.send(.hello(versions: [1], clientName: "again", credentials: []))
            #expect(try client.closingError().code == .handshakeRequired)
        }

        @Test func badMagicIsRefused() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let client = try RawClient(host: daemon.host, port: daemon.port)
            var frame = FrameEncoder().encode(.hello(versions: [1], clientName: "x", credentials: []))
            frame[5] = UInt8(ascii: "X")  // "SNAP" -> "XNAP"
            try client.send(raw: frame)
            #expect(try client.closingError().code == .badMagic)
        }

        @Test func helloWithoutASpokenVersionIsRefused() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let client = try RawClient(host: daemon.host, port: daemon.port)
            try client.send(.hello(versions: [5, 6], clientName: "future", credentials: []))
            let (code, message, _) = try client.closingError()
            #expect(code == .unsupportedVersion)
            #expect(message.contains("5, 6"))
        }

        @Test func noHelloInTimeGetsTimeout() throws {
            let daemon = try DaemonProcess.start(arguments: ["--handshake-timeout", "300ms"])
            defer { daemon.stop() }
            let client = try RawClient(host: daemon.host, port: daemon.port)
            let (code, message, _) = try client.closingError(timeout: 60)
            #expect(code == .timeout)
            #expect(message.contains("HELLO"))
        }

        @Test func requestsMayFollowHelloWithoutWaitingForWelcome() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let client = try RawClient(host: daemon.host, port: daemon.port)
            let encoder = FrameEncoder()
            var bytes: [UInt8] = []
            encoder.encode(.hello(versions: [1], clientName: "eager", credentials: []), into: &bytes)
            encoder.encode(.join(requestID: 1, room: "r", resume: nil), into: &bytes)
            encoder.encode(.ping(nonce: 42), into: &bytes)
            try client.send(raw: bytes)
            guard case .welcome = try client.receive() else { Issue.record("WELCOME first"); return }
            guard case .snapshot(1, "r", _, 0, .initial, _, _, _) = try client.receive() else { Issue.record("then the SNAPSHOT"); return }
            guard case .pong(42) = try client.receive() else { Issue.record("then the PONG"); return }
        }

        @Test func pingIsAnsweredWithTheSameNonce() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let client = try RawClient.ready(daemon)
            for nonce: UInt64 in [0, 1, 1 << 40, .max] {
                try client.send(.ping(nonce: nonce))
                guard case .pong(let echoed) = try client.receive() else { Issue.record("no PONG"); return }
                #expect(echoed == nonce)
            }
        }

        @Test func aSilentConnectionIsPingedThenClosedWithTimeout() throws {
            let daemon = try DaemonProcess.start(arguments: ["--idle-timeout", "300ms"])
            defer { daemon.stop() }
            let client = try RawClient.ready(daemon)
            guard case .ping = try client.receive(timeout: 60) else { Issue.record("no PING on an idle connection"); return }
            // No answer: the next idle period ends it.
            let (code, _, before) = try client.closingError(timeout: 60)
            #expect(code == .timeout)
            #expect(before.allSatisfy { if case .ping = $0 { true } else { false } })
        }

        /// A client that answers each PING stays connected through several idle periods. The
        /// client must answer within an idle period, which a test process kept from running can
        /// miss: then the daemon rightly closes it, and the test tries again with periods four
        /// times as long. A daemon that does not count a PONG as input closes every try.
        @Test func answeringPingsKeepsAnIdleConnectionOpen() throws {
            var closed: [String] = []
            for idle in [200, 800, 3_200, 12_800] {
                let daemon = try DaemonProcess.start(arguments: ["--idle-timeout", "\(idle)ms"])
                defer { daemon.stop() }
                let client = try RawClient.ready(daemon)
                do {
                    for _ in 0..<4 {
                        guard case .ping(let nonce) = try client.receive(timeout: 60) else {
                            Issue.record("expected PING")
                            return
                        }
                        try client.send(.pong(nonce: nonce))
                    }
                    let stats = try client.stats()
                    #expect(stats["connections"] == 1)
                    return
                } catch {
                    closed.append("--idle-timeout \(idle)ms: \(error)")
                }
            }
            Issue.record("closed at every idle timeout: \(closed)")
        }
    }
}
