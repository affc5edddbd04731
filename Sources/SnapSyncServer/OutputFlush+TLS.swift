internal import Glibc

// Sending on a TLS connection. The queue holds plaintext, as on the plain port (a DIFF is
// encoded once and shared by every queue); each connection encrypts its own copy. A pass copies
// the pending bytes into one record's worth of plaintext (16 KiB) and hands that to one
// SSL_write, so the many small frames a pass queues go out in as few records as possible, not
// one record per frame.
//
// A record handed to OpenSSL is taken out of the queue at once: once SSL_write has seen it, it
// must be retried with the same bytes until OpenSSL takes it, whatever happens to the queue
// meanwhile (a slow consumer's queue is cut down to the frame being sent). A record OpenSSL
// could not take yet is kept in the connection's `TLSSession.retryWrite` (at most 16 KiB per
// connection, outside the output budget, which counts the queue).

extension OutputFlush {
    /// Sends records until the queue is empty or the socket is full.
    /// - Returns: false when the connection ended.
    /// - Complexity: O(bytes sent) copies, one SSL_write (one record, one write syscall unless
    ///   kernel TLS) per 16 KiB.
    func sendTLS(_ connection: Connection, _ tls: TLSSession) -> Bool {
        guard tls.isHandshakeComplete else {
            // Only an ERROR can be queued before the handshake is done (its timeout, shutdown):
            // a client that has no TLS session could not read it, and SSL_write would try to
            // finish the handshake first. It is dropped and the connection closes.
            connection.output.removeAll()
            return true
        }
        while true {
            let length: Int
            let isRetry = !tls.retryWrite.isEmpty
            if isRetry {
                length = tls.retryWrite.count
                tls.retryWrite.withUnsafeBytes { record.copyMemory(from: $0) }
            } else {
                guard !connection.output.isEmpty else { return true }
                length = fillRecord(from: connection.output)
                connection.output.consume(length)
            }
            let outcome: TLSSession.Outcome
            do {
                outcome = try tls.write(UnsafeRawBufferPointer(rebasing: record[0..<length]))
            } catch {
                connection.hub.end(connection, reason: error.isDisconnect ? "peer went away" : "\(error)")
                return false
            }
            switch outcome {
            case .bytes(let written):
                connection.hub.stats.bytesOut += UInt64(written)
                // Less than asked only when the peer negotiated smaller records: the rest is
                // the next write.
                tls.retryWrite = written < length ? Array(record[written..<length]) : []
            case .wantWrite, .wantRead:
                if !isRetry { tls.retryWrite = Array(record[0..<length]) }
                tls.writeWantsRead = outcome == .wantRead
                return true
            case .closed:
                connection.hub.end(connection, reason: "peer closed the TLS session")
                return false
            }
        }
    }

    /// Copies the front of `output`, up to one record, into `record`.
    /// - Returns: the bytes copied.
    private func fillRecord(from output: OutputQueue) -> Int {
        let count = output.gather(into: iovecs, capacity: OutputQueue.maxIovecs)
        var filled = 0
        for index in 0..<count where filled < record.count {
            let take = min(iovecs[index].iov_len, record.count - filled)
            (record.baseAddress! + filled).copyMemory(from: iovecs[index].iov_base!, byteCount: take)
            filled += take
        }
        return filled
    }
}
