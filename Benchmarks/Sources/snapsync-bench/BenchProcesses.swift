// The one process runner of snapsync-bench: it starts the servers the benchmarks measure
// (snapsyncd on an ephemeral port, which prints "listening on HOST:PORT"; Debian's redis-server
// on a free port), stops them, runs the few file commands the benchmarks need (cp -a, rm -rf,
// sync) to completion, and kills whatever is still running when the bench exits early.
// A server started with a CPU is spawned while the calling thread is pinned to it, so the child
// and every thread it creates inherit that affinity. Output goes to a log file, never a pipe: a
// daemon that logs into a full pipe would block.
#if canImport(Glibc)
    import Glibc

    struct ServerProcess {
        var pid: Int32
        var host: String
        var port: Int
        var logPath: String
        var name: String
        /// A data directory the benchmark made for this process, removed by `stop()`.
        var temporaryDirectory: String? = nil

        /// SIGTERM, then SIGKILL after 3 s; reaps the child; removes its temporary data directory
        /// and its log.
        func stop() {
            ServerProcess.terminate(pid, graceMs: 3000)
            if let dir = temporaryDirectory { BenchCommand.removeTree(dir) }
            unlink(logPath)
        }

        var hasExited: Bool {
            var status: Int32 = 0
            return waitpid(pid, &status, WNOHANG) == pid
        }

        /// The log's text so far.
        var log: String { BenchSystem.readFile(logPath) ?? "" }

        // MARK: Starting

        /// posix_spawn(argv) with stdout and stderr written to `logPath`, pinned to `cpu` if given;
        /// the child is killed if the bench exits before `terminate` reaps it.
        static func spawn(_ argv: [String], logPath: String, cpu: Int?) -> Int32 {
            if let cpu { BenchSystem.pinCurrentThread(toCPU: cpu) }
            defer { if cpu != nil { BenchSystem.unpinCurrentThread() } }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            let cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
            defer { for arg in cArgs { free(arg) } }
            var pid: Int32 = 0
            let rc = posix_spawn(&pid, argv[0], &actions, nil, cArgs, environ)
            if rc != 0 { BenchSystem.die("cannot start \(argv[0]): \(String(cString: strerror(rc)))") }
            BenchCleanup.remember(pid)
            return pid
        }

        /// SIGTERM (none if `graceMs` is 0), SIGKILL once `graceMs` have passed, and the child reaped.
        static func terminate(_ pid: Int32, graceMs: Int) {
            BenchCleanup.forget(pid)
            var status: Int32 = 0
            if graceMs > 0 {
                kill(pid, SIGTERM)
                for _ in 0..<(graceMs / 10) {
                    if waitpid(pid, &status, WNOHANG) == pid { return }
                    BenchSystem.sleepMs(10)
                }
            }
            kill(pid, SIGKILL)
            _ = waitpid(pid, &status, 0)
        }

        static func logPath(_ name: String) -> String {
            "\(BenchSystem.temporaryBase(default: "/tmp"))/snapsync-bench-\(getpid())-\(name).log"
        }

        /// Waits until the daemon `pid` has written "listening on HOST:PORT" to `log`; nil once
        /// `timeoutNs` have passed. Exits the bench if the daemon exits first.
        static func waitForListening(pid: Int32, log: String, binary: String, timeoutNs: UInt64) -> (host: String, port: Int, log: String)? {
            let deadline = BenchSystem.nowNs() + timeoutNs
            while BenchSystem.nowNs() < deadline {
                if let text = BenchSystem.readFile(log), let found = BenchSystem.find("listening on ", in: text) {
                    let rest = text[found...].prefix { !$0.isWhitespace }
                    if let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]) {
                        var host = String(rest[..<colon])
                        if host.hasPrefix("[") || host == "0.0.0.0" || host == "localhost" { host = "127.0.0.1" }
                        return (host, port, text)
                    }
                }
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid {
                    BenchCleanup.forget(pid)
                    BenchSystem.die("\(binary) exited before listening; its output:\n\(BenchSystem.readFile(log) ?? "")")
                }
                BenchSystem.sleepMs(2)
            }
            return nil
        }

        /// snapsyncd with `--host 127.0.0.1 --port 0`, a fresh temporary `--data-dir` under
        /// `dataBase` (default $TMPDIR or /tmp; none if `arguments` name one) and `arguments`,
        /// once it listens.
        static func startDaemon(binary: String, arguments: [String], cpu: Int?, dataBase: String? = nil) -> ServerProcess {
            let log = logPath("snapsyncd")
            var argv = [binary, "--host", "127.0.0.1", "--port", "0"]
            var temporary: String?
            if !arguments.contains(where: { $0 == "--data-dir" || $0.hasPrefix("--data-dir=") }) {
                let base = dataBase ?? BenchSystem.temporaryBase(default: "/tmp")
                temporary = BenchCleanup.temporaryDirectory(under: base, prefix: "snapsync-bench-data")
                argv += ["--data-dir", temporary!]
            }
            let pid = spawn(argv + arguments, logPath: log, cpu: cpu)
            guard let listening = waitForListening(pid: pid, log: log, binary: binary, timeoutNs: 20_000_000_000) else {
                terminate(pid, graceMs: 0)
                BenchSystem.die("\(binary) printed no \"listening on HOST:PORT\" within 20 s (log: \(log))")
            }
            return ServerProcess(
                pid: pid, host: listening.host, port: listening.port, logPath: log, name: "snapsyncd", temporaryDirectory: temporary)
        }

        /// `snapsync-ceiling -p P -t threads` on a free loopback port, once it accepts connections.
        static func startCeiling(binary: String, threads: Int, cpu: Int?) -> ServerProcess {
            let port = BenchSystem.freeLoopbackPort()
            let log = logPath("ceiling")
            let pid = spawn([binary, "-p", String(port), "-t", String(threads)], logPath: log, cpu: cpu)
            return accepting(pid: pid, port: port, log: log, name: "snapsync-ceiling", temporaryDirectory: nil)
        }

        /// The server `pid` spawned to listen on loopback `port`, once it accepts connections;
        /// exits with its log if it ends first or takes more than 10 s.
        private static func accepting(pid: Int32, port: Int, log: String, name: String, temporaryDirectory: String?) -> ServerProcess {
            let deadline = BenchSystem.nowNs() + 10_000_000_000
            while BenchSystem.nowNs() < deadline {
                if BenchSystem.canConnect(port: port) {
                    return ServerProcess(pid: pid, host: "127.0.0.1", port: port, logPath: log, name: name, temporaryDirectory: temporaryDirectory)
                }
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid {
                    BenchCleanup.forget(pid)
                    BenchSystem.die("\(name) exited; its output:\n\(BenchSystem.readFile(log) ?? "")")
                }
                BenchSystem.sleepMs(20)
            }
            terminate(pid, graceMs: 0)
            BenchSystem.die("\(name) did not accept connections within 10 s (log: \(log))")
        }

        /// `redis-server --bind 127.0.0.1 --port P` and `arguments` (its persistence settings) on a
        /// free port, once it accepts connections.
        /// `temporaryDirectory` is removed by `stop()`.
        /// With `tls`, P is its only port and serves TLS (`--port 0 --tls-port P`) with that
        /// certificate, clients not asked for one.
        static func startRedis(
            binary: String, arguments: [String], cpu: Int?, temporaryDirectory: String? = nil, tls: BenchTLS.Files? = nil
        ) -> ServerProcess {
            let port = BenchSystem.freeLoopbackPort()
            let log = logPath("redis")
            var ports = ["--port", String(port)]
            if let tls {
                ports = [
                    "--port", "0", "--tls-port", String(port), "--tls-cert-file", tls.certificate, "--tls-key-file", tls.key,
                    "--tls-ca-cert-file", tls.certificate, "--tls-auth-clients", "no",
                ]
            }
            let pid = spawn([binary, "--bind", "127.0.0.1"] + ports + arguments, logPath: log, cpu: cpu)
            return accepting(pid: pid, port: port, log: log, name: "redis-server", temporaryDirectory: temporaryDirectory)
        }
    }

    /// Commands run to completion, through the same posix_spawn as the servers (no shell).
    enum BenchCommand {
        /// Runs `argv` (argv[0] looked up in PATH), output to the bench's stderr; true if it exits 0.
        @discardableResult
        static func run(_ argv: [String]) -> Bool {
            let cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
            defer { for arg in cArgs { free(arg) } }
            var pid: Int32 = 0
            guard posix_spawnp(&pid, argv[0], nil, nil, cArgs, environ) == 0 else { return false }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            // WIFEXITED && WEXITSTATUS == 0, which Glibc does not import as functions.
            return status & 0x7F == 0 && (status >> 8) & 0xFF == 0
        }

        /// rm -rf of a directory the bench made (its name holds "snapsync-bench-"); others are refused.
        static func removeTree(_ path: String) {
            guard path.hasPrefix("/"), path.contains("snapsync-bench-") else { return }
            run(["rm", "-rf", path])
        }
    }

    /// What the bench must not leave behind when it exits early (a setup failure calls exit(1), a
    /// Ctrl-C): running children are killed and temporary directories removed by an atexit
    /// handler. Touched by the main thread only.
    enum BenchCleanup {
        nonisolated(unsafe) private static var running: [Int32] = []
        nonisolated(unsafe) private static var directories: [String] = []
        nonisolated(unsafe) private static var installed = false

        static func remember(_ pid: Int32) {
            running.append(pid)
            install()
        }

        static func forget(_ pid: Int32) { running.removeAll { $0 == pid } }

        /// A new directory `base/prefix-XXXXXX`, removed at exit.
        static func temporaryDirectory(under base: String, prefix: String) -> String {
            let path = BenchSystem.makeTemporaryDirectory(under: base, prefix: prefix)
            directories.append(path)
            install()
            return path
        }

        private static func install() {
            guard !installed else { return }
            installed = true
            atexit {
                for pid in BenchCleanup.running { kill(pid, SIGKILL) }
                for dir in BenchCleanup.directories { BenchCommand.removeTree(dir) }
            }
            // Ctrl-C or a kill must not leave the servers running: exit() runs the handler above.
            // (Not async-signal-safe, but the bench's main thread only waits on sockets then.)
            for signal in [SIGINT, SIGTERM, SIGHUP] {
                _ = Glibc.signal(signal) { number in exit(128 + number) }
            }
        }
    }
#endif
