// Many non-blocking connections on one epoll (level-triggered), read into one buffer and cut into
// whole frames by their length prefix, which are handed over undecoded: the readers of
// `presence` and `windows`. One thread; a connection's partial frame waits in its carry.
#if canImport(Glibc)
    import CEpoll
    import Glibc

    final class BenchConnections {
        /// Each connection's socket by index; -1 once the peer closed it.
        private(set) var fds: [Int32] = []
        private var carry: [[UInt8]] = []
        private let epfd: Int32
        private let readBuffer: UnsafeMutablePointer<UInt8>
        static let readBufferSize = 1 << 20
        private let events: UnsafeMutablePointer<epoll_event>
        static let maxEvents: Int32 = 1024

        init() {
            epfd = epoll_create1(0)
            if epfd < 0 { BenchSystem.fail("epoll_create1") }
            readBuffer = .allocate(capacity: Self.readBufferSize)
            events = .allocate(capacity: Int(Self.maxEvents))
        }

        var count: Int { fds.count }

        /// Adds a connected socket (made non-blocking here) as connection `count`.
        func add(_ fd: Int32) {
            BenchSystem.setNonBlocking(fd)
            BenchSystem.epollSet(epfd, EPOLL_CTL_ADD, fd, events: UInt32(EPOLLIN.rawValue), token: UInt64(fds.count))
            fds.append(fd)
            carry.append([])
        }

        func isOpen(_ i: Int) -> Bool { fds[i] >= 0 }

        /// A small request: written at once (a socket whose send buffer is full waits in writeAll).
        func send(_ i: Int, _ bytes: [UInt8]) { BenchSystem.writeAll(fds[i], bytes) }

        /// Waits up to `timeoutNs`; then one read of each readable connection, each whole frame
        /// (length prefix included) to `frame` with the connection and the time of the read, and
        /// a connection the peer closed to `closed` (after closing it here).
        func poll(timeoutNs: UInt64, frame: (Int, UnsafeBufferPointer<UInt8>, UInt64) -> Void, closed: (Int) -> Void) {
            let n = BenchSystem.epollWaitNs(epfd, events, Self.maxEvents, timeoutNs: timeoutNs)
            guard n > 0 else { return }
            for e in 0..<Int(n) { read(Int(events[e].data.u64), frame: frame, closed: closed) }
        }

        private func read(_ i: Int, frame: (Int, UnsafeBufferPointer<UInt8>, UInt64) -> Void, closed: (Int) -> Void) {
            let fd = fds[i]
            guard fd >= 0 else { return }
            let n = Glibc.read(fd, readBuffer, Self.readBufferSize)
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
            if n <= 0 {
                epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nil)
                close(fd)
                fds[i] = -1
                closed(i)
                return
            }
            let now = BenchSystem.nowNs()
            if carry[i].isEmpty {
                let used = Self.frames(UnsafeBufferPointer(start: readBuffer, count: n)) { frame(i, $0, now) }
                if used < n { carry[i] = Array(UnsafeBufferPointer(start: readBuffer + used, count: n - used)) }
            } else {
                var bytes = carry[i]
                bytes.append(contentsOf: UnsafeBufferPointer(start: readBuffer, count: n))
                let used = bytes.withUnsafeBufferPointer { Self.frames($0) { frame(i, $0, now) } }
                carry[i] = used < bytes.count ? Array(bytes[used...]) : []
            }
        }

        /// Hands over the whole frames at the start of `bytes`; returns the bytes they took.
        private static func frames(_ bytes: UnsafeBufferPointer<UInt8>, _ handle: (UnsafeBufferPointer<UInt8>) -> Void) -> Int {
            var offset = 0
            while bytes.count - offset >= 5 {
                let length = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
                guard bytes.count - offset >= 4 + length else { break }
                handle(UnsafeBufferPointer(rebasing: bytes[offset..<(offset + 4 + length)]))
                offset += 4 + length
            }
            return offset
        }

        /// Closes every connection with a reset (SO_LINGER 0: no TIME_WAIT left to the next run).
        func tearDown() {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            for fd in fds where fd >= 0 {
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                close(fd)
            }
            fds = []
            close(epfd)
            readBuffer.deallocate()
            events.deallocate()
        }
    }
#endif
