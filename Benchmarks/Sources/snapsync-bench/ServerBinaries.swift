// Which server binaries the benchmarks start. The bench never builds or installs them: a
// missing or stale snapsyncd is an error that names the build command, so a figure always comes
// from the binary the reader thinks it does.
#if canImport(Glibc)
    enum ServerBinaries {
        /// The command that builds the daemon the bench starts by default.
        static let buildCommand = "swift build -c release --product snapsyncd"

        /// `explicit` (--server-binary) if it is executable; else <repo>/.build/release/snapsyncd
        /// if it is not older than the daemon's sources. Anything else exits with the command to run.
        static func daemon(explicit: String?) -> String {
            if let explicit {
                guard BenchSystem.isExecutable(explicit) else { BenchSystem.die("--server-binary \(explicit) is not an executable") }
                return explicit
            }
            guard let root = repositoryRoot() else {
                BenchSystem.die(
                    "cannot find the repository (a directory with Package.swift and Sources/snapsyncd above the current one): pass --server-binary PATH")
            }
            let binary = root + "/.build/release/snapsyncd"
            guard let built = BenchSystem.modificationTime(binary), BenchSystem.isExecutable(binary) else {
                BenchSystem.die("\(binary) does not exist. Build it first:\n    cd '\(root)' && \(buildCommand)\nor pass --server-binary PATH.")
            }
            let (newest, path) = newestDaemonSource(root: root)
            if newest > built {
                BenchSystem.die(
                    "\(binary) is older than \(path). Rebuild it:\n    cd '\(root)' && \(buildCommand)\nor pass --server-binary PATH to measure that binary as it is."
                )
            }
            return binary
        }

        /// `explicit` (--redis-binary), else redis-server from PATH; exits with the install command
        /// if there is none.
        static func redis(explicit: String?) -> String {
            if let explicit {
                guard BenchSystem.isExecutable(explicit) else { BenchSystem.die("--redis-binary \(explicit) is not an executable") }
                return explicit
            }
            if let found = BenchSystem.findInPath("redis-server") { return found }
            BenchSystem.die(
                "redis-server not found. Install it (Debian/Ubuntu):\n    sudo apt-get update && sudo apt-get install -y redis-server\nor pass --redis-binary PATH."
            )
        }

        /// `explicit` (--ceiling-binary), else the snapsync-ceiling built beside this executable
        /// (the Benchmarks package builds both).
        static func ceiling(explicit: String?) -> String {
            if let explicit {
                guard BenchSystem.isExecutable(explicit) else { BenchSystem.die("--ceiling-binary \(explicit) is not an executable") }
                return explicit
            }
            if let executable = BenchSystem.currentDirectoryAndExecutable.last, let slash = executable.lastIndex(of: "/") {
                let beside = executable[..<slash] + "/snapsync-ceiling"
                if BenchSystem.isExecutable(String(beside)) { return String(beside) }
            }
            BenchSystem.die(
                "snapsync-ceiling not found beside snapsync-bench. Build it:\n    cd Benchmarks && swift build -c release\nor pass --ceiling-binary PATH.")
        }

        /// The repository root: the nearest directory holding Package.swift and Sources/snapsyncd
        /// above the current directory or above this executable (Benchmarks/.build/...).
        static func repositoryRoot() -> String? {
            let candidates = BenchSystem.currentDirectoryAndExecutable
            for start in candidates {
                var dir = start
                while !dir.isEmpty && dir != "/" {
                    if BenchSystem.exists(dir + "/Package.swift") && BenchSystem.exists(dir + "/Sources/snapsyncd") { return dir }
                    guard let slash = dir.lastIndex(of: "/") else { break }
                    dir = String(dir[..<slash])
                }
            }
            return nil
        }

        /// The newest file snapsyncd is built from, and its time: Package.swift and every module
        /// under Sources/ but the client's, the example's and the test support's.
        static func newestDaemonSource(root: String) -> (time: Int, path: String) {
            var newest = (time: BenchSystem.modificationTime(root + "/Package.swift") ?? 0, path: root + "/Package.swift")
            let notTheDaemons: Set = ["SnapSync", "snapsync-example", "SnapSyncTestSupport"]
            for module in BenchSystem.directoryEntries(root + "/Sources") where !notTheDaemons.contains(module) {
                let found = BenchSystem.newestModification(under: root + "/Sources/" + module)
                if found.time > newest.time { newest = found }
            }
            return newest
        }
    }
#endif
