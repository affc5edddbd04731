/// Why the store refused or failed. Each case says what the daemon must do with it:
///
/// - `noSpace`: the disk (or quota, or file-size limit) is full. The write is answered with
///   REJECT `storage_failure`; nothing was changed and reads go on. Only `reserve()` throws it.
/// - `fsyncFailed`, `io`: the log can no longer be trusted to hold what was acknowledged. The
///   daemon exits. A failed fsync is never retried: after a failure Linux may drop the dirty
///   pages and report success on the next call, so a retry would acknowledge lost data
///   (PostgreSQL's "fsyncgate", 2018).
/// - `corrupt`, `inconsistent`, `locked`, `badDirectory`: found while opening; the daemon
///   refuses to start.
/// - `logUnavailable`: cluster mode's replicated log (`RoomLog`) did not take or serve a
///   record; the request gets REJECT `storage_failure` and the daemon goes on.
package enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// ENOSPC, EDQUOT or EFBIG while reserving space for a record.
    case noSpace(path: String, errno: Int32)
    /// fsync or fdatasync failed: fatal.
    case fsyncFailed(path: String, errno: Int32)
    /// Any other failed system call (`operation` names it): fatal.
    case io(operation: String, path: String, errno: Int32)
    /// A damaged log or checkpoint that cannot be explained by a crash during a write.
    case corrupt(path: String, offset: Int, reason: String)
    /// The directory's files do not match its MANIFEST: a listed file is missing, or a log or
    /// checkpoint file is there that the MANIFEST cannot account for. `path` names the file.
    case inconsistent(path: String, reason: String)
    /// Another process holds the data directory's lock.
    case locked(path: String)
    /// The data directory cannot be used (not a directory, not writable, ...).
    case badDirectory(path: String, reason: String)
    /// Cluster mode: the replicated room log (`RoomLog`) did not answer, has no quorum, or the
    /// connection to it is gone; the message names the operation and the room. Not fatal: the
    /// write is answered with REJECT `storage_failure` and may still be applied later.
    case logUnavailable(String)

    package var description: String {
        switch self {
        case .noSpace(let path, let e):
            return "no space left for the write-ahead log \(path): \(errnoText(e))"
        case .fsyncFailed(let path, let e):
            return "fsync of \(path) failed: \(errnoText(e)); acknowledged writes may not be on disk, so the daemon stops (fsync is never retried)"
        case .io(let op, let path, let e):
            return "\(op) \(path) failed: \(errnoText(e))"
        case .corrupt(let path, let offset, let reason):
            return "\(path) is damaged at byte \(offset): \(reason)"
        case .inconsistent(let path, let reason):
            return "\(path): \(reason)"
        case .locked(let path):
            return "data directory \(path) is in use by another snapsyncd (its lock file is held)"
        case .badDirectory(let path, let reason):
            return "data directory \(path) cannot be used: \(reason)"
        case .logUnavailable(let message):
            return message
        }
    }

    /// True for the errors after which the daemon must exit rather than go on serving.
    package var isFatal: Bool {
        switch self {
        case .noSpace, .logUnavailable: return false
        default: return true
        }
    }
}
