internal import CLibeventExtra
internal import Glibc
import SnapSyncLoop

// libevent's HTTP server (evhttp) for --metrics-listen: every evhttp call of SnapSync is in
// this file, the only one importing CLibeventExtra. It runs on the daemon's own loop (the
// `EventLoop` given), so a scrape is a callback of the loop like any other: no second loop, no
// thread, and the handler reads the hub's counters without locks.

/// A plain HTTP/1.x server for a few fixed GET paths, answering each request in its callback.
///
/// Bounds (evhttp settings; libevent 2.1 has no connection cap, `evhttp_set_max_connections` is
/// 2.2's): request headers at most `maxHeaderBytes`, no body, GET and HEAD only, and a
/// connection idle or slow for `timeout` is closed, so a client holds a connection only as long
/// as it keeps sending whole requests. The listening socket's backlog bounds what waits.
final class MetricsHTTPServer {
    /// One answer: status, content type, body.
    struct Response {
        var status: Int32
        var contentType: String
        var body: [UInt8]
    }

    static let maxHeaderBytes = 8 * 1024
    static let timeout: Int32 = 10
    static let backlog: Int32 = 64

    /// The bound address, with the real port when port 0 was asked for.
    let address: SocketAddress
    private let http: OpaquePointer
    /// Answers a GET of `path` (the URI's path, without query); 503 until the owner sets it.
    var route: (String) -> Response = { _ in Response(status: 503, contentType: "text/plain; charset=utf-8", body: []) }
    /// Keeps the loop alive as long as the server: `evhttp_free` must come before `event_base_free`.
    private let loop: EventLoop

    /// `socket`, `SO_REUSEADDR`, `bind`, `listen` (ours, so any address `SocketAddress` takes,
    /// and the real port), then `evhttp_new`, `evhttp_accept_socket_with_handle` and the bounds.
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
        guard let http = evhttp_new(loop.rawBase) else {
            Syscall.close(fd)
            throw ServerError("cannot listen for metrics on \(requested): evhttp_new failed")
        }
        // Owns fd from here on (the evconnlistener closes it in evhttp_free).
        guard evhttp_accept_socket_with_handle(http, fd) != nil else {
            evhttp_free(http)
            Syscall.close(fd)
            throw ServerError("cannot listen for metrics on \(requested): evhttp_accept_socket_with_handle failed")
        }
        evhttp_set_max_headers_size(http, Self.maxHeaderBytes)
        evhttp_set_max_body_size(http, 0)
        evhttp_set_timeout(http, Self.timeout)
        evhttp_set_allowed_methods(http, UInt16(EVHTTP_REQ_GET.rawValue | EVHTTP_REQ_HEAD.rawValue))
        self.http = http
        self.address = bound
        self.loop = loop
        evhttp_set_gencb(http, Self.onRequest, Unmanaged.passUnretained(self).toOpaque())
    }

    /// `evhttp_free`: closes the listening socket and every open HTTP connection.
    deinit {
        evhttp_free(http)
    }

    private static let onRequest: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { request, context in
        guard let request, let context else { return }
        let server = Unmanaged<MetricsHTTPServer>.fromOpaque(context).takeUnretainedValue()
        var path = "/"
        if let uri = evhttp_request_get_evhttp_uri(request), let raw = evhttp_uri_get_path(uri) {
            path = String(cString: raw)
        }
        let response = server.route(path)
        server.reply(request, response)
    }

    /// `evhttp_send_reply` with the body in a new evbuffer (libevent copies it; HEAD gets the
    /// headers only, which evhttp handles).
    private func reply(_ request: OpaquePointer, _ response: Response) {
        if let headers = evhttp_request_get_output_headers(request) {
            evhttp_add_header(headers, "Content-Type", response.contentType)
            evhttp_add_header(headers, "Cache-Control", "no-store")
        }
        guard let buffer = evbuffer_new() else {
            evhttp_send_error(request, 500, "out of memory")
            return
        }
        defer { evbuffer_free(buffer) }
        _ = response.body.withUnsafeBytes { evbuffer_add(buffer, $0.baseAddress, $0.count) }
        evhttp_send_reply(request, response.status, Self.reason(response.status), buffer)
    }

    private static func reason(_ status: Int32) -> String {
        switch status {
        case 200: "OK"
        case 404: "Not Found"
        case 503: "Service Unavailable"
        default: "Error"
        }
    }
}
