import Logging
import SnapSyncHub
import SnapSyncWire
internal import Glibc

// Accepting: every pending connection is admitted as a `Connection` of the hub, or refused at
// once with ERROR (at the connection limit, or while shutting down).

extension Server {
    /// Accepts every pending connection (until EAGAIN). Over `maxConnections`, or while
    /// shutting down, a connection is refused at once with ERROR and closed, never left waiting.
    func acceptPending(from listener: Listener) {
        defer { flush.noteHighPriorityCallback() }
        while true {
            let accepted: Syscall.Accepted
            do {
                accepted = try Syscall.accept(listener.fd)
            } catch {
                if error.errno == EMFILE || error.errno == ENFILE || error.errno == ENOBUFS || error.errno == ENOMEM {
                    logger.warning("cannot accept, pausing accepts for 100ms", metadata: ["error": "\(error)"])
                    listener.pause(for: .milliseconds(100))
                    return
                }
                // ECONNABORTED and friends: that one connection is gone; go on with the next.
                logger.debug("accept failed", metadata: ["error": "\(error)"])
                continue
            }
            guard case .connection(let fd, let peer) = accepted else { return }
            if listener.isTLS && (isShuttingDown || hub.sessions.count >= configuration.maxConnections) {
                // An ERROR frame in clear text would only be a bad record to a TLS client.
                hub.stats.connectionsRefused += 1
                let reason = isShuttingDown ? "shutting down" : "too many connections"
                hub.logLimited(.warning, cause: "TLS connection refused: \(reason)", "TLS connection refused: \(reason)", metadata: ["peer": "\(peer)"])
                Syscall.close(fd)
            } else if isShuttingDown {
                hub.stats.connectionsRefusedShuttingDown += 1
                refuse(fd, .shuttingDown, "the server is shutting down")
            } else if hub.sessions.count >= configuration.maxConnections {
                hub.stats.connectionsRefused += 1
                hub.logLimited(
                    .warning, cause: "connection refused: too many connections", "connection refused: too many connections",
                    metadata: [
                        "peer": "\(peer)", "max_connections": "\(configuration.maxConnections)",
                    ])
                refuse(fd, .tooManyConnections, "the server is at its limit of \(configuration.maxConnections) connections")
            } else {
                admit(fd, peer: peer, tls: listener.isTLS)
            }
        }
    }

    private func admit(_ fd: Int32, peer: SocketAddress, tls: Bool) {
        // Replies are small and latency matters more than segment count; writes are already
        // coalesced per pass, so Nagle would only add delay.
        try? Syscall.setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
        var session: TLSSession?
        if tls, let tlsContext {
            do {
                session = try TLSSession(context: tlsContext, fd: fd)
            } catch {
                logger.error("cannot start TLS on a new connection", metadata: ["peer": "\(peer)", "error": "\(error)"])
                Syscall.close(fd)
                return
            }
        }
        let connection = Connection(id: hub.makeSessionID(), fd: fd, address: peer, context: connectionContext, tls: session)
        do {
            try connection.start()
        } catch {
            logger.error("cannot watch a new connection", metadata: ["peer": "\(peer)", "error": "\(error)"])
            hub.end(connection.session, reason: "cannot watch it")
            return
        }
        hub.open(connection.session)
        hub.stats.connectionsAccepted += 1
        logger.debug("connection accepted", metadata: ["conn": "\(connection.session.id)", "peer": "\(peer)", "tls": "\(tls)"])
    }

    /// Best effort: the ERROR is written straight into the new socket's empty send buffer, the
    /// sending side is shut, input already there is discarded (so that closing does not reset
    /// the connection under the ERROR), and the socket is closed.
    private func refuse(_ fd: Int32, _ code: ErrorCode, _ message: String) {
        var frame: [UInt8] = []
        FrameEncoder().encode(.error(code, message), into: &frame)
        _ = frame.withUnsafeBytes { try? Syscall.send(fd, $0) }
        Syscall.shutdownWrite(fd)
        _ = try? Syscall.read(fd, into: connectionContext.readBuffer)
        Syscall.close(fd)
    }
}
