#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

// File-scope names for the calls that the types below shadow with methods of the same name.
private func systemClose(_ fd: Int32) -> Int32 { close(fd) }
private func systemRename(_ from: String, _ to: String) -> Int32 { rename(from, to) }

// The store's whole boundary with the kernel: every system call it makes is here, each return
// code is checked here once, and a failure becomes a StoreError naming the call and the path.
// EINTR is retried for the calls that can return it; fsync is never retried after a real failure.

/// An open file descriptor owned by the store. Not thread-safe: one thread uses it at a time
/// (the event loop's; a descriptor handed to the background thread travels as a plain `Int32`,
/// see `release()` and `BackgroundJob`).
final class PosixFile {
    /// Kept up to date across renames, for error messages.
    var path: String
    private(set) var fd: Int32

    /// Opens `path` with `flags` (O_CLOEXEC is added).
    init(path: String, flags: Int32, mode: mode_t = 0o644) throws(StoreError) {
        self.path = path
        var fd: Int32
        repeat { fd = open(path, flags | O_CLOEXEC, mode) } while fd < 0 && errno == EINTR
        guard fd >= 0 else { throw StoreError.io(operation: "open", path: path, errno: errno) }
        self.fd = fd
    }

    /// Wraps a descriptor that is already open (handed over by `release()`); closes it on deinit.
    init(adopting fd: Int32, path: String) {
        self.path = path
        self.fd = fd
    }

    deinit { if fd >= 0 { _ = systemClose(fd) } }

    /// Gives up the descriptor without closing it: the caller owns it from now on.
    func release() -> Int32 {
        let owned = fd
        fd = -1
        return owned
    }

    func close() {
        if fd >= 0 { _ = systemClose(fd) }
        fd = -1
    }

    /// Writes all of `bytes` at `offset` (pwrite, looped over short writes).
    /// ENOSPC/EDQUOT/EFBIG become `.noSpace`, anything else `.io`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(StoreError) {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
            if n < 0 {
                let e = errno
                if e == EINTR { continue }
                if isNoSpace(e) { throw StoreError.noSpace(path: path, errno: e) }
                throw StoreError.io(operation: "write", path: path, errno: e)
            }
            done += n
        }
    }

    func write(_ bytes: [UInt8], at offset: Int) throws(StoreError) {
        // Array.withUnsafeBytes rethrows untyped errors; carry the typed one out in a Result.
        let result = bytes.withUnsafeBytes { p in Result { () throws(StoreError) in try write(p, at: offset) } }
        try result.get()
    }

    /// Reads the whole file (pread from 0 to its size).
    func readAll() throws(StoreError) -> [UInt8] {
        let size = try self.size()
        var out = [UInt8](repeating: 0, count: size)
        var done = 0
        var failure: Int32 = 0
        out.withUnsafeMutableBytes { p in
            while done < size {
                let n = pread(fd, p.baseAddress! + done, size - done, off_t(done))
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                if n == 0 { break }
                done += n
            }
        }
        if failure != 0 { throw StoreError.io(operation: "read", path: path, errno: failure) }
        if done < size { out.removeLast(size - done) }
        return out
    }

    func size() throws(StoreError) -> Int {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw StoreError.io(operation: "fstat", path: path, errno: errno) }
        return Int(st.st_size)
    }

    /// fdatasync(2): the data, and the metadata needed to read it back (the file size). A
    /// failure is `.fsyncFailed`, which the daemon treats as fatal; it is never retried.
    func syncData() throws(StoreError) {
        guard fdatasync(fd) == 0 else { throw StoreError.fsyncFailed(path: path, errno: errno) }
    }

    /// fsync(2), for files whose metadata matters too (new files before they are renamed).
    func syncAll() throws(StoreError) {
        guard fsync(fd) == 0 else { throw StoreError.fsyncFailed(path: path, errno: errno) }
    }

    /// Reserves disk blocks for [offset, offset+length) with posix_fallocate(3), so that later
    /// writes into that range cannot fail for lack of space (on filesystems that allocate in
    /// place: ext4, xfs, tmpfs; copy-on-write filesystems such as btrfs give no such promise).
    /// The file grows to cover the range; the new bytes read as zeros.
    func allocate(offset: Int, length: Int) throws(StoreError) {
        var rc: Int32
        repeat { rc = posix_fallocate(fd, off_t(offset), off_t(length)) } while rc == EINTR
        if rc == 0 { return }
        if isNoSpace(rc) { throw StoreError.noSpace(path: path, errno: rc) }
        throw StoreError.io(operation: "posix_fallocate", path: path, errno: rc)
    }

    func truncate(to length: Int) throws(StoreError) {
        var rc: Int32
        repeat { rc = ftruncate(fd, off_t(length)) } while rc < 0 && errno == EINTR
        guard rc == 0 else { throw StoreError.io(operation: "ftruncate", path: path, errno: errno) }
    }

    /// flock(LOCK_EX | LOCK_NB); false when another process holds the lock.
    func tryLock() throws(StoreError) -> Bool {
        if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
        if errno == EWOULDBLOCK { return false }
        throw StoreError.io(operation: "flock", path: path, errno: errno)
    }
}

/// ENOSPC (disk full), EDQUOT (quota) and EFBIG (RLIMIT_FSIZE or the filesystem's largest file)
/// all mean "no room for this write": the write is refused and the daemon goes on serving reads.
@inline(__always) func isNoSpace(_ e: Int32) -> Bool { e == ENOSPC || e == EDQUOT || e == EFBIG }

func errnoText(_ e: Int32) -> String {
    "\(String(cString: strerror(e))) (errno \(e))"
}

/// Directory operations. fsync of a directory makes the names in it (files created, renamed,
/// removed) durable: without it a crash can lose a file whose contents were fsynced.
enum Directory {
    static func syncEntries(_ path: String) throws(StoreError) {
        let dir = try PosixFile(path: path, flags: O_RDONLY | O_DIRECTORY)
        defer { dir.close() }
        try dir.syncAll()
    }

    /// Creates `path` (and its missing parents), fsyncing each parent whose entries changed.
    static func create(_ path: String) throws(StoreError) {
        var st = stat()
        if stat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFDIR else {
                throw StoreError.badDirectory(path: path, reason: "it exists and is not a directory")
            }
            return
        }
        let parent = parentOf(path)
        if parent != path { try create(parent) }
        if mkdir(path, 0o755) != 0 && errno != EEXIST {
            throw StoreError.badDirectory(path: path, reason: "mkdir failed: \(errnoText(errno))")
        }
        try syncEntries(parent)
    }

    static func parentOf(_ path: String) -> String {
        var p = path
        while p.count > 1 && p.hasSuffix("/") { p.removeLast() }
        guard let slash = p.lastIndex(of: "/") else { return "." }
        if slash == p.startIndex { return "/" }
        return String(p[..<slash])
    }

    /// The names in a directory (no "." or "..").
    static func list(_ path: String) throws(StoreError) -> [String] {
        guard let d = opendir(path) else {
            throw StoreError.io(operation: "opendir", path: path, errno: errno)
        }
        defer { closedir(d) }
        var names: [String] = []
        while let entry = readdir(d) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    static func rename(_ from: String, _ to: String) throws(StoreError) {
        guard systemRename(from, to) == 0 else {
            throw StoreError.io(operation: "rename to \(to)", path: from, errno: errno)
        }
    }

    static func remove(_ path: String) throws(StoreError) {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw StoreError.io(operation: "unlink", path: path, errno: errno)
        }
    }

    /// `mkdir(path, mode)`, one level; an entry already there is not an error (the caller
    /// checks its type).
    static func make(_ path: String, mode: mode_t) throws(StoreError) {
        guard mkdir(path, mode) == 0 || errno == EEXIST else {
            throw StoreError.badDirectory(path: path, reason: "mkdir failed: \(errnoText(errno))")
        }
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
    }

    /// Whether this user may create files in `path` (access W_OK | X_OK).
    static func isWritable(_ path: String) -> Bool { access(path, W_OK | X_OK) == 0 }
}
