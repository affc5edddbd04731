// The only file that calls the C library's socket functions (after swift-system's Syscalls.swift):
// each wrapper names its C function, retries EINTR, and turns every other failure into a typed
// `SocketFailure`. Glibc and Darwin differ in a few constants and in how SIGPIPE is avoided; those
// differences stay here, behind `#if canImport`.

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#else
    #error("SnapSync needs Darwin or Glibc sockets")
#endif

/// A failed socket call: what was attempted and the errno text.
struct SocketFailure: Error, CustomStringConvertible {
    var description: String

    init(_ call: String, errno code: Int32) {
        description = "\(call): \(String(cString: strerror(code))) (errno \(code))"
    }

    init(_ text: String) { description = text }
}

enum SocketCalls {
    /// Resolves `host` and connects to the first address that answers before `deadline`.
    /// Name resolution (`getaddrinfo`) blocks without a timeout of its own; the connect itself is
    /// non-blocking, waited for with `poll`. The socket returned is non-blocking, TCP_NODELAY
    /// (frames are small and latency matters), and never raises SIGPIPE.
    static func connect(host: String, port: Int, deadline: ContinuousClock.Instant) throws(SocketFailure) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Darwin)
            hints.ai_socktype = SOCK_STREAM
        #else
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        // The corresponding C function is `getaddrinfo`.
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw SocketFailure("cannot resolve \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(first) }
        var lastFailure = SocketFailure("no address for \(host)")
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            cursor = info.pointee.ai_next
            do {
                return try connect(info.pointee, deadline: deadline)
            } catch {
                lastFailure = error
            }
        }
        throw lastFailure
    }

    private static func connect(_ info: addrinfo, deadline: ContinuousClock.Instant) throws(SocketFailure) -> Int32 {
        // The corresponding C function is `socket`.
        let fd = socket(info.ai_family, info.ai_socktype, info.ai_protocol)
        guard fd >= 0 else { throw SocketFailure("socket", errno: errno) }
        do throws(SocketFailure) {
            try configure(fd)
            // The corresponding C function is `connect`.
            if cConnect(fd, info.ai_addr, info.ai_addrlen) != 0 {
                let code = errno
                guard code == EINPROGRESS || code == EINTR else { throw SocketFailure("connect", errno: code) }
                try waitConnected(fd, deadline: deadline)
            }
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    private static func configure(_ fd: Int32) throws(SocketFailure) {
        // The corresponding C function is `fcntl`.
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else { throw SocketFailure("fcntl", errno: errno) }
        var one: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        // The corresponding C function is `setsockopt`. TCP_NODELAY is an optimisation: a
        // failure (e.g. a non-TCP socket) is not worth failing the connection for.
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, size)
        #if canImport(Darwin)
            // Darwin has no MSG_NOSIGNAL: the socket itself must not raise SIGPIPE.
            guard setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, size) == 0 else { throw SocketFailure("setsockopt(SO_NOSIGPIPE)", errno: errno) }
        #endif
    }

    /// Waits for a non-blocking connect to finish, then reads its outcome (`SO_ERROR`).
    private static func waitConnected(_ fd: Int32, deadline: ContinuousClock.Instant) throws(SocketFailure) {
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw SocketFailure("connect timed out") }
            let ready = try poll([pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)], timeout: remaining)
            if ready.isEmpty { continue }
            var code: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            // The corresponding C function is `getsockopt`.
            guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &size) == 0 else { throw SocketFailure("getsockopt", errno: errno) }
            guard code == 0 else { throw SocketFailure("connect", errno: code) }
            return
        }
    }

    /// Waits until one of `fds` is ready or `timeout` (nil: forever) passes; returns the
    /// entries with `revents` set. The corresponding C function is `poll`.
    static func poll(_ fds: [pollfd], timeout: Duration?) throws(SocketFailure) -> [pollfd] {
        var fds = fds
        let milliseconds: Int32
        if let timeout {
            let (seconds, attoseconds) = timeout.components
            milliseconds = Int32(clamping: max(0, seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000))
        } else {
            milliseconds = -1
        }
        while true {
            #if canImport(Darwin)
                let rc = Darwin.poll(&fds, nfds_t(fds.count), milliseconds)
            #else
                let rc = Glibc.poll(&fds, nfds_t(fds.count), milliseconds)
            #endif
            if rc >= 0 { return fds.filter { $0.revents != 0 } }
            if errno == EINTR { continue }
            throw SocketFailure("poll", errno: errno)
        }
    }

    /// Blocks until `socket` is readable (or writable, when `writable`), or `wake` is readable.
    /// Returns which of the two is ready (an error or hang-up counts as ready: the next read
    /// says what happened).
    static func wait(socket: Int32, writable: Bool, wake: Int32) throws(SocketFailure) -> (socket: Bool, wake: Bool) {
        let events = Int16(POLLIN) | (writable ? Int16(POLLOUT) : 0)
        let ready = try poll(
            [
                pollfd(fd: socket, events: events, revents: 0),
                pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
            ], timeout: nil)
        return (ready.contains { $0.fd == socket }, ready.contains { $0.fd == wake })
    }

    enum ReadResult {
        case bytes(Int)
        case wouldBlock
        case endOfStream
    }

    /// Reads what is there, without blocking. The corresponding C function is `read`.
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SocketFailure) -> ReadResult {
        while true {
            #if canImport(Darwin)
                let n = Darwin.read(fd, buffer.baseAddress, buffer.count)
            #else
                let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            #endif
            if n > 0 { return .bytes(n) }
            if n == 0 { return .endOfStream }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case let code: throw SocketFailure("read", errno: code)
            }
        }
    }

    /// Writes what the socket takes now, without blocking; returns the count written (0 when
    /// the socket buffer is full). The corresponding C function is `send` (MSG_NOSIGNAL on
    /// Linux, so that a peer that went away is an EPIPE here, not a SIGPIPE for the process).
    static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SocketFailure) -> Int {
        guard bytes.count > 0 else { return 0 }
        #if canImport(Darwin)
            let flags: Int32 = 0
        #else
            let flags = Int32(MSG_NOSIGNAL)
        #endif
        while true {
            let n = send(fd, bytes.baseAddress, bytes.count, flags)
            if n >= 0 { return n }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return 0
            case let code: throw SocketFailure("send", errno: code)
            }
        }
    }

    /// A non-blocking pipe used to wake a thread blocked in `poll`. The corresponding C
    /// function is `pipe`.
    static func makeWakePipe() throws(SocketFailure) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw SocketFailure("pipe", errno: errno) }
        for fd in fds {
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        }
        return (fds[0], fds[1])
    }

    /// Writes one byte to a wake pipe; a full pipe already wakes its reader, so EAGAIN is fine.
    static func wake(_ fd: Int32) {
        var byte: UInt8 = 1
        #if canImport(Darwin)
            _ = Darwin.write(fd, &byte, 1)
        #else
            _ = Glibc.write(fd, &byte, 1)
        #endif
    }

    /// Empties a wake pipe.
    static func drain(_ fd: Int32) {
        var scratch = [UInt8](repeating: 0, count: 64)
        while (scratch.withUnsafeMutableBytes { (try? read(fd, into: $0)) ?? .endOfStream }).isBytes {}
    }

    /// Ends both directions of a connection; the thread polling it then reads end-of-stream.
    /// The corresponding C function is `shutdown`.
    static func shutdownBoth(_ fd: Int32) {
        #if canImport(Darwin)
            _ = shutdown(fd, SHUT_RDWR)
        #else
            _ = shutdown(fd, Int32(SHUT_RDWR))
        #endif
    }

    /// The corresponding C function is `close`.
    static func closeDescriptor(_ fd: Int32) {
        _ = close(fd)
    }
}

extension SocketCalls.ReadResult {
    var isBytes: Bool {
        if case .bytes = self { return true }
        return false
    }
}

#if canImport(Darwin)
    @inline(__always)
    private func cConnect(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>!, _ length: socklen_t) -> Int32 {
        Darwin.connect(fd, address, length)
    }
#else
    @inline(__always)
    private func cConnect(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>!, _ length: socklen_t) -> Int32 {
        Glibc.connect(fd, address, length)
    }
#endif

/// Starts a detached OS thread running `body`. A dedicated thread, not a task: the socket loop
/// blocks in `poll`, which must never tie up a thread of Swift's cooperative pool.
func startThread(_ body: @escaping @Sendable () -> Void) {
    final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    #if canImport(Darwin)
        var thread: pthread_t?
        let rc = pthread_create(
            &thread, nil,
            { context in
                Unmanaged<Box>.fromOpaque(context).takeRetainedValue().body()
                return nil
            }, context)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        pthread_detach(thread!)
    #else
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { context in
                Unmanaged<Box>.fromOpaque(context!).takeRetainedValue().body()
                return nil
            }, context)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        pthread_detach(thread)
    #endif
}
