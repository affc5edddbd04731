internal import Glibc
import SnapSyncHub

// Every socket system call of the daemon, after swift-nio's SystemCallHelpers and
// swift-system's Syscalls.swift: each wrapper's doc names its C function, EINTR is retried
// here, EBADF/EFAULT/ENOTSOCK are preconditions (they mean a bug in SnapSync, not bad input),
// and every other failure becomes a typed `SystemError`. "Would block" is not an error on the
// hot paths: `read` and `send` return it as a value.

/// A failed system call: which one, and errno.
package struct SystemError: Error, CustomStringConvertible, Sendable, Equatable {
    package var call: String
    package var errno: Int32

    package init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    package var description: String { "\(call): \(String(cString: strerror(errno))) (errno \(errno))" }

    /// The peer went away (reset, broken pipe, timed out): a normal way for a connection to end.
    var isDisconnect: Bool {
        errno == ECONNRESET || errno == EPIPE || errno == ETIMEDOUT || errno == ENOTCONN || errno == EHOSTUNREACH
    }
}

enum Syscall {
    /// Whether the hub's `OutputSpan` has `struct iovec`'s layout: same size, stride and
    /// alignment, the base at offset 0 and the length after it.
    static let spansAreIovecs: Bool =
        MemoryLayout<OutputSpan>.size == MemoryLayout<iovec>.size && MemoryLayout<OutputSpan>.stride == MemoryLayout<iovec>.stride
        && MemoryLayout<OutputSpan>.alignment == MemoryLayout<iovec>.alignment
        && MemoryLayout<OutputSpan>.offset(of: \.base) == MemoryLayout<iovec>.offset(of: \.iov_base)
        && MemoryLayout<OutputSpan>.offset(of: \.count) == MemoryLayout<iovec>.offset(of: \.iov_len)

    /// Runs `body` until it returns something other than -1 with EINTR. The one place errno is read.
    @inline(__always)
    private static func retrying<T: FixedWidthInteger>(_ call: StaticString, _ body: () -> T) throws(SystemError) -> T {
        while true {
            let result = body()
            if result != -1 { return result }
            let error = Glibc.errno
            if error == EINTR { continue }
            precondition(
                error != EBADF && error != EFAULT && error != ENOTSOCK,
                "\(call) failed with errno \(error): a SnapSync bug (bad descriptor or buffer)")
            throw SystemError(call: "\(call)", errno: error)
        }
    }

    private static func isWouldBlock(_ error: SystemError) -> Bool {
        error.errno == EAGAIN || error.errno == EWOULDBLOCK
    }

    // MARK: Sockets

    /// `socket(domain, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)`.
    static func socket(domain: Int32, type: Int32) throws(SystemError) -> Int32 {
        try retrying("socket") { Glibc.socket(domain, type | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
    }

    /// `setsockopt(fd, level, name, &value, sizeof(int))`.
    static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) throws(SystemError) {
        var value = value
        _ = try retrying("setsockopt") { Glibc.setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) }
    }

    /// `getsockopt(fd, level, name, &value, &len)` for an int option.
    static func option(_ fd: Int32, _ level: Int32, _ name: Int32) throws(SystemError) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try retrying("getsockopt") { Glibc.getsockopt(fd, level, name, &value, &length) }
        return value
    }

    /// `bind(fd, address, length)`.
    static func bind(_ fd: Int32, _ address: SocketAddress) throws(SystemError) {
        _ = try address.withSockaddr { (pointer, length) throws(SystemError) in
            try retrying("bind") { Glibc.bind(fd, pointer, length) }
        }
    }

    /// `listen(fd, backlog)`.
    static func listen(_ fd: Int32, backlog: Int32) throws(SystemError) {
        _ = try retrying("listen") { Glibc.listen(fd, backlog) }
    }

    /// `getsockname(fd, ...)`: the address a socket is bound to (the real port after port 0).
    static func localAddress(_ fd: Int32) throws(SystemError) -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try withUnsafeMutablePointer(to: &storage) { (pointer) throws(SystemError) in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { (address) throws(SystemError) in
                try retrying("getsockname") { Glibc.getsockname(fd, address, &length) }
            }
        }
        return SocketAddress(storage: storage, length: length)
    }

    /// The result of a non-blocking accept.
    enum Accepted {
        case connection(fd: Int32, peer: SocketAddress)
        /// EAGAIN: the backlog is empty.
        case none
    }

    /// `accept(fd, ...)`, then `fcntl(F_SETFL, O_NONBLOCK)` and `fcntl(F_SETFD, FD_CLOEXEC)`.
    ///
    /// Not accept4: Swift's Glibc module is built without _GNU_SOURCE and does not declare it,
    /// and a shim for a non-macro would widen the C boundary for two syscalls per accept —
    /// accepting is not a hot path (connections are long-lived; fan-out is).
    static func accept(_ fd: Int32) throws(SystemError) -> Accepted {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let client: Int32
        do throws(SystemError) {
            client = try withUnsafeMutablePointer(to: &storage) { (pointer) throws(SystemError) in
                try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { (address) throws(SystemError) in
                    try retrying("accept") { Glibc.accept(fd, address, &length) }
                }
            }
        } catch  where isWouldBlock(error) {
            return .none
        }
        do throws(SystemError) {
            let flags = try retrying("fcntl") { Glibc.fcntl(client, F_GETFL) }
            _ = try retrying("fcntl") { Glibc.fcntl(client, F_SETFL, flags | O_NONBLOCK) }
            _ = try retrying("fcntl") { Glibc.fcntl(client, F_SETFD, FD_CLOEXEC) }
        } catch {
            close(client)
            throw error
        }
        return .connection(fd: client, peer: SocketAddress(storage: storage, length: length))
    }

    /// The result of a non-blocking read.
    enum ReadResult {
        case bytes(Int)
        case wouldBlock
        case endOfFile
    }

    /// `read(fd, buffer, count)`.
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> ReadResult {
        do throws(SystemError) {
            let n = try retrying("read") { Glibc.read(fd, buffer.baseAddress, buffer.count) }
            return n == 0 ? .endOfFile : .bytes(n)
        } catch  where isWouldBlock(error) {
            return .wouldBlock
        }
    }

    /// `recv(fd, &byte, 1, MSG_PEEK)`: the first byte waiting, left in the socket.
    static func peekByte(_ fd: Int32) throws(SystemError) -> (ReadResult, UInt8) {
        var byte: UInt8 = 0
        do throws(SystemError) {
            let n = try retrying("recv") { Glibc.recv(fd, &byte, 1, Int32(MSG_PEEK)) }
            return (n == 0 ? .endOfFile : .bytes(n), byte)
        } catch  where isWouldBlock(error) {
            return (.wouldBlock, 0)
        }
    }

    /// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds: the write-to-ACK timer's clock
    /// (`WriteAckTimer`), a plain integer read without `ContinuousClock.Instant`'s witnesses.
    static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
    }

    /// `sendmsg(fd, {iov, count}, MSG_NOSIGNAL)`: writev with MSG_NOSIGNAL, so that a vanished
    /// peer is an EPIPE here rather than a process-wide SIGPIPE.
    /// - Returns: bytes written, or `nil` when the socket's send buffer is full (EAGAIN).
    /// The spans are the hub's `OutputSpan`s, which have `iovec`'s layout (`spansAreIovecs`,
    /// asserted in debug builds, which every test runs).
    static func send(_ fd: Int32, _ spans: UnsafeMutablePointer<OutputSpan>, count: Int) throws(SystemError) -> Int? {
        assert(spansAreIovecs, "OutputSpan is not laid out as struct iovec")
        var message = msghdr()
        message.msg_iov = UnsafeMutableRawPointer(spans).assumingMemoryBound(to: iovec.self)
        message.msg_iovlen = count
        do throws(SystemError) {
            return try retrying("sendmsg") { Glibc.sendmsg(fd, &message, Int32(MSG_NOSIGNAL)) }
        } catch  where isWouldBlock(error) {
            return nil
        }
    }

    /// `send(fd, bytes, count, MSG_NOSIGNAL)` of one buffer; `nil` when it would block.
    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int? {
        do throws(SystemError) {
            return try retrying("send") { Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)) }
        } catch  where isWouldBlock(error) {
            return nil
        }
    }

    /// `sendto(fd, bytes, count, MSG_NOSIGNAL, address, length)`, for datagrams (sd_notify).
    static func sendDatagram(_ fd: Int32, _ bytes: [UInt8], to address: SocketAddress) throws(SystemError) {
        _ = try retrying("sendto") {
            address.withSockaddr { pointer, length in
                bytes.withUnsafeBytes { Glibc.sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), pointer, length) }
            }
        }
    }

    /// `shutdown(fd, SHUT_WR)`: sends FIN after everything queued, keeps reading possible.
    /// A peer that is already gone (ENOTCONN) is not an error here.
    static func shutdownWrite(_ fd: Int32) {
        while Glibc.shutdown(fd, Int32(SHUT_WR)) == -1 {
            let error = Glibc.errno
            if error == EINTR { continue }
            precondition(error != EBADF && error != ENOTSOCK, "shutdown on a bad descriptor: a SnapSync bug")
            return
        }
    }

    /// `ioctl(fd, SIOCOUTQ)` (TIOCOUTQ on Linux, the same request): bytes in the socket's send
    /// queue that the peer has not acknowledged yet. 0 also when the call fails.
    static func unacknowledgedBytes(_ fd: Int32) -> Int {
        var count: Int32 = 0
        return Glibc.ioctl(fd, UInt(TIOCOUTQ), &count) == 0 ? Int(count) : 0
    }

    /// `close(fd)`. Not retried on EINTR: on Linux the descriptor is released even then, and a
    /// retry could close a descriptor another part of the program just got.
    static func close(_ fd: Int32) {
        if Glibc.close(fd) == -1 {
            precondition(Glibc.errno != EBADF, "close of a bad descriptor: a SnapSync bug")
        }
    }

    // MARK: Files

    /// `write(fd, bytes, count)` until everything is written; false if the descriptor refuses
    /// (for log lines on stderr, where there is nobody to tell).
    @discardableResult
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 && Glibc.errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    // MARK: Process

    /// `pthread_sigmask(SIG_UNBLOCK, signals)`: a daemon started by a parent that blocked
    /// SIGTERM (a test runner's thread, some supervisors) would otherwise never see it, since
    /// a blocked signal stays pending and libevent's handler never runs.
    /// Sets `signals` to be ignored (`SIG_IGN`), for the stretches where the daemon has no
    /// handler installed: recovery before `start()`, and the shutdown checkpoint after `run()`.
    static func ignore(_ signals: [Int32]) {
        for signal in signals { _ = Glibc.signal(signal, SIG_IGN) }
    }

    static func unblock(_ signals: [Int32]) {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// `getrlimit(RLIMIT_NOFILE)` then, when `needed` is above the soft limit, `setrlimit` to
    /// min(needed, hard). Returns the soft limit in force afterwards.
    static func raiseOpenFileLimit(to needed: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        let wanted = rlim_t(max(0, needed))
        if wanted > limit.rlim_cur {
            var raised = limit
            raised.rlim_cur = min(wanted, limit.rlim_max)
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return limit.rlim_cur > rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
    }
}
