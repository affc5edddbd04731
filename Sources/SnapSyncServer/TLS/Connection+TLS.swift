import Logging
import SnapSyncHub
import SnapSyncLoop

// Reading on a TLS connection: the handshake, then plaintext through `TLSSession.read` into the
// shared read buffer, cut into frames exactly as on the plain port (`Connection+Input.swift`).
// Writing is the flush's (`OutputFlush+TLS.swift`). The handshake happens before HELLO, under
// the same handshake timeout: a peer that never finishes it is closed like one that never sends
// HELLO.

extension Connection {
    /// The first byte of a TLS connection must start a handshake record (content type 22).
    static let tlsHandshakeRecordType: UInt8 = 0x16

    /// Before the read loop (`readable`): a write that waited for input is retried, and a
    /// first byte that cannot start a handshake is refused.
    /// - Returns: whether reading may go on.
    func prepareTLSRead(_ tls: TLSSession) -> Bool {
        if tls.writeWantsRead {
            // A write was waiting for this: the flush retries it.
            tls.writeWantsRead = false
            hub.markDirty(session)
        }
        return tls.hasCheckedFirstByte || refusePlaintext(tls)
    }

    /// One `TLSSession.read` (a record at most) into the shared read buffer, the handshake first.
    func readTLS(_ tls: TLSSession) -> ReadOutcome {
        let outcome: TLSSession.Outcome
        do {
            outcome = try tls.read(into: context.readBuffer)
        } catch {
            if tls.isHandshakeComplete || error.isDisconnect {
                hub.end(session, reason: error.isDisconnect ? "peer went away" : "\(error)")
            } else {
                hub.stats.protocolErrors += 1
                hub.logLimited(.info, cause: "TLS handshake failed", "TLS handshake failed, closing", metadata: session.logMetadata(["error": "\(error)"]))
                hub.end(session, reason: "TLS handshake failed")
            }
            return .stop
        }
        if tls.isHandshakeComplete && !tls.isHandshakeNoted { noteHandshake(tls) }
        switch outcome {
        case .wantRead:
            return .drained
        case .wantWrite:
            tls.readWantsWrite = true
            do {
                try waitForWritable()
            } catch {
                hub.end(session, reason: "cannot watch for writability: \(error)")
            }
            return .stop
        case .closed:
            return .endOfInput
        case .bytes(let count):
            return .bytes(count: count, mayHaveMore: true)
        }
    }

    /// Before the handshake: closes the connection when its first byte cannot start a TLS
    /// handshake (a plaintext client on the TLS port), so it fails at once with a clear log
    /// line instead of at the handshake timeout. Only peeks: OpenSSL reads the byte itself.
    /// - Returns: whether reading may go on.
    private func refusePlaintext(_ tls: TLSSession) -> Bool {
        let peeked: (Syscall.ReadResult, UInt8)
        do {
            peeked = try Syscall.peekByte(fd)
        } catch {
            hub.end(session, reason: error.isDisconnect ? "peer went away" : "\(error)")
            return false
        }
        guard case .bytes = peeked.0 else { return true }
        tls.hasCheckedFirstByte = true
        guard peeked.1 != Self.tlsHandshakeRecordType else { return true }
        hub.stats.protocolErrors += 1
        hub.logLimited(
            .warning, cause: "plaintext sent to the TLS port", "plaintext sent to the TLS port (not a TLS handshake), closing",
            metadata: session.logMetadata(["first_byte": "0x\(String(peeked.1, radix: 16))"]))
        hub.end(session, reason: "plaintext sent to the TLS port")
        return false
    }

    /// Logs the end of a handshake (debug), and once per daemon whether kernel TLS is in use.
    private func noteHandshake(_ tls: TLSSession) {
        tls.isHandshakeNoted = true
        let logger = hub.logger
        var metadata: Logger.Metadata = ["version": "\(tls.protocolVersion)", "cipher": "\(tls.cipher)"]
        if let subject = tls.peerSubject { metadata["client_certificate"] = "\(subject)" }
        // Before HELLO is read (it comes after the handshake): the hub may authenticate by it.
        if let verified = tls.verifiedPeerCertificate {
            session.clientCertificate = ClientCertificate(subject: verified.subject, notAfterSeconds: verified.notAfter)
        }
        logger.debug("TLS handshake done", metadata: session.logMetadata(metadata))
        if !context.hasLoggedKernelTLS {
            context.hasLoggedKernelTLS = true
            let kernel = tls.usesKernelTLS
            logger.notice(
                kernel ? "kernel TLS in use: records are encrypted by the kernel" : "kernel TLS not in use: records are encrypted by OpenSSL in user space",
                metadata: ["requested": "\(context.tlsRequestsKernelTLS)", "version": "\(tls.protocolVersion)", "cipher": "\(tls.cipher)"])
        }
    }
}
