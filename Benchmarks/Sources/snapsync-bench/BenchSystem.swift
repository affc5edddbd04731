// The one place snapsync-bench makes system calls for its socket, file and /proc work: epoll and
// CPU affinity through the CEpoll C target (Glibc does not import them), everything else (the
// monotonic clock, /proc readers, sockets, files) through Glibc. Processes are started in
// BenchProcesses.swift. Linux only.
#if canImport(Glibc)
    import CEpoll
    import Glibc
    #if canImport(CoreFoundation)
        // With the SnapSync client in the graph, Foundation's CoreFoundation declares Glibc's
        // `stat` and `dirent` too and MemberImportVisibility asks for its import; `S_IF*` are
        // then ambiguous, hence `Glibc.S_IF*`.
        import CoreFoundation
    #endif

    enum BenchSystem {
        /// Writes to standard error (fd 2) unbuffered; Glibc's `stderr` is not concurrency-safe in Swift 6.
        static func printError(_ text: String) {
            var bytes = Array(text.utf8)
            bytes.withUnsafeMutableBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(2, raw.baseAddress! + offset, raw.count - offset)
                    if n <= 0 {
                        if errno == EINTR { continue }
                        return
                    }
                    offset += n
                }
            }
        }

        /// "snapsync-bench: `message`" on stderr, then exit status 1 (the atexit handler stops
        /// the servers).
        static func die(_ message: String) -> Never {
            printError("snapsync-bench: \(message)\n")
            exit(1)
        }

        /// A NUL-terminated C buffer as a String.
        static func string(cString buffer: [CChar]) -> String {
            let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            return String(decoding: bytes, as: UTF8.self)
        }

        /// The index just past the first occurrence of `needle` in `text`, or nil (no Foundation here).
        static func find(_ needle: String, in text: String) -> String.Index? {
            let n = Array(needle.utf8)
            let t = Array(text.utf8)
            guard !n.isEmpty, t.count >= n.count else { return nil }
            for start in 0...(t.count - n.count) where t[start] == n[0] && t[start..<(start + n.count)].elementsEqual(n) {
                return text.utf8.index(text.utf8.startIndex, offsetBy: start + n.count)
            }
            return nil
        }

        static func isExecutable(_ path: String) -> Bool { access(path, X_OK) == 0 }

        static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

        /// The working directory and this executable's path (/proc/self/exe), those that can be read.
        static var currentDirectoryAndExecutable: [String] {
            var paths: [String] = []
            var buffer = [CChar](repeating: 0, count: 4096)
            if getcwd(&buffer, buffer.count) != nil { paths.append(string(cString: buffer)) }
            let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
            if n > 0 {
                buffer[n] = 0
                paths.append(string(cString: buffer))
            }
            return paths
        }

        /// `name` in $PATH (or /usr/sbin, /usr/bin, /usr/local/bin), if it is executable there.
        static func findInPath(_ name: String) -> String? {
            let path = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
            for dir in (path + ":/usr/sbin:/usr/bin:/usr/local/bin").split(separator: ":") {
                let candidate = "\(dir)/\(name)"
                if isExecutable(candidate) { return candidate }
            }
            return nil
        }

        /// $TMPDIR, else `fallback`.
        static func temporaryBase(default fallback: String) -> String {
            getenv("TMPDIR").map { String(cString: $0) } ?? fallback
        }

        static func modificationTime(_ path: String) -> Int? {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            return info.st_mtim.tv_sec
        }

        /// The names in `directory` but "." and "..", empty if it cannot be read.
        static func directoryEntries(_ directory: String) -> [String] {
            guard let dir = opendir(directory) else { return [] }
            defer { closedir(dir) }
            var names: [String] = []
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name != "." && name != ".." { names.append(name) }
            }
            return names
        }

        /// The newest file under `path` (recursive) and its modification time; `path` itself if it
        /// is not a directory.
        static func newestModification(under path: String) -> (time: Int, path: String) {
            var newest = (time: modificationTime(path) ?? 0, path: path)
            var info = stat()
            guard stat(path, &info) == 0, info.st_mode & mode_t(Glibc.S_IFMT) == mode_t(Glibc.S_IFDIR) else { return newest }
            newest.time = 0
            for name in directoryEntries(path) {
                let found = newestModification(under: path + "/" + name)
                if found.time > newest.time { newest = found }
            }
            return newest
        }

        /// Registers `fd` with `events` (EPOLLIN, …), tagging it with `token` (epoll_ctl).
        static func epollSet(_ epfd: Int32, _ op: Int32, _ fd: Int32, events: UInt32, token: UInt64) {
            var event = epoll_event()
            event.events = events
            event.data.u64 = token
            if epoll_ctl(epfd, op, fd, &event) != 0 { fail("epoll_ctl(fd \(fd))") }
        }

        /// Waits for events, at most `timeoutNs` nanoseconds (see cepoll_wait_ns).
        @inline(__always)
        static func epollWaitNs(_ epfd: Int32, _ events: UnsafeMutablePointer<epoll_event>, _ max: Int32, timeoutNs: UInt64) -> Int32 {
            cepoll_wait_ns(epfd, events, max, timeoutNs)
        }

        /// Pins the calling thread (and whatever it spawns afterwards) to one CPU (sched_setaffinity).
        /// Returns false if the CPU does not exist or the call is refused.
        @discardableResult
        static func pinCurrentThread(toCPU cpu: Int) -> Bool {
            cpu >= 0 && cpu <= Int(Int32.max) && cepoll_pin_to_cpu(0, Int32(cpu)) == 0
        }

        /// Restores affinity to every online CPU.
        static func unpinCurrentThread() {
            _ = cepoll_unpin(0)
        }

        static var onlineCPUs: Int { Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

        @inline(__always)
        static func nowNs() -> UInt64 {
            var ts = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ts)
            return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
        }

        static func sleepMs(_ ms: Int) {
            var request = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
            var remaining = timespec()
            while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
        }

        /// `what` failed with errno: exits with both.
        static func fail(_ what: String) -> Never {
            die("\(what): \(String(cString: strerror(errno)))")
        }

        static func readFile(_ path: String) -> String? {
            let fd = open(path, O_RDONLY)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, 4096) }
                if n <= 0 { break }
                bytes.append(contentsOf: chunk[0..<n])
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        /// utime + stime of a process in clock ticks, from /proc/PID/stat fields 14 and 15.
        static func cpuTicks(pid: Int32) -> UInt64? {
            guard let stat = readFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return nil }
            // Fields after the command name start at field 3 (state).
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
            return user + system
        }

        /// One CPU's jiffies from /proc/stat: (busy, softirq, total). Busy counts user, nice, system,
        /// irq, softirq and steal: it includes the loopback TCP receive work that runs in softirq
        /// and is not charged to any task (on IRQ_TIME_ACCOUNTING kernels), and anything else that
        /// ran on that CPU.
        static func cpuJiffies(cpu: Int) -> (busy: UInt64, softirq: UInt64, total: UInt64)? {
            guard let stat = readFile("/proc/stat") else { return nil }
            for line in stat.split(separator: "\n") where line.hasPrefix("cpu\(cpu) ") {
                let values = line.split(separator: " ").dropFirst().compactMap { UInt64($0) }
                guard values.count >= 8 else { return nil }
                let total = values[0..<8].reduce(0, +)
                let idle = values[3] + values[4]
                return (total - idle, values[6], total)
            }
            return nil
        }

        static var ticksPerSecond: Double { Double(sysconf(Int32(_SC_CLK_TCK))) }

        /// VmRSS of a process in bytes, from /proc/PID/status.
        static func residentBytes(pid: Int32) -> Int? { statusBytes(pid: pid, field: "VmRSS") }

        /// RssAnon of a process in bytes: its resident heap, stacks and anonymous maps, without
        /// the pages of its binary and libraries (RssFile), which grow as code first runs.
        static func anonymousResidentBytes(pid: Int32) -> Int? { statusBytes(pid: pid, field: "RssAnon") }

        private static func statusBytes(pid: Int32, field: String) -> Int? {
            guard let status = readFile("/proc/\(pid)/status") else { return nil }
            for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
                let parts = line.split(separator: " ", omittingEmptySubsequences: true)
                if parts.count >= 2, let kb = Int(parts[1]) { return kb * 1024 }
            }
            return nil
        }

        /// Raises the open-file limit to its hard limit (1,000 subscribers need 1,001 sockets).
        static func raiseFileLimit(atLeast wanted: Int) {
            var limit = rlimit()
            guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
            let target = max(limit.rlim_cur, min(limit.rlim_max, rlim_t(wanted)))
            limit.rlim_cur = target
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            if target < rlim_t(wanted) {
                printError("snapsync-bench: open-file limit is \(target), below the \(wanted) needed (ulimit -n)\n")
            }
        }

        /// A blocking TCP connection to host:port with TCP_NODELAY (connect(2)).
        static func connectTCP(host: String, port: Int) -> Int32 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            if fd < 0 { fail("socket") }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            guard inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host, &address.sin_addr) == 1 else {
                die("--host must be an IPv4 address, not \(host)")
            }
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            if rc != 0 { fail("connect \(host):\(port)") }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            return fd
        }

        /// True if something accepts connections on 127.0.0.1:port.
        static func canConnect(port: Int) -> Bool {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            } == 0
        }

        /// A loopback port nobody listens on right now (bind to port 0, read it back, close).
        static func freeLoopbackPort() -> Int {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            if fd < 0 { fail("socket") }
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let ok = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            if !ok { fail("bind 127.0.0.1:0") }
            return Int(UInt16(bigEndian: address.sin_port))
        }

        /// A new directory `base/prefix-XXXXXX` (mkdtemp); exits if it cannot be made.
        static func makeTemporaryDirectory(under base: String, prefix: String) -> String {
            var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
            guard mkdtemp(&template) != nil else { fail("mkdtemp under \(base)") }
            return string(cString: template)
        }

        static func setNonBlocking(_ fd: Int32) {
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        }

        /// Writes everything, blocking (setup only); through TLS when `fd` has a session (BenchTLS).
        static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
            bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = BenchTLS.write(fd, raw.baseAddress! + offset, raw.count - offset)
                    if n < 0 {
                        if errno == EINTR { continue }
                        if errno == EAGAIN {  // a non-blocking socket with a full send buffer
                            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                            _ = poll(&p, 1, 100)
                            continue
                        }
                        fail("write")
                    }
                    offset += n
                }
            }
        }
    }
#endif
