internal import CLibeventExtra

// libevent's HTTP server (evhttp): every evhttp call of SnapSync is in this file, the only one
// importing CLibeventExtra. It runs on an `EventLoop` like the loop's other events, so a request
// is a callback of the loop: no second loop, no thread.

/// A plain HTTP/1.x server for GET (and HEAD) requests on a listening socket, answering each
/// request in its callback with what `handler` returns for the request's path.
///
/// Bounds (evhttp settings; libevent 2.1 has no connection cap, `evhttp_set_max_connections` is
/// 2.2's): request headers at most `maxHeaderBytes`, no body, GET and HEAD only, and a connection
/// idle or slow for `timeoutSeconds` is closed, so a client holds a connection only as long as it
/// keeps sending whole requests. The listening socket's backlog bounds what waits.
///
/// Loop thread only. Deinit (`evhttp_free`) closes the listening socket and every open HTTP
/// connection.
package final class HTTPEndpoint {
    /// One answer: status, content type, body. Every answer also says `Cache-Control: no-store`.
    package struct Response {
        package var status: Int32
        package var contentType: String
        package var body: [UInt8]

        package init(status: Int32, contentType: String, body: [UInt8]) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }
    }

    /// Answers a request for `path` (the URI's path, without its query).
    package var handler: (_ path: String) -> Response
    private let http: OpaquePointer
    /// Keeps the loop alive as long as the server: `evhttp_free` must come before `event_base_free`.
    private let loop: EventLoop

    /// `evhttp_new`, `evhttp_accept_socket_with_handle(fd)`, then the bounds
    /// (`evhttp_set_max_headers_size`, `evhttp_set_max_body_size`, `evhttp_set_timeout`,
    /// `evhttp_set_allowed_methods`) and the request callback (`evhttp_set_gencb`).
    /// - Parameter fd: a socket listening already (the caller binds it, so it knows the address);
    ///   the endpoint owns it once this returns, and closes it in deinit. When this throws, `fd`
    ///   is still the caller's to close.
    package init(
        loop: EventLoop, listeningSocket fd: Int32, maxHeaderBytes: Int, timeoutSeconds: Int32,
        handler: @escaping (_ path: String) -> Response
    ) throws(EventLoopError) {
        guard let http = evhttp_new(loop.base) else { throw EventLoopError(function: "evhttp_new") }
        // Owns fd from here on (the evconnlistener closes it in evhttp_free).
        guard evhttp_accept_socket_with_handle(http, fd) != nil else {
            evhttp_free(http)
            throw EventLoopError(function: "evhttp_accept_socket_with_handle")
        }
        evhttp_set_max_headers_size(http, maxHeaderBytes)
        evhttp_set_max_body_size(http, 0)
        evhttp_set_timeout(http, timeoutSeconds)
        evhttp_set_allowed_methods(http, UInt16(EVHTTP_REQ_GET.rawValue | EVHTTP_REQ_HEAD.rawValue))
        self.http = http
        self.loop = loop
        self.handler = handler
        evhttp_set_gencb(http, Self.onRequest, Unmanaged.passUnretained(self).toOpaque())
    }

    /// `evhttp_free`: closes the listening socket and every open HTTP connection.
    deinit {
        evhttp_free(http)
    }

    private static let onRequest: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { request, context in
        guard let request, let context else { return }
        let endpoint = Unmanaged<HTTPEndpoint>.fromOpaque(context).takeUnretainedValue()
        var path = "/"
        if let uri = evhttp_request_get_evhttp_uri(request), let raw = evhttp_uri_get_path(uri) {
            path = String(cString: raw)
        }
        endpoint.reply(request, endpoint.handler(path))
    }

    /// `evhttp_send_reply` with the body in a new evbuffer (libevent copies it; HEAD gets the
    /// headers only, which evhttp handles). A header or a body libevent cannot take (out of
    /// memory) is answered 500 instead.
    private func reply(_ request: OpaquePointer, _ response: Response) {
        guard let buffer = evbuffer_new() else {
            evhttp_send_error(request, 500, "out of memory")
            return
        }
        defer { evbuffer_free(buffer) }
        do throws(EventLoopError) {
            if let headers = evhttp_request_get_output_headers(request) {
                try libeventCheck(evhttp_add_header(headers, "Content-Type", response.contentType), "evhttp_add_header")
                try libeventCheck(evhttp_add_header(headers, "Cache-Control", "no-store"), "evhttp_add_header")
            }
            try libeventCheck(response.body.withUnsafeBytes { evbuffer_add(buffer, $0.baseAddress, $0.count) }, "evbuffer_add")
        } catch {
            evhttp_send_error(request, 500, "out of memory")
            return
        }
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
