/// When the write-ahead log is fsynced, after Redis's `appendfsync`.
///
/// Whatever the policy, every record is written to the kernel (write(2)) before the write it
/// holds is acknowledged, so a crash of the daemon alone (kill -9, a bug) never loses an
/// acknowledged write. The policy decides what a crash of the machine (power loss, kernel
/// panic) may lose:
package enum FsyncPolicy: String, Sendable, CaseIterable, CustomStringConvertible {
    /// fdatasync before any ACK or DIFF of the loop pass goes out: an ACK means "on disk".
    /// All records appended in one loop pass share one fdatasync (group commit, as Redis does).
    case always
    /// fdatasync at most once a second, on the store's background thread (as Redis does), so
    /// the loop does not wait for it. A machine crash loses the writes acknowledged since the
    /// last fdatasync started: up to about 1 s, and up to about 3 s when the disk is slow (one
    /// that has been running for 2 s when the next is due is waited for).
    case everysec
    /// Never fdatasync the log (the kernel writes it back in its own time, typically within
    /// 30 s on Linux); checkpoints and segment switches are still fsynced.
    case no

    package var description: String { rawValue }
}
