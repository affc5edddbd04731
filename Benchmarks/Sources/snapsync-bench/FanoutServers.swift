// Starting and stopping the servers the fan-out benchmark measures: the snapsyncd binary on an
// ephemeral port (it prints "listening on HOST:PORT"), and Debian's redis-server for --compare.
// Each is started while the calling thread is pinned to the server CPU, so the child and every
// thread it creates inherit that affinity; the generator then pins itself to its own CPU.
// Their output goes to a log file, never a pipe: a daemon that logs into a full pipe would block.
#if canImport(Glibc)
    import Glibc

    struct FanoutServerProcess {
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
            FanoutServers.forget(pid)
            defer {
                if let dir = temporaryDirectory, dir.hasPrefix("/"), dir.contains("snapsync-bench-") {
                    _ = system("rm -rf '\(dir)'")
                }
                unlink(logPath)
            }
            kill(pid, SIGTERM)
            var status: Int32 = 0
            for _ in 0..<300 {
                if waitpid(pid, &status, WNOHANG) == pid { return }
                BenchSystem.sleepMs(10)
            }
            kill(pid, SIGKILL)
            _ = waitpid(pid, &status, 0)
        }

        var hasExited: Bool {
            var status: Int32 = 0
            return waitpid(pid, &status, WNOHANG) == pid
        }
    }

    /// The index just past the first occurrence of `needle` in `text`, or nil (no Foundation here).
    func fanoutFind(_ needle: String, in text: String) -> String.Index? {
        let n = Array(needle.utf8)
        let t = Array(text.utf8)
        guard !n.isEmpty, t.count >= n.count else { return nil }
        for start in 0...(t.count - n.count) where t[start] == n[0] && Array(t[start..<(start + n.count)]) == n {
            return text.utf8.index(text.utf8.startIndex, offsetBy: start + n.count)
        }
        return nil
    }

    enum FanoutServers {
        /// Children still running, killed by an atexit handler when the benchmark exits early
        /// (a setup failure calls exit(1)), so no daemon outlives it. Loop thread only.
        nonisolated(unsafe) private static var running: [Int32] = []
        nonisolated(unsafe) private static var directories: [String] = []
        nonisolated(unsafe) private static var cleanupInstalled = false

        static func remember(_ pid: Int32) {
            running.append(pid)
            installCleanup()
        }

        static func remember(directory: String) {
            directories.append(directory)
            installCleanup()
        }

        private static func installCleanup() {
            guard !cleanupInstalled else { return }
            cleanupInstalled = true
            atexit {
                for pid in FanoutServers.running { kill(pid, SIGKILL) }
                for dir in FanoutServers.directories { _ = system("rm -rf '\(dir)'") }
            }
            // Ctrl-C or a kill must not leave the servers running: exit() runs the handler above.
            // (Not async-signal-safe, but this process is one thread that only waits on epoll.)
            for signal in [SIGINT, SIGTERM, SIGHUP] {
                _ = Glibc.signal(signal) { number in exit(128 + number) }
            }
        }

        static func forget(_ pid: Int32) { running.removeAll { $0 == pid } }

        /// The repository root: the nearest directory holding Package.swift above the current
        /// directory or above this executable.
        static func repositoryRoot() -> String? {
            var candidates: [String] = []
            var buffer = [CChar](repeating: 0, count: 4096)
            if getcwd(&buffer, buffer.count) != nil { candidates.append(fanoutString(cString: buffer)) }
            if let exe = executablePath() { candidates.append(exe) }
            for start in candidates {
                var dir = start
                while !dir.isEmpty && dir != "/" {
                    if access(dir + "/Package.swift", F_OK) == 0 && access(dir + "/Sources/snapsyncd", F_OK) == 0 {
                        return dir
                    }
                    dir = parent(of: dir)
                }
            }
            return nil
        }

        static func executablePath() -> String? {
            var buffer = [CChar](repeating: 0, count: 4096)
            let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
            guard n > 0 else { return nil }
            buffer[n] = 0
            return fanoutString(cString: buffer)
        }

        static func parent(of path: String) -> String {
            guard let slash = path.lastIndex(of: "/") else { return "" }
            return slash == path.startIndex ? "/" : String(path[..<slash])
        }

        /// --server-binary; else <repo>/.build/release/snapsyncd (or the release snapsyncd next to
        /// this executable) if it is not older than the daemon's sources, since `swift run
        /// snapsync-bench` does not rebuild it; else one built now with `swift build -c release
        /// --product snapsyncd`; if that fails, whatever exists (a stale release build, then
        /// <repo>/.build/debug/snapsyncd), with a warning.
        static func daemonBinary(explicit: String?) -> String {
            if let explicit {
                guard access(explicit, X_OK) == 0 else {
                    fanoutErr("snapsync-bench: --server-binary \(explicit) is not an executable\n")
                    exit(1)
                }
                return explicit
            }
            let root = repositoryRoot()
            var candidates: [String] = []
            if let root {
                candidates += [root + "/.build/release/snapsyncd", root + "/.build/debug/snapsyncd"]
            }
            if let exe = executablePath() { candidates.append(parent(of: exe) + "/snapsyncd") }
            let existing = candidates.filter { access($0, X_OK) == 0 }
            let sources =
                root.map { root in
                    ["SnapSyncServer", "SnapSyncWire", "SnapSyncModel", "snapsyncd"]
                        .map { newestModification(under: root + "/Sources/" + $0) }.max() ?? 0
                } ?? 0
            // A release build as new as the sources: <repo>/.build/release, or next to this
            // executable when that is a release build (another --scratch-path). Never a debug
            // daemon while a release one can be built: it would measure the debug build.
            let releases = existing.filter { $0.contains("/release/") }
            if let current = releases.first(where: { (modificationTime($0) ?? 0) >= sources }) {
                return current
            }
            if let root, findInPath("swift") != nil {
                let command = "cd '\(root)' && swift build -c release --product snapsyncd >&2"
                fanoutErr("snapsync-bench: no release snapsyncd as new as its sources; building it: \(command)\n")
                if system(command) == 0, access(root + "/.build/release/snapsyncd", X_OK) == 0 {
                    return root + "/.build/release/snapsyncd"
                }
            }
            if let fallback = releases.first ?? existing.first {
                fanoutErr(
                    "snapsync-bench: warning: using \(fallback)\(fallback.contains("/release/") ? ", which is older than the daemon's sources" : ", a debug build: its figures say nothing about speed")\n"
                )
                return fallback
            }
            fanoutErr(
                """
                snapsync-bench: no snapsyncd binary found (looked at \(candidates.joined(separator: ", "))).
                Build it with `swift build -c release --product snapsyncd`, or pass --server-binary PATH,
                or --host/--port of a running daemon.

                """)
            exit(1)
        }

        static func modificationTime(_ path: String) -> Int? {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            return info.st_mtim.tv_sec
        }

        /// The newest modification time of any file under `directory` (recursive), 0 if none.
        static func newestModification(under directory: String) -> Int {
            guard let dir = opendir(directory) else { return modificationTime(directory) ?? 0 }
            defer { closedir(dir) }
            var newest = 0
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name == "." || name == ".." { continue }
                let path = directory + "/" + name
                if Int32(entry.pointee.d_type) == Int32(DT_DIR) {
                    newest = max(newest, newestModification(under: path))
                } else {
                    newest = max(newest, modificationTime(path) ?? 0)
                }
            }
            return newest
        }

        static func findInPath(_ name: String) -> String? {
            let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
            for dir in (path + ":/usr/sbin:/usr/bin:/usr/local/bin").split(separator: ":") {
                let candidate = "\(dir)/\(name)"
                if access(candidate, X_OK) == 0 { return candidate }
            }
            return nil
        }

        /// posix_spawn(argv) with stdout and stderr appended to `logPath`, pinned to `cpu` if given.
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
            if rc != 0 {
                fanoutErr("snapsync-bench: cannot start \(argv[0]): \(String(cString: strerror(rc)))\n")
                exit(1)
            }
            remember(pid)
            return pid
        }

        static func logPath(_ name: String) -> String {
            let dir = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
            return "\(dir)/snapsync-bench-\(getpid())-\(name).log"
        }

        /// Starts snapsyncd with `--host 127.0.0.1 --port 0`, a fresh temporary `--data-dir` (unless
        /// `extraArguments` name one) and `extraArguments`, and waits for its "listening on HOST:PORT".
        static func startDaemon(binary: String, extraArguments: [String], cpu: Int?) -> FanoutServerProcess {
            let log = logPath("snapsyncd")
            var arguments = [binary, "--host", "127.0.0.1", "--port", "0"]
            var temporary: String?
            if !extraArguments.contains(where: { $0 == "--data-dir" || $0.hasPrefix("--data-dir=") }) {
                let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
                temporary = BenchSystem.makeTemporaryDirectory(under: base, prefix: "snapsync-bench-data")
                remember(directory: temporary!)
                arguments += ["--data-dir", temporary!]
            }
            let pid = spawn(arguments + extraArguments, logPath: log, cpu: cpu)
            let deadline = BenchSystem.nowNs() + 20_000_000_000
            while BenchSystem.nowNs() < deadline {
                if let text = BenchSystem.readFile(log), let found = fanoutFind("listening on ", in: text) {
                    let rest = text[found...].prefix { !$0.isWhitespace }
                    if let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]) {
                        var host = String(rest[..<colon])
                        if host.hasPrefix("[") || host == "0.0.0.0" || host == "localhost" { host = "127.0.0.1" }
                        return FanoutServerProcess(
                            pid: pid, host: host, port: port, logPath: log, name: "snapsyncd",
                            temporaryDirectory: temporary)
                    }
                }
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid {
                    fanoutErr("snapsync-bench: \(binary) exited before listening; its output:\n\(BenchSystem.readFile(log) ?? "")\n")
                    exit(1)
                }
                BenchSystem.sleepMs(20)
            }
            kill(pid, SIGKILL)
            fanoutErr("snapsync-bench: \(binary) printed no \"listening on HOST:PORT\" within 20 s (log: \(log))\n")
            exit(1)
        }

        /// Debian's redis-server, installed with apt-get if missing.
        static func redisBinary(explicit: String?) -> String {
            if let explicit { return explicit }
            if let found = findInPath("redis-server") { return found }
            let sudo = getuid() == 0 ? "" : "sudo -n "
            let install = "\(sudo)apt-get install -y --no-install-recommends redis-server"
            fanoutErr("snapsync-bench: redis-server not found; installing it: \(install)\n")
            if system("\(install) >&2 || (\(sudo)apt-get update >&2 && \(install) >&2)") == 0,
                let found = findInPath("redis-server")
            {
                return found
            }
            fanoutErr(
                """
                snapsync-bench: could not install redis-server. Install it with
                    sudo apt-get update && sudo apt-get install -y redis-server
                (Debian/Ubuntu), or pass --redis-binary PATH.

                """)
            exit(1)
        }

        /// `redis-server --bind 127.0.0.1 --port P --save '' --appendonly no` on a free port.
        static func startRedis(binary: String, cpu: Int?) -> FanoutServerProcess {
            let port = BenchSystem.freeLoopbackPort()
            let log = logPath("redis")
            let pid = spawn(
                [binary, "--bind", "127.0.0.1", "--port", String(port), "--save", "", "--appendonly", "no"],
                logPath: log, cpu: cpu)
            let deadline = BenchSystem.nowNs() + 10_000_000_000
            while BenchSystem.nowNs() < deadline {
                if BenchSystem.canConnect(port: port) {
                    return FanoutServerProcess(pid: pid, host: "127.0.0.1", port: port, logPath: log, name: "redis-server")
                }
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid {
                    fanoutErr("snapsync-bench: redis-server exited; its output:\n\(BenchSystem.readFile(log) ?? "")\n")
                    exit(1)
                }
                BenchSystem.sleepMs(20)
            }
            kill(pid, SIGKILL)
            fanoutErr("snapsync-bench: redis-server did not accept connections within 10 s (log: \(log))\n")
            exit(1)
        }
    }
#endif
