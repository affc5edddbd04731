// Start-up checks: systemd hearing from a long recovery.

import Testing
import SnapSyncTestThreads
import Logging
@testable import SnapSyncServer
import SnapSyncHub
#if canImport(Glibc)
    import Glibc
#endif

@Suite(.unitTests) struct StartupChecksTests {
    /// EXTEND_TIMEOUT_USEC goes out at most once per interval while recovery reports progress.
    @Test func longRecoveryExtendsTheStartTimeout() throws {
        let name = "snapsync-extend-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        let address = try #require(SocketAddress(unixPath: "@" + name))
        let bound = address.withSockaddr { bind(fd, $0, $1) }
        try #require(bound == 0)

        let t0 = ContinuousClock.now
        let notifier = StartupNotifier(
            notifier: SystemdNotifier(socket: "@" + name), logger: Logger(label: "test.startup") { _ in SwiftLogNoOpLogHandler() },
            interval: .seconds(5), extendBy: .seconds(30), now: t0)
        #expect(!notifier.progress("early", now: t0 + .seconds(4)))
        #expect(notifier.progress("working", now: t0 + .seconds(5)))
        #expect(!notifier.progress("again", now: t0 + .seconds(9)))
        #expect(notifier.progress("later", now: t0 + .seconds(11)))
        // A caller whose steps are longer asks for more (cluster mode, up to its deadline).
        #expect(notifier.progress("waiting", extendBy: .seconds(90), now: t0 + .seconds(16)))
        var received: [String] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n <= 0 { break }
            received.append(String(decoding: buffer[0..<n], as: UTF8.self))
        }
        #expect(
            received == [
                "EXTEND_TIMEOUT_USEC=30000000\nSTATUS=working", "EXTEND_TIMEOUT_USEC=30000000\nSTATUS=later",
                "EXTEND_TIMEOUT_USEC=90000000\nSTATUS=waiting",
            ])
        // Without NOTIFY_SOCKET nothing is sent.
        let off = StartupNotifier(
            notifier: SystemdNotifier(socket: nil), logger: Logger(label: "test.startup") { _ in SwiftLogNoOpLogHandler() },
            interval: .zero, extendBy: .seconds(30), now: t0)
        #expect(!off.progress("x", now: t0 + .seconds(60)))
    }
}
