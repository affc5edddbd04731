package import Logging

#if canImport(Glibc)
    internal import Glibc
#endif

/// The data directory: where durable state lives.
package enum DataDirectory {
    /// The default: `$STATE_DIRECTORY` when systemd set it (`StateDirectory=`; the first entry
    /// if it lists several), else `./data`.
    package static func defaultPath() -> String {
        defaultPath(stateDirectory: getenv("STATE_DIRECTORY").map { String(cString: $0) })
    }

    /// The default for a given `$STATE_DIRECTORY` value (`nil`: not set).
    package static func defaultPath(stateDirectory value: String?) -> String {
        if let value, let first = value.split(separator: ":").first, !first.isEmpty { return String(first) }
        return "./data"
    }

    /// Creates the directory and its missing parents (mode 0700), like `mkdir -p`, and checks
    /// that it is a writable directory.
    /// - Throws: `.badDirectory` saying what is wrong.
    package static func prepare(_ path: String) throws(StoreError) {
        guard !path.isEmpty else { throw StoreError.badDirectory(path: path, reason: "--data-dir must not be empty") }
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            try Directory.make(prefix, mode: 0o700)
            prefix += "/"
        }
        guard Directory.isDirectory(path) else {
            throw StoreError.badDirectory(path: path, reason: "it is not a directory")
        }
        guard Directory.isWritable(path) else {
            throw StoreError.badDirectory(path: path, reason: "it is not writable by this user: \(errnoText(errno))")
        }
    }

    /// Bytes an unprivileged process may still write on the filesystem holding `path`
    /// (statvfs: f_bavail × f_frsize), or nil when statvfs fails.
    package static func freeBytes(_ path: String) -> Int? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        let (bytes, overflow) = Int(clamping: info.f_bavail).multipliedReportingOverflow(by: Int(clamping: info.f_frsize))
        return overflow ? Int.max : bytes
    }

    /// The start-up free-space check: below `minimum` bytes free, the start is refused (the
    /// operator asked for it with --min-free-bytes); below `warnBelow` (one log segment), a
    /// warning, because writes will soon be rejected for lack of space while reads go on.
    /// - Throws: `.badDirectory` below `minimum`.
    package static func checkFreeSpace(_ path: String, minimum: Int, warnBelow: Int, logger: Logger) throws(StoreError) {
        guard let free = freeBytes(path) else {
            logger.warning("cannot tell the free space of data directory \(path): statvfs failed: errno \(errno)")
            return
        }
        if free < minimum {
            throw StoreError.badDirectory(
                path: path,
                reason:
                    "it has \(free) bytes free, less than --min-free-bytes \(minimum): not starting (free some space, or lower --min-free-bytes; 0 never refuses)"
            )
        }
        if free < warnBelow {
            logger.warning(
                "data directory \(path) has \(free) bytes free, less than one log segment (\(warnBelow) bytes): writes will be rejected with storage_failure once it is used up; reads go on"
            )
        }
    }
}
