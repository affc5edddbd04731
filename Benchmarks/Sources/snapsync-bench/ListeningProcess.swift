// Which process listens on a loopback TCP port, for `cluster`'s CPU figures when the daemons
// were started by someone else: the listening socket's inode from /proc/net/tcp and tcp6
// (state 0A), then the process holding a descriptor "socket:[inode]" among /proc/*/fd. Only
// processes of the same user (or with the permission to read their fd directories) are seen.
// O(sockets + processes × descriptors), once per run.
#if canImport(Glibc)
    import Glibc

    enum ListeningProcess {
        /// The PID of the process listening on TCP `port`, or nil if none is found.
        static func pid(port: Int) -> Int32? {
            let inodes = listeningInodes(port: port)
            guard !inodes.isEmpty else { return nil }
            let wanted = Set(inodes.map { "socket:[\($0)]" })
            for name in BenchSystem.directoryEntries("/proc") {
                guard let pid = Int32(name) else { continue }
                let fdDirectory = "/proc/\(name)/fd"
                for fd in BenchSystem.directoryEntries(fdDirectory) {
                    if let target = link("\(fdDirectory)/\(fd)"), wanted.contains(target) { return pid }
                }
            }
            return nil
        }

        /// Inodes of the sockets in state LISTEN on `port` (IPv4 and IPv6).
        static func listeningInodes(port: Int) -> [String] {
            var inodes: [String] = []
            for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
                guard let text = BenchSystem.readFile(table) else { continue }
                // "sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...";
                // local_address is "HEXIP:HEXPORT".
                for line in text.split(separator: "\n").dropFirst() {
                    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                    guard fields.count > 9, fields[3] == "0A", let colon = fields[1].lastIndex(of: ":"),
                        Int(fields[1][fields[1].index(after: colon)...], radix: 16) == port
                    else { continue }
                    inodes.append(String(fields[9]))
                }
            }
            return inodes
        }

        private static func link(_ path: String) -> String? {
            var buffer = [CChar](repeating: 0, count: 256)
            let n = readlink(path, &buffer, buffer.count - 1)
            guard n > 0 else { return nil }
            buffer[n] = 0
            return BenchSystem.string(cString: buffer)
        }
    }
#endif
