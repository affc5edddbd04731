#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
// With SnapSyncAuth (Foundation) in the target, CoreFoundation also declares `timespec` on Linux.
#if canImport(CoreFoundation)
    import CoreFoundation
#endif
import SnapSyncModel
import SnapSyncWire

/// A blocking TCP client that speaks raw frames through the Wire codec, for black-box tests of
/// the daemon: it sends exactly the bytes a test asks for (well-formed or not) and reads frames
/// back with a deadline on every call, so a test can fail but never hang.
///
/// Every wait uses poll(2) with a timeout; `RawClientError.timeout` says what was awaited.
final class RawClient {
    let fd: Int32
    private(set) var decoder = FrameDecoder(limits: WireLimits(maxFrameBytes: 64 << 20), accepting: .server)
    private var nextRequestID: UInt64 = 1
    /// Default seconds to wait for anything. Generous: CI runs on 2 loaded cores.
    var timeout: Double = 60

    /// Connects to `host:port` (IPv4 or IPv6 numeric). `receiveBuffer` sets SO_RCVBUF before
    /// connecting (so it shapes the TCP window), to make a slow reader.
    init(host: String = "127.0.0.1", port: Int, receiveBuffer: Int? = nil, timeout: Double = 60) throws {
        self.timeout = timeout
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let info = list else {
            throw RawClientError.failed("cannot resolve \(host)")
        }
        defer { freeaddrinfo(list) }
        let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawClientError.failed("socket: errno \(errno)") }
        self.fd = fd
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        // Non-blocking connect bounded by poll, then back to blocking (every read/write polls first).
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        // No close(fd) on the ways out below: every stored property is set, so a throw runs
        // deinit, which closes it. Closing it here too closed it twice, and between the two
        // closes another test's thread could be given the same number: its socket was closed
        // under it (a send failed with EBADF).
        if connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) != 0 && errno != EINPROGRESS {
            throw RawClientError.failed("connect to \(host):\(port): errno \(errno)")
        }
        guard wait(for: Int16(POLLOUT), timeout: timeout) else {
            throw RawClientError.timeout("connect to \(host):\(port)")
        }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        guard error == 0 else {
            throw RawClientError.failed("connect to \(host):\(port): errno \(error)")
        }
        _ = fcntl(fd, F_SETFL, flags)
    }

    deinit {
        close(fd)
    }

    /// Connects and completes the handshake (offering `versions`).
    static func ready(_ daemon: DaemonProcess, receiveBuffer: Int? = nil, versions: [UInt64] = [1]) throws -> RawClient {
        let client = try RawClient(host: daemon.host, port: daemon.port, receiveBuffer: receiveBuffer)
        try client.handshake(versions: versions)
        return client
    }

    /// A fresh request id.
    func requestID() -> UInt64 {
        defer { nextRequestID += 1 }
        return nextRequestID
    }

    // MARK: Sending

    /// Sends `bytes` exactly, all of them (waiting for room as needed).
    func send(raw bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            guard wait(for: Int16(POLLOUT), timeout: timeout) else { throw RawClientError.timeout("sending") }
            let n = bytes[offset...].withUnsafeBytes { systemSend(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw RawClientError.closed("send failed: errno \(errno)")
            }
            offset += n
        }
    }

    func send(_ message: Message) throws {
        try send(raw: FrameEncoder().encode(message))
    }

    /// Sends HELLO (version 1 unless told) and expects WELCOME; later frames are decoded as the
    /// version it chose.
    @discardableResult
    func handshake(name: String = "raw-client", versions: [UInt64] = [1]) throws -> Message {
        try send(.hello(versions: versions, clientName: name, credentials: []))
        let welcome = try receive()
        guard case .welcome(let version, _, _, _) = welcome else { throw RawClientError.unexpected("expected WELCOME", welcome) }
        decoder.version = version
        return welcome
    }

    /// Shuts down the sending side (the daemon sees EOF).
    func shutdownWrite() {
        shutdown(fd, Int32(SHUT_WR))
    }

    // MARK: Receiving

    /// The next frame, decoded. Throws `.timeout` after `timeout` seconds, `.closed` at EOF.
    func receive(timeout: Double? = nil) throws -> Message {
        let deadline = now() + (timeout ?? self.timeout)
        while true {
            do {
                if let message = try decoder.nextMessage() {
                    followVersion(of: message)
                    return message
                }
            } catch {
                throw RawClientError.decode(error)
            }
            let remaining = deadline - now()
            guard remaining > 0, wait(for: Int16(POLLIN), timeout: remaining) else {
                throw RawClientError.timeout("a frame (\(decoder.bufferedByteCount) bytes buffered)")
            }
            try readAvailable()
        }
    }

    /// After WELCOME, later frames are decoded as the version it chose (version 3's SNAPSHOT and
    /// DIFF carry the room's chain), however HELLO was sent.
    private func followVersion(of message: Message) {
        if case .welcome(let version, _, _, _) = message { decoder.version = version }
    }

    /// Receives frames until one matches; the frames skipped are returned with it.
    func receive(until match: (Message) -> Bool, timeout: Double? = nil) throws -> (Message, skipped: [Message]) {
        let deadline = now() + (timeout ?? self.timeout)
        var skipped: [Message] = []
        while true {
            let message = try receive(timeout: max(0.001, deadline - now()))
            if match(message) { return (message, skipped) }
            skipped.append(message)
        }
    }

    /// Reads until the daemon closes the connection; returns every frame that came before.
    /// A reset counts as closed (it can follow an ERROR when the daemon discards our input).
    func receiveUntilClosed(timeout: Double? = nil) throws -> [Message] {
        let deadline = now() + (timeout ?? self.timeout)
        var messages: [Message] = []
        while true {
            do {
                while let message = try decoder.nextMessage() {
                    followVersion(of: message)
                    messages.append(message)
                }
            } catch {
                throw RawClientError.decode(error)
            }
            let remaining = deadline - now()
            guard remaining > 0, wait(for: Int16(POLLIN), timeout: remaining) else {
                throw RawClientError.timeout("the daemon to close (got \(messages.count) frames)")
            }
            do {
                try readAvailable()
            } catch RawClientError.closed {
                while let message = try? decoder.nextMessage() { messages.append(message) }
                return messages
            }
        }
    }

    /// True when nothing arrives within `seconds` (for "the daemon sent nothing more").
    func isQuiet(for seconds: Double) -> Bool {
        decoder.bufferedByteCount == 0 && !wait(for: Int16(POLLIN), timeout: seconds)
    }

    /// Sends a request and returns the answer that carries its request id, skipping DIFFs and
    /// anything else in between (returned too).
    func request(_ make: (UInt64) -> Message) throws -> (answer: Message, skipped: [Message]) {
        let id = requestID()
        try send(make(id))
        return try receive(until: { $0.requestID == id })
    }

    private func readAvailable() throws {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 {
            decoder.append(buffer[0..<n])
        } else if n == 0 {
            throw RawClientError.closed("EOF")
        } else if errno == ECONNRESET {
            throw RawClientError.closed("reset")
        } else if errno != EINTR && errno != EAGAIN {
            throw RawClientError.failed("recv: errno \(errno)")
        }
    }

    private func wait(for events: Int16, timeout seconds: Double) -> Bool {
        var entry = pollfd(fd: fd, events: events, revents: 0)
        let deadline = now() + seconds
        while true {
            let milliseconds = Int32(max(0, min(Double(Int32.max), (deadline - now()) * 1000)).rounded(.up))
            let rc = systemPoll(&entry, milliseconds)
            if rc > 0 { return true }
            if rc == 0 { return false }
            if errno != EINTR { return true }  // let the read/write report the error
        }
    }

    private func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

enum RawClientError: Error, CustomStringConvertible {
    case timeout(String)
    case closed(String)
    case failed(String)
    case decode(WireError)
    case unexpected(String, Message)

    var description: String {
        switch self {
        case .timeout(let what): "timed out waiting for \(what)"
        case .closed(let how): "connection closed (\(how))"
        case .failed(let what): what
        case .decode(let error): "undecodable frame from the daemon: \(error)"
        case .unexpected(let what, let message): "\(what), got \(summary(message))"
        }
    }
}

// Free functions, because inside `RawClient` its own `send` would shadow the C function.
private func systemSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    send(fd, bytes, count, Int32(MSG_NOSIGNAL))
}

private func systemPoll(_ entry: inout pollfd, _ milliseconds: Int32) -> Int32 {
    poll(&entry, 1, milliseconds)
}
