import SnapSyncWire
import SnapSyncHub
import SnapSyncLoop

/// What every connection of a daemon shares: the loop, the hub it serves, the flush, the one
/// read buffer all connections read into, the frame cutters and the input budget.
final class ConnectionContext {
    let loop: EventLoop
    let hub: Hub
    let flush: OutputFlush
    var configuration: ServerConfiguration { hub.configuration }

    /// Every read goes here first, and frames are cut straight out of it: the read path
    /// allocates nothing once the connection's partial-frame buffer has grown.
    let readBuffer: UnsafeMutableRawBufferPointer
    static let readBufferSize = 64 * 1024
    /// Cuts frames out of the read buffer: up to max_frame_bytes once HELLO is done, and up to
    /// `maxFrameBytesBeforeHello` before it.
    let frameCutter: FrameCutter
    let preHelloCutter: FrameCutter
    /// The largest frame body accepted before HELLO (PROTOCOL.md §7.1). A HELLO is a few dozen
    /// bytes plus its client name and credentials; larger frames before the handshake are
    /// refused with `frame_too_large` as soon as their length arrives.
    static let maxFrameBytesBeforeHello = 4096

    /// The TLS listener's contexts ask OpenSSL for kernel TLS (`TLSContext.requestsKernelTLS`).
    var tlsRequestsKernelTLS = false
    /// Whether kernel TLS is in use has been logged (once, at the first TLS handshake).
    var hasLoggedKernelTLS = false

    /// Bytes held for unfinished frames, all connections together (`--max-input-bytes`).
    var inputBytes = 0
    /// Called after a connection ended and was forgotten (the daemon may finish shutting down).
    var connectionEnded: () -> Void = {}
    /// Closing connections ended at their deadline with output undelivered. A shutdown reports
    /// them: each connection's close deadline and the server's shutdown deadline are the same
    /// instant, and either timer may fire first.
    var closedAtDeadline = 0

    init(loop: EventLoop, hub: Hub, flush: OutputFlush) {
        self.loop = loop
        self.hub = hub
        self.flush = flush
        let wire = hub.configuration.wire
        self.frameCutter = FrameCutter(limits: wire)
        self.preHelloCutter = FrameCutter(
            maxBodyBytes: min(Self.maxFrameBytesBeforeHello, wire.maxFrameBytes),
            limitDescription: wire.maxFrameBytes > Self.maxFrameBytesBeforeHello
                ? "the limit of \(Self.maxFrameBytesBeforeHello) bytes for frames before HELLO" : nil)
        self.readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
    }

    deinit {
        readBuffer.deallocate()
    }

    /// Every open connection: the transports of the hub's sessions, which in a daemon all have
    /// one (`Server.admit`).
    var connections: [Connection] {
        hub.sessions.values.compactMap { $0.transport as? Connection }
    }
}
