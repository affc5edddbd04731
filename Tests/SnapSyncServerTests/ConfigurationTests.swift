import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncServer
import SnapSyncHub
#if canImport(Glibc)
    import Glibc
#endif

// Flag values and configuration checks (the flags themselves are parsed by snapsyncd's
// ArgumentParser command; the integration tests run the real binary with good and bad flags).

@Suite(.unitTests) struct ConfigurationValueTests {
    @Test func byteCountsTakeBinarySuffixes() throws {
        #expect(try ConfigurationValue.byteCount("65536") == 65536)
        #expect(try ConfigurationValue.byteCount("64KiB") == 65536)
        #expect(try ConfigurationValue.byteCount("64k") == 65536)
        #expect(try ConfigurationValue.byteCount("16M") == 16 << 20)
        #expect(try ConfigurationValue.byteCount("16MiB") == 16 << 20)
        #expect(try ConfigurationValue.byteCount("1GiB") == 1 << 30)
        #expect(try ConfigurationValue.byteCount(" 2gb ") == 2 << 30)
        #expect(try ConfigurationValue.byteCount("0") == 0)
    }

    @Test func badByteCountsSayWhatIsWrong() {
        for text in ["", "MiB", "abc", "-1", "1.5M", "12X", "99999999999999999999G"] {
            #expect(throws: ConfigurationError.self, "\(text)") { try ConfigurationValue.byteCount(text) }
        }
        #expect(throws: ConfigurationError(message: "'12X' has an unknown unit 'x' (use K, M or G, binary)")) {
            try ConfigurationValue.byteCount("12X")
        }
    }

    @Test func durationsTakeUnitsAndDefaultToSeconds() throws {
        #expect(try ConfigurationValue.duration("10") == .seconds(10))
        #expect(try ConfigurationValue.duration("10s") == .seconds(10))
        #expect(try ConfigurationValue.duration("500ms") == .milliseconds(500))
        #expect(try ConfigurationValue.duration("1.5s") == .milliseconds(1500))
        #expect(try ConfigurationValue.duration("2m") == .seconds(120))
        #expect(try ConfigurationValue.duration("1h") == .seconds(3600))
        for text in ["", "s", "ten", "5 parsecs", "1e400"] {
            #expect(throws: ConfigurationError.self, "\(text)") { try ConfigurationValue.duration(text) }
        }
    }

    @Test func descriptionsForHelpTexts() {
        #expect(ConfigurationValue.describe(byteCount: 16 << 20) == "16MiB")
        #expect(ConfigurationValue.describe(byteCount: 65536) == "64KiB")
        #expect(ConfigurationValue.describe(byteCount: 1000) == "1000")
        #expect(ConfigurationValue.describe(duration: .seconds(10)) == "10s")
        #expect(ConfigurationValue.describe(duration: .milliseconds(250)) == "250ms")
    }
}

/// The message of the validation error for the default configuration changed by `change`, or
/// nil when it validates.
private func message(_ change: (inout ServerConfiguration) -> Void) -> String? {
    var configuration = ServerConfiguration()
    change(&configuration)
    do {
        try configuration.validate()
        return nil
    } catch {
        return error.message
    }
}

@Suite(.unitTests) struct ServerConfigurationTests {
    @Test func defaultsMatchTheProtocolsLimitsTable() throws {
        let configuration = ServerConfiguration()
        try configuration.validate()
        #expect(configuration.host == "127.0.0.1" && configuration.port == 7400)
        #expect(configuration.wire.maxFrameBytes == 16 << 20)
        #expect(configuration.wire.model.maxIdentifierBytes == 256)
        #expect(configuration.wire.model.maxPayloadBytes == 64 << 10)
        #expect(configuration.wire.model.maxItems == 1_000_000)
        #expect(configuration.wire.model.maxSections == 100_000)
        #expect(configuration.wire.maxRoomsPerConnection == 64)
        #expect(configuration.wire.model.maxSnapshotBytes == 16 << 20 - 64 << 10)
        #expect(configuration.wire.historyCount == 16_384)
        #expect(ServerConfiguration.snapshotBytes(forFrameBytes: 16 << 20) == configuration.wire.model.maxSnapshotBytes)
    }

    @Test func inconsistentValuesAreRefusedNamingTheFlag() {
        #expect(message { $0.port = 70000 }?.contains("--port") == true)
        #expect(message { $0.wire.maxFrameBytes = 100 }?.contains("--max-frame-bytes") == true)
        #expect(
            message { $0.wire.maxFrameBytes = 1 << 20 }?.contains("--max-snapshot-bytes") == true,
            "the default snapshot limit does not fit a 1 MiB frame")
        #expect(message { $0.maxConnections = 0 }?.contains("--max-connections") == true)
        #expect(message { $0.maxOutputBytes = 10 }?.contains("--max-output-bytes") == true)
        #expect(message { $0.idleTimeout = .zero }?.contains("--idle-timeout") == true)
        #expect(
            message { $0.wire.maxFrameBytes = 1 << 30 }?.contains("--max-input-bytes") == true,
            "one frame of the largest size must fit in the input budget")
        #expect(message { $0.maxInputBytes = (16 << 20) + (64 << 10) }?.contains("--max-input-bytes") == true)
        #expect(message { $0.maxInputBytes = (16 << 20) + (128 << 10) } == nil)
        #expect(
            message {
                $0.wire.maxFrameBytes = 1 << 20; $0.wire.model.maxSnapshotBytes = ServerConfiguration.snapshotBytes(forFrameBytes: 1 << 20)
            } == nil)
    }

    /// The global budgets must hold what one connection, or one room, may always hold.
    @Test func memoryBudgetsHoldOneConnectionAndOneRoom() {
        let defaults = ServerConfiguration()
        #expect(defaults.maxOutputTotalBytes == 2 << 30 && defaults.maxRoomTotalBytes == 8 << 30)
        #expect(
            message { $0.maxOutputTotalBytes = (32 << 20) - 1 }?.contains("--max-output-total-bytes") == true,
            "below the per-connection cap of 32 MiB")
        #expect(message { $0.maxOutputTotalBytes = 32 << 20 } == nil)
        #expect(
            message {
                $0.maxOutputBytes = 1 << 20; $0.maxOutputTotalBytes = 16 << 20
            }?.contains("--max-output-total-bytes") == true,
            "one 16 MiB frame is always queued, so the total must hold it")
        #expect(
            message {
                $0.maxOutputBytes = 1 << 20; $0.maxOutputTotalBytes = (16 << 20) + (128 << 10)
            } == nil)
        // One full room: its snapshot, its resume base (a second snapshot) unless it does not
        // fold resumes, and its history.
        let snapshot = (16 << 20) - (64 << 10)
        #expect(
            message { $0.maxRoomTotalBytes = 2 * snapshot + (4 << 20) - 1 }?.contains("--max-room-total-bytes") == true,
            "below one full room: twice the max snapshot bytes plus history bytes")
        #expect(message { $0.maxRoomTotalBytes = 2 * snapshot + (4 << 20) } == nil)
        #expect(
            message {
                $0.foldResumes = false; $0.maxRoomTotalBytes = snapshot + (4 << 20) - 1
            }?.contains("--max-room-total-bytes") == true)
        #expect(
            message {
                $0.foldResumes = false; $0.maxRoomTotalBytes = snapshot + (4 << 20)
            } == nil)
    }
}

@Suite(.unitTests) struct SocketAddressTests {
    @Test func numericAddressesAndBrackets() throws {
        #expect(try SocketAddress(host: "127.0.0.1", port: 7400).description == "127.0.0.1:7400")
        #expect(try SocketAddress(host: "::1", port: 7400).description == "[::1]:7400")
        #expect(try SocketAddress(host: "[::1]", port: 80).description == "[::1]:80")
        #expect(try SocketAddress(host: "0.0.0.0", port: 0).port == 0)
    }

    @Test func badAddressesAreTypedErrors() {
        #expect(throws: AddressError.self) { try SocketAddress(host: "300.1.1.1.1", port: 1) }
        #expect(throws: AddressError.self) { try SocketAddress(host: "127.0.0.1", port: 70000) }
    }
}

@Suite(.unitTests) struct SystemdNotifierTests {
    @Test func withoutNotifySocketNothingIsSent() throws {
        let notifier = SystemdNotifier(socket: nil)
        #expect(!notifier.isEnabled)
        try notifier.notify("READY=1")
    }

    @Test func datagramReachesAPathSocket() throws {
        try expectDatagram(bindTo: "/tmp/snapsync-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))", abstract: false)
    }

    @Test func datagramReachesAnAbstractSocket() throws {
        try expectDatagram(bindTo: "snapsync-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))", abstract: true)
    }

    /// Binds a datagram socket like systemd's, notifies it, and reads the datagram.
    private func expectDatagram(bindTo name: String, abstract: Bool) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0)
        defer {
            close(fd)
            if !abstract { unlink(name) }
        }
        let spec = abstract ? "@" + name : name
        let address = try #require(SocketAddress(unixPath: spec))
        let bound = address.withSockaddr { bind(fd, $0, $1) }
        try #require(bound == 0, "bind failed: \(errno)")
        try SystemdNotifier(socket: spec).notify("READY=1\nSTATUS=test")
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        try #require(n > 0)
        #expect(String(decoding: buffer[0..<n], as: UTF8.self) == "READY=1\nSTATUS=test")
    }
}
