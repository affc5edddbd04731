internal import Glibc
import SnapSyncHub
import SnapSyncLoop

// --metrics-listen's HTTP server: its socket is bound here (ours, so any address `SocketAddress`
// takes, and the real port), and libevent's HTTP server (SnapSyncLoop's `HTTPEndpoint`) serves
// it on the daemon's own loop (the `EventLoop` given), so a scrape is a callback of the loop like
// any other: no second loop, no thread, and the handler reads the hub's counters without locks.

/// A plain HTTP/1.x server for a few fixed GET paths, answering each request in its callback
/// (`HTTPEndpoint`, whose doc gives the bounds: `maxHeaderBytes`, `timeout`).
final class MetricsHTTPServer {
    /// One answer: status, content type, body.
    typealias Response = HTTPEndpoint.Response

    static let maxHeaderBytes = 8 * 1024
    static let timeout: Int32 = 10
    static let backlog: Int32 = 64

    /// The bound address, with the real port when port 0 was asked for.
    let address: SocketAddress
    private let endpoint: HTTPEndpoint
    /// Answers a GET of `path` (the URI's path, without query); 503 until the owner sets it.
    var route: (String) -> Response {
        get { endpoint.handler }
        set { endpoint.handler = newValue }
    }

    /// `socket`, `SO_REUSEADDR`, `bind`, `listen`, then an `HTTPEndpoint` on that socket.
    init(address requested: SocketAddress, loop: EventLoop) throws(ServerError) {
        let fd: Int32
        let bound: SocketAddress
        do {
            fd = try Syscall.socket(domain: requested.family, type: Int32(SOCK_STREAM.rawValue))
            do throws(SystemError) {
                try Syscall.setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
                try Syscall.bind(fd, requested)
                try Syscall.listen(fd, backlog: Self.backlog)
                bound = try Syscall.localAddress(fd)
            } catch {
                Syscall.close(fd)
                throw error
            }
        } catch {
            throw ServerError("cannot listen for metrics on \(requested): \(error)")
        }
        do {
            endpoint = try HTTPEndpoint(
                loop: loop, listeningSocket: fd, maxHeaderBytes: Self.maxHeaderBytes, timeoutSeconds: Self.timeout,
                handler: { _ in Response(status: 503, contentType: "text/plain; charset=utf-8", body: []) })
        } catch {
            Syscall.close(fd)
            throw ServerError("cannot listen for metrics on \(requested): \(error)")
        }
        self.address = bound
    }
}
