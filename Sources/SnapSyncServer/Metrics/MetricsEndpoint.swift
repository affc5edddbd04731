import CoreMetrics
package import Logging
package import SnapSyncStore
import SnapSyncWire
package import SnapSyncHub
package import SnapSyncLoop

/// `--metrics-listen HOST:PORT`: Prometheus `/metrics` and `/healthz` over HTTP, on the daemon's
/// own loop (libevent's evhttp, `MetricsHTTPServer`), from before recovery until the loop ends.
///
/// `/healthz` answers 503 until the daemon is ready (recovered, and its client listener up),
/// 200 while it serves, 503 again once shutdown began; `/metrics` answers 200 always (before
/// `attach`, only what does not need the hub: build info and zeros). Any other path is 404.
///
/// Start-up: the endpoint is bound before recovery, which runs on the loop's thread;
/// `serveWhileStarting()` (called from recovery's progress reports) answers the requests that
/// arrived meanwhile, so a scrape of a long recovery gets 503, not a hang.
package final class MetricsEndpoint {
    /// The bound address, with the real port when port 0 was asked for.
    package let address: SocketAddress
    let logger: Logger
    let loop: EventLoop
    private let metrics: MetricsRegistry
    private var http: MetricsHTTPServer?
    private var server: Server?

    /// Binds `listen` (`HOST:PORT`, `[v6]:PORT`) on `loop` and logs `metrics: serving
    /// http://HOST:PORT/metrics and /healthz` (not "listening on", which tools read as the
    /// client port).
    /// - Parameter build: `snapsync_build_info`'s labels beyond the libevent version.
    package init(listen: String, loop: EventLoop, logger: Logger, build: [(String, String)] = []) throws(ServerError) {
        let requested: SocketAddress
        do {
            let (host, port) = try Self.parse(listen)
            requested = try SocketAddress(host: host, port: port)
        } catch let error as ConfigurationError {
            throw ServerError(error.message)
        } catch {
            throw ServerError("--metrics-listen \(listen): \(error)")
        }
        self.logger = logger
        self.loop = loop
        let metrics = MetricsRegistry(
            build: [("protocol_version", "\(ProtocolVersion.current)"), ("libevent", EventLoop.libeventVersion), ("event_backend", loop.backend)] + build)
        self.metrics = metrics
        let http = try MetricsHTTPServer(address: requested, loop: loop)
        self.http = http
        self.address = http.address
        http.route = { [unowned self] path in self.answer(path) }
        logger.info(
            "metrics: serving http://\(address)/metrics and /healthz",
            metadata: ["max_header_bytes": "\(MetricsHTTPServer.maxHeaderBytes)", "timeout_s": "\(MetricsHTTPServer.timeout)"])
        if !address.isLoopback {
            // The endpoint has no authentication (--help says to keep it on loopback or a
            // private network): say so where an operator who bound it wider will look.
            logger.warning(
                "metrics: \(address) is not a loopback address, and /metrics and /healthz have no authentication: anyone who can reach the port reads the daemon's metrics; bind 127.0.0.1 or firewall the port",
                metadata: ["metrics_listen": "\(listen)"])
        }
    }

    /// Closes the HTTP listener and its connections (before the loop is freed).
    package func close() {
        http = nil
        server = nil
    }

    /// Answers the requests that arrived while start-up holds the loop's thread (recovery):
    /// runs the loop's ready callbacks without waiting. Only the endpoint has events then.
    package func serveWhileStarting() {
        do {
            try loop.runReady()
        } catch {
            logger.warning("metrics: cannot serve during start-up", metadata: ["error": "\(error)"])
        }
    }

    /// From now on the endpoint reports `server`'s hub, records the write-to-ACK latency, and
    /// (with a durable store) each fdatasync of the log. `/healthz` turns 200 once `server` listens.
    package func attach(_ server: Server, store: DurableStore?) {
        self.server = server
        server.hub.writeAckTimer = WriteAckTimer(timer: metrics.writeAckTimer, clock: Syscall.monotonicNanoseconds)
        let fsyncTimer = metrics.fsyncTimer
        store?.fsyncObserver = { fsyncTimer.recordNanoseconds($0.nanoseconds) }
    }

    /// Whether `/healthz` says 200: recovered, listening, not shutting down.
    package var isReady: Bool {
        guard let server else { return false }
        return server.isListening && !server.isShuttingDown
    }

    private func answer(_ path: String) -> MetricsHTTPServer.Response {
        switch path {
        case "/metrics":
            if let server {
                metrics.update(
                    from: server.hub, connections: server.hub.sessions.count, tlsCertificateNotAfter: server.tlsContext?.certificateNotAfter)
            }
            return .init(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: metrics.exposition())
        case "/healthz":
            if isReady { return .init(status: 200, contentType: "text/plain; charset=utf-8", body: Array("ok\n".utf8)) }
            let state = server == nil ? "recovering" : server!.isShuttingDown ? "shutting down" : "not listening yet"
            return .init(status: 503, contentType: "text/plain; charset=utf-8", body: Array("\(state)\n".utf8))
        default:
            return .init(status: 404, contentType: "text/plain; charset=utf-8", body: Array("not found: /metrics and /healthz only\n".utf8))
        }
    }

    /// `HOST:PORT`, `[IPv6]:PORT`: the host, and a port in 0...65535 (0 picks a free one).
    /// Also `--tls-listen`'s syntax (`flag` names it in the error).
    package static func parse(_ listen: String, flag: String = "--metrics-listen") throws(ConfigurationError) -> (host: String, port: Int) {
        let fail = ConfigurationError(message: "\(flag) must be HOST:PORT (e.g. 127.0.0.1:9400 or [::1]:9400), not \(listen)")
        guard let colon = listen.lastIndex(of: ":") else { throw fail }
        var host = String(listen[..<colon])
        guard let port = Int(listen[listen.index(after: colon)...]), (0...65535).contains(port) else { throw fail }
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            throw fail
        }
        guard !host.isEmpty else { throw fail }
        return (host, port)
    }
}
