/// One TCP connection to the daemon, served by a dedicated thread that connects, then polls the
/// socket and a wake pipe: it decodes whole frames as they arrive and writes queued frames as
/// the socket takes them. It knows frames, not the protocol's rules: the client's actor does.
///
/// Events come out of `events` in the order they happened: `.connected` (unless the connect
/// failed), then `.message`s, then exactly one `.closed` with the reason, after which the
/// stream finishes and the socket is closed.
final class Connection: Sendable {
    enum Event: Sendable {
        case connected
        case message(Message)
        case closed(SnapSyncError)
    }

    let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let shared: Locked<Shared>
    private let wakeRead: Int32

    /// What the caller's side and the socket thread share, under the lock.
    private struct Shared {
        /// Frames queued by `send`, not yet taken by the thread.
        var outbound: [UInt8] = []
        /// The connected socket; -1 before the connect succeeds and after the thread closed it,
        /// so that `drop()` can never shut down a descriptor number the system has reused.
        var socket: Int32 = -1
        /// The wake pipe's write end; -1 once the thread has closed it.
        var wakeWrite: Int32
        /// Set by `close`: the thread stops and reports this reason.
        var closeReason: SnapSyncError?
    }

    /// Starts connecting to `host:port` on a new thread; the outcome arrives in `events`.
    init(host: String, port: Int, connectTimeout: Duration) throws(SnapSyncError) {
        let pipe: (read: Int32, write: Int32)
        do {
            pipe = try SocketCalls.makeWakePipe()
        } catch {
            throw .connectFailed(error.description)
        }
        wakeRead = pipe.read
        shared = Locked(Shared(wakeWrite: pipe.write))
        (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        let deadline = ContinuousClock.now + connectTimeout
        startThread { [self] in run(host: host, port: port, deadline: deadline) }
    }

    /// Queues one frame. After the connection closed, the frame is dropped: the `.closed`
    /// event has told (or is about to tell) the owner.
    /// - Complexity: O(size of the frame) to encode, outside the lock.
    func send(_ message: Message) {
        send(frame: FrameEncoder().encode(message))
    }

    /// Queues one encoded frame (see `send(_:)`).
    func send(frame: [UInt8]) {
        shared.withLock { shared in
            guard shared.wakeWrite >= 0, shared.closeReason == nil else { return }
            shared.outbound.append(contentsOf: frame)
            SocketCalls.wake(shared.wakeWrite)
        }
    }

    /// Stops the thread, which closes the socket and reports `reason`. Idempotent: the first
    /// reason wins.
    func close(_ reason: SnapSyncError) {
        shared.withLock { shared in
            guard shared.wakeWrite >= 0, shared.closeReason == nil else { return }
            shared.closeReason = reason
            SocketCalls.wake(shared.wakeWrite)
        }
    }

    /// Shuts the socket down under the thread, as a network failure would: the thread reads
    /// end-of-stream and reports the connection lost. For tests of reconnection.
    func drop() {
        shared.withLock { shared in
            if shared.socket >= 0 { SocketCalls.shutdownBoth(shared.socket) }
        }
    }

    // MARK: - The socket thread

    private func run(host: String, port: Int, deadline: ContinuousClock.Instant) {
        let socket: Int32
        do {
            socket = try SocketCalls.connect(host: host, port: port, deadline: deadline)
        } catch {
            finish(socket: -1, reason: .connectFailed("\(host):\(port): \(error)"))
            return
        }
        let cancelled: SnapSyncError? = shared.withLock { shared in
            if shared.closeReason == nil { shared.socket = socket }
            return shared.closeReason
        }
        if let cancelled {
            finish(socket: socket, reason: cancelled)
            return
        }
        continuation.yield(.connected)
        finish(socket: socket, reason: serve(socket))
    }

    /// The poll loop; returns why it stopped.
    private func serve(_ socket: Int32) -> SnapSyncError {
        var decoder = FrameDecoder(limits: .default, accepting: .server)
        var writing: [UInt8] = []
        var written = 0
        let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 1)
        defer { readBuffer.deallocate() }
        do {
            while true {
                // Take what was queued once the previous bytes are all out; the swap hands the
                // drained buffer back so its capacity is reused.
                let closing: SnapSyncError? = shared.withLock { shared in
                    if written == writing.count && !shared.outbound.isEmpty {
                        writing.removeAll(keepingCapacity: true)
                        swap(&writing, &shared.outbound)
                        written = 0
                    }
                    return shared.closeReason
                }
                if let closing { return closing }
                // Write optimistically: the socket buffer usually has room, saving a poll round.
                if written < writing.count {
                    written += try writing.withUnsafeBytes { try SocketCalls.write(socket, UnsafeRawBufferPointer(rebasing: $0[written...])) }
                }
                let ready = try SocketCalls.wait(socket: socket, writable: written < writing.count, wake: wakeRead)
                if ready.wake { SocketCalls.drain(wakeRead) }
                guard ready.socket else { continue }
                // Readable, hung up or failed: reading tells which.
                readLoop: while true {
                    switch try SocketCalls.read(socket, into: readBuffer) {
                    case .bytes(let count):
                        decoder.append(UnsafeRawBufferPointer(rebasing: readBuffer[..<count]))
                        while let message = try decoder.nextMessage() {
                            if case .welcome(_, _, _, let limits) = message {
                                // Frames after WELCOME are bounded by the server's announced limits.
                                decoder.limits = WireLimits(welcome: limits)
                            }
                            continuation.yield(.message(message))
                        }
                        if count < readBuffer.count { break readLoop }
                    case .wouldBlock:
                        break readLoop
                    case .endOfStream:
                        return .connectionLost("the server closed the connection")
                    }
                }
            }
        } catch let error as WireError {
            return .protocolViolation("undecodable frame from the server: \(error)")
        } catch {
            return .connectionLost("\(error)")
        }
    }

    private func finish(socket: Int32, reason: SnapSyncError) {
        shared.withLock { shared in
            shared.socket = -1
            SocketCalls.closeDescriptor(shared.wakeWrite)
            shared.wakeWrite = -1
            shared.outbound = []
        }
        if socket >= 0 { SocketCalls.closeDescriptor(socket) }
        SocketCalls.closeDescriptor(wakeRead)
        continuation.yield(.closed(reason))
        continuation.finish()
    }
}
