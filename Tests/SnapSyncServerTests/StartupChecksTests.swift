// Start-up checks: free space in the data directory, and systemd hearing from a long recovery.

import Testing
import Logging
@testable import SnapSyncServer
#if canImport(Glibc)
    import Glibc
#endif

@Suite struct StartupChecksTests {
    @Test func freeSpaceIsMeasured() throws {
        let free = try #require(DataDirectory.freeBytes("/tmp"))
        #expect(free > 0)
        #expect(DataDirectory.freeBytes("/no/such/directory") == nil)
    }

    /// Less free space than --min-free-bytes refuses; less than one segment only warns.
    @Test func lowDiskRefusesOnlyBelowTheMinimum() throws {
        let free = try #require(DataDirectory.freeBytes("/tmp"))
        let lines = LogLines()
        #expect {
            try DataDirectory.checkFreeSpace("/tmp", minimum: free + (1 << 40), warnBelow: 0, logger: lines.logger)
        } throws: { error in
            "\(error)".contains("less than --min-free-bytes")
        }
        try DataDirectory.checkFreeSpace("/tmp", minimum: 0, warnBelow: free + (1 << 40), logger: lines.logger)
        #expect(lines.contains("less than one log segment"), "\(lines.all)")
        let quiet = LogLines()
        try DataDirectory.checkFreeSpace("/tmp", minimum: 1, warnBelow: 1, logger: quiet.logger)
        #expect(quiet.all.isEmpty)
    }

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
            notifier: SystemdNotifier(socket: "@" + name), logger: LogLines().logger,
            interval: .seconds(5), extendBy: .seconds(30), now: t0)
        #expect(!notifier.progress("early", now: t0 + .seconds(4)))
        #expect(notifier.progress("working", now: t0 + .seconds(5)))
        #expect(!notifier.progress("again", now: t0 + .seconds(9)))
        #expect(notifier.progress("later", now: t0 + .seconds(11)))
        var received: [String] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n <= 0 { break }
            received.append(String(decoding: buffer[0..<n], as: UTF8.self))
        }
        #expect(received == ["EXTEND_TIMEOUT_USEC=30000000\nSTATUS=working", "EXTEND_TIMEOUT_USEC=30000000\nSTATUS=later"])
        // Without NOTIFY_SOCKET nothing is sent.
        let off = StartupNotifier(
            notifier: SystemdNotifier(socket: nil), logger: LogLines().logger,
            interval: .zero, extendBy: .seconds(30), now: t0)
        #expect(!off.progress("x", now: t0 + .seconds(60)))
    }
}
