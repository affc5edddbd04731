#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation

/// The real `snapsyncd` binary, started for one test on an ephemeral loopback port with a
/// throwaway data directory, and killed when the test is done.
///
/// Usage:
///
///     let daemon = try DaemonProcess.start(arguments: ["--max-connections", "2"])
///     defer { daemon.stop() }
///     // connect to daemon.host:daemon.port
///
/// or `try DaemonProcess.with { daemon in ... }`, which stops it however the body ends.
///
/// - Binary: `$SNAPSYNCD` if set; else `snapsyncd` next to the running test bundle (the same
///   build directory, whatever `--scratch-path` was used); else `<repo>/.build/debug/snapsyncd`,
///   with `<repo>` found from this file's path.
/// - Arguments: `--host 127.0.0.1 --port 0 --data-dir <temp dir>` first, then `arguments`, so a
///   test can override any of them (the last occurrence of a flag wins).
/// - Readiness: `start` returns once the daemon logged `listening on HOST:PORT` (parsed for the
///   real port), and throws if it exits first or stays silent for `startTimeout`.
/// - Logs: everything the daemon writes to stderr is kept (`log`), and appended to failure
///   messages by `DaemonError`. `JOURNAL_STREAM` is removed from its environment so lines carry
///   timestamps; `environment` adds or overrides variables (e.g. `NOTIFY_SOCKET`).
/// - Cleanup: `stop()` sends SIGTERM and waits up to 10 s, then SIGKILL; the data directory is
///   removed. `deinit` SIGKILLs a daemon still running, so a test that throws leaks nothing.
///
/// Thread-safe: the stderr reader runs on its own thread; state is guarded by a lock.
final class DaemonProcess: @unchecked Sendable {
    /// The address the daemon listens on, as logged (`127.0.0.1`, or `::1` without brackets).
    private(set) var host = ""
    private(set) var port = 0
    let pid: pid_t
    let dataDirectory: String
    let binary: String

    private let lock = NSLock()
    private var output: [UInt8] = []
    private var exitStatus: Int32?
    private var reader: Thread?
    private let stderrFD: Int32

    /// Starts a daemon and waits until it listens.
    /// With `waitForListening: false` it returns once spawned (`waitUntilListening()` then
    /// waits): for a start that a test holds up on purpose.
    static func start(
        arguments: [String] = [], environment: [String: String] = [:],
        startTimeout: Double = 120, waitForListening: Bool = true
    ) throws -> DaemonProcess {
        let binary = try locateBinary()
        var template = Array((NSTemporaryDirectory() + "snapsyncd-test-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw DaemonError("mkdtemp failed: errno \(errno)") }
        let dataDirectory = String(cString: made)
        let argv = [binary, "--host", "127.0.0.1", "--port", "0", "--data-dir", dataDirectory] + arguments
        var env = ProcessInfo.processInfo.environment
        env["JOURNAL_STREAM"] = nil
        env["NOTIFY_SOCKET"] = nil
        for (key, value) in environment { env[key] = value }
        let (pid, stderrFD) = try spawn(argv, environment: env)
        let daemon = DaemonProcess(pid: pid, stderrFD: stderrFD, dataDirectory: dataDirectory, binary: binary)
        guard waitForListening else { return daemon }
        do {
            (daemon.host, daemon.port) = try daemon.waitForListening(timeout: startTimeout)
            return daemon
        } catch {
            daemon.kill()
            throw error
        }
    }

    /// Runs the binary to completion with `arguments` only (no defaults added), e.g. `--help`
    /// or a bad flag: its exit status and everything it wrote to stdout and stderr.
    /// The process is killed if it runs longer than `timeout` seconds.
    static func run(arguments: [String], timeout: Double = 120) throws -> (status: Int32, output: String) {
        let binary = try locateBinary()
        var env = ProcessInfo.processInfo.environment
        env["JOURNAL_STREAM"] = nil
        env["NOTIFY_SOCKET"] = nil
        let (pid, fd) = try spawn([binary] + arguments, environment: env, captureStdout: true)
        let process = DaemonProcess(pid: pid, stderrFD: fd, dataDirectory: "", binary: binary)
        guard let status = process.waitForExit(timeout: timeout) else {
            process.kill()
            throw DaemonError("snapsyncd \(arguments.joined(separator: " ")) did not exit within \(timeout) s", log: process.log)
        }
        // The reader thread drains the pipe until EOF, which follows the exit.
        let deadline = Date().addingTimeInterval(5)
        while !process.readerFinished && Date() < deadline { usleep(5_000) }
        return (status, process.log)
    }

    /// Runs `body` with a started daemon, stopping it afterwards whatever happens.
    @discardableResult
    static func with<R>(
        arguments: [String] = [], environment: [String: String] = [:],
        _ body: (DaemonProcess) throws -> R
    ) throws -> R {
        let daemon = try start(arguments: arguments, environment: environment)
        defer { daemon.stop() }
        return try body(daemon)
    }

    private init(pid: pid_t, stderrFD: Int32, dataDirectory: String, binary: String) {
        self.pid = pid
        self.stderrFD = stderrFD
        self.dataDirectory = dataDirectory
        self.binary = binary
        startReader()
    }

    deinit {
        kill()
        removeDataDirectory()
    }

    // MARK: Observing

    /// Waits until the daemon logged `listening on HOST:PORT` (after `start(waitForListening: false)`).
    func waitUntilListening(timeout: Double = 120) throws {
        (host, port) = try waitForListening(timeout: timeout)
    }

    /// Everything the daemon wrote to stderr so far.
    var log: String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: output, as: UTF8.self)
    }

    /// Waits until the log contains `text`; false after `timeout` seconds.
    func waitForLog(_ text: String, timeout: Double = 60) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if log.contains(text) { return true }
            usleep(10_000)
        }
        return log.contains(text)
    }

    /// Whether the process is still running.
    var isRunning: Bool { reap(block: false) == nil }

    /// Waits for the process to exit; its exit status (or 128 + signal), or `nil` on timeout.
    func waitForExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let status = reap(block: false) { return status }
            if Date() >= deadline { return nil }
            usleep(10_000)
        }
    }

    // MARK: Controlling

    /// Sends a signal (SIGTERM, SIGINT, SIGSTOP...).
    func signal(_ number: Int32) {
        if reap(block: false) == nil { _ = Foundation.kill(pid, number) }
    }

    /// SIGTERM, wait up to `timeout` seconds, then SIGKILL. Returns the exit status.
    @discardableResult
    func stop(timeout: Double = 60) -> Int32? {
        signal(SIGTERM)
        if let status = waitForExit(timeout: timeout) { return status }
        kill()
        return waitForExit(timeout: 5)
    }

    /// SIGKILL and reap.
    func kill() {
        if reap(block: false) == nil {
            _ = Foundation.kill(pid, SIGKILL)
            _ = reap(block: true)
        }
    }

    // MARK: Internals

    private func reap(block: Bool) -> Int32? {
        lock.lock()
        defer { lock.unlock() }
        if let status = exitStatus { return status }
        var status: Int32 = 0
        let result = waitpid(pid, &status, block ? 0 : WNOHANG)
        guard result == pid else { return nil }
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros; decode the status word by hand.
        let code = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        exitStatus = code
        return code
    }

    private func removeDataDirectory() {
        guard !dataDirectory.isEmpty else { return }
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }

    private var finished = false
    /// Whether the stderr reader saw EOF.
    private var readerFinished: Bool {
        lock.lock()
        defer { lock.unlock() }
        return finished
    }

    private func startReader() {
        let fd = stderrFD
        let thread = Thread { [weak self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0, let self else { break }
                self.lock.lock()
                self.output.append(contentsOf: buffer[0..<n])
                self.lock.unlock()
            }
            close(fd)
            if let self {
                self.lock.lock()
                self.finished = true
                self.lock.unlock()
            }
        }
        thread.name = "snapsyncd stderr"
        reader = thread
        thread.start()
    }

    private func waitForListening(timeout: Double) throws -> (String, Int) {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let text = log
            if let range = text.range(of: "listening on ") {
                let rest = text[range.upperBound...].prefix { $0 != " " && $0 != "\n" }
                if let colon = rest.lastIndex(of: ":"), text[range.upperBound...].contains("\n"),
                    let port = Int(rest[rest.index(after: colon)...])
                {
                    var host = String(rest[..<colon])
                    if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
                    return (host, port)
                }
            }
            if let status = reap(block: false) {
                throw DaemonError("snapsyncd exited with status \(status) before listening", log: text)
            }
            if Date() >= deadline {
                throw DaemonError("snapsyncd logged no 'listening on HOST:PORT' within \(timeout) s", log: text)
            }
            usleep(10_000)
        }
    }

    /// `$SNAPSYNCD`, else next to the test bundle, else `<repo>/.build/debug/snapsyncd`.
    static func locateBinary(filePath: String = #filePath) throws -> String {
        var candidates: [String] = []
        if let path = ProcessInfo.processInfo.environment["SNAPSYNCD"], !path.isEmpty {
            candidates.append(path)
        } else {
            let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            // .../debug/SnapSyncPackageTests.xctest (Linux) or .../debug/X.xctest/Contents/MacOS/X.
            var directory = executable.deletingLastPathComponent()
            for _ in 0..<4 {
                candidates.append(directory.appendingPathComponent("snapsyncd").path)
                directory = directory.deletingLastPathComponent()
            }
            // <repo>/Tests/SnapSyncIntegrationTests/Support/DaemonProcess.swift
            let repo = URL(fileURLWithPath: filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent()
            candidates.append(repo.appendingPathComponent(".build/debug/snapsyncd").path)
        }
        for path in candidates where access(path, X_OK) == 0 { return path }
        throw DaemonError("snapsyncd binary not found (tried \(candidates.joined(separator: ", "))): build it (swift build) or set SNAPSYNCD")
    }

    /// posix_spawn with stdin from /dev/null, stdout to /dev/null (or with stderr, when
    /// `captureStdout`) and stderr to a pipe.
    private static func spawn(
        _ argv: [String], environment: [String: String],
        captureStdout: Bool = false
    ) throws -> (pid_t, Int32) {
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw DaemonError("pipe failed: errno \(errno)") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if captureStdout {
            posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 2)
        posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
        posix_spawn_file_actions_addclose(&actions, pipeFDs[1])
        let cArgs = argv.map { strdup($0) } + [nil]
        let cEnv = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            cArgs.forEach { free($0) }
            cEnv.forEach { free($0) }
        }
        // The child starts with no blocked signals and default dispositions: the test runner's
        // threads may block or ignore SIGTERM/SIGINT, and a spawned process inherits both, which
        // would make the daemon deaf to the very signals the tests send.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, argv[0], &actions, &attributes, cArgs, cEnv)
        close(pipeFDs[1])
        guard rc == 0 else {
            close(pipeFDs[0])
            throw DaemonError("posix_spawn \(argv[0]) failed: \(String(cString: strerror(rc)))")
        }
        return (pid, pipeFDs[0])
    }
}

/// A daemon that would not start, with its log.
struct DaemonError: Error, CustomStringConvertible {
    var message: String
    var log: String
    init(_ message: String, log: String = "") {
        self.message = message
        self.log = log
    }
    var description: String { log.isEmpty ? message : "\(message)\n--- snapsyncd log ---\n\(log)" }
}
