#if canImport(Glibc)
    internal import Glibc
#endif

/// How much disk the data directory takes and how much its filesystem has left: what the
/// daemon's quotas on new rooms compare with (`--max-data-bytes`, and the free space kept for
/// the rooms that exist).
package struct DataDirectoryUsage: Sendable, Equatable {
    /// The blocks allocated to the directory's files (st_blocks × 512, as du counts them: a
    /// log segment's preallocated space included).
    package var bytes: Int
    /// What an unprivileged process may still write on its filesystem (statvfs f_bavail).
    package var freeBytes: Int

    package init(bytes: Int, freeBytes: Int) {
        self.bytes = bytes
        self.freeBytes = freeBytes
    }

    /// Measures `path` (the data directory is flat: its files, no subdirectories). Nil when the
    /// directory cannot be read; a file removed while it is listed is skipped.
    /// - Complexity: one stat per file, so it runs off the loop (about 1 µs a file: 100 ms for
    ///   100,000 sleeping rooms' checkpoints).
    package static func measure(_ path: String) -> DataDirectoryUsage? {
        guard let names = try? Directory.list(path), let free = DataDirectory.freeBytes(path) else { return nil }
        var total = 0
        var info = stat()
        for name in names where stat(path + "/" + name, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG {
            total += Int(info.st_blocks) * 512
        }
        return DataDirectoryUsage(bytes: total, freeBytes: free)
    }
}
