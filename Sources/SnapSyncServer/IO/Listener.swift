internal import Glibc
import SnapSyncLoop

/// The listening socket: bound, listening, non-blocking, with a persistent read event that
/// hands every pending connection to the server (accept in a loop until EAGAIN).
final class Listener {
    let fd: Int32
    /// The bound address, with the real port when port 0 was asked for.
    let address: SocketAddress
    /// Connections accepted here speak TLS (`--tls-listen`).
    let isTLS: Bool
    private var event: Event?
    private var pauseTimer: Event?
    private unowned let server: Server

    /// `socket`, `SO_REUSEADDR`, `bind`, `listen`, `getsockname`.
    init(address: SocketAddress, backlog: Int, server: Server, isTLS: Bool = false) throws(SystemError) {
        let fd = try Syscall.socket(domain: address.family, type: Int32(SOCK_STREAM.rawValue))
        do throws(SystemError) {
            // So that a restarted daemon can bind while old connections sit in TIME_WAIT.
            try Syscall.setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            try Syscall.bind(fd, address)
            try Syscall.listen(fd, backlog: Int32(clamping: backlog))
            self.address = try Syscall.localAddress(fd)
        } catch {
            Syscall.close(fd)
            throw error
        }
        self.fd = fd
        self.server = server
        self.isTLS = isTLS
    }

    deinit {
        precondition(event == nil, "a listener was released without close()")
    }

    private var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    func start(loop: EventLoop) throws(EventLoopError) {
        event = try loop.makeEvent(fd: fd, [.read, .persist], context: context, Listener.onAcceptable)
        pauseTimer = try loop.makeTimer(context: context, Listener.onPauseOver)
        try event!.add()
    }

    /// Stops accepting for `duration`, e.g. when out of descriptors (EMFILE): the pending
    /// connection stays in the backlog, and a level-triggered read event would otherwise spin.
    func pause(for duration: Duration) {
        event?.remove()
        try? pauseTimer?.add(timeout: duration)
    }

    /// Stops accepting and closes the socket.
    func close() {
        guard let event else { return }
        event.free()
        pauseTimer?.free()
        self.event = nil
        pauseTimer = nil
        Syscall.close(fd)
    }

    private static let onAcceptable: EventCallback = { _, _, context in
        let listener = Unmanaged<Listener>.fromOpaque(context!).takeUnretainedValue()
        withExtendedLifetime(listener) { listener.server.acceptPending(from: listener) }
    }

    private static let onPauseOver: EventCallback = { _, _, context in
        let listener = Unmanaged<Listener>.fromOpaque(context!).takeUnretainedValue()
        try? listener.event?.add()
    }
}
