internal import Glibc
import SnapSyncHub

// Sending on a TLS connection. The queue holds plaintext, as on the plain port (a DIFF is
// encoded once and shared by every queue); each connection encrypts its own copy. A pass hands
// up to one record's worth of the pending bytes (16 KiB) to one SSL_write, so the many small
// frames a pass queues go out in as few records as possible, not one record per frame. The
// bytes go to OpenSSL where they lie when they are one span (the usual case: a member's DIFFs
// of a pass are adjacent in the room's arena), else gathered into one buffer first.
//
// A record OpenSSL could not send yet (it asked to retry) must be retried with the same bytes
// until OpenSSL takes it, whatever happens to the queue meanwhile (a slow consumer's queue is
// cut down to the frame being sent): its bytes leave the queue for the connection's
// `TLSSession.retryWrite` (at most 16 KiB per connection, outside the output budget, which
// counts the queue).

extension OutputFlush {
    /// Sends records until the queue is empty or the socket is full. Like `transmitPlain` it
    /// touches only the connection and its TLS session (OpenSSL's error queue is per thread),
    /// so it may run on an IO thread.
    /// - Complexity: one SSL_write (one record, one write syscall unless kernel TLS) per 16 KiB;
    ///   O(bytes sent) copies only when the pending bytes lie in several chunks shorter than a
    ///   record (a room's DIFFs of one pass share one arena, so a member's pending DIFFs are
    ///   usually one span, handed to OpenSSL where it lies).
    func transmitTLS(_ connection: Connection, _ tls: TLSSession, _ scratch: FlushScratch) -> Transmission {
        var done = Transmission()
        guard tls.isHandshakeComplete else {
            // Only an ERROR can be queued before the handshake is done (its timeout, shutdown):
            // a client that has no TLS session could not read it, and SSL_write would try to
            // finish the handshake first. It is dropped and the connection closes.
            done.dropsQueuedOutput = true
            return done
        }
        let session = connection.session
        let record = scratch.record
        while true {
            let source: UnsafeRawBufferPointer
            let isRetry = !tls.retryWrite.isEmpty
            if isRetry {
                let count = tls.retryWrite.count
                tls.retryWrite.withUnsafeBytes { record.copyMemory(from: $0) }
                source = UnsafeRawBufferPointer(rebasing: record[0..<count])
            } else {
                guard session.queuedOutputBytes > done.consumed else { return done }
                source = nextRecord(of: session, after: done.consumed, scratch)
            }
            let outcome: TLSSession.Outcome
            do {
                outcome = try tls.write(source)
            } catch {
                done.failure = error.isDisconnect ? "peer went away" : "\(error)"
                return done
            }
            switch outcome {
            case .bytes(let written):
                done.bytesOut += written
                if isRetry {
                    // Less than asked only when the peer negotiated smaller records: the rest is
                    // the next write.
                    tls.retryWrite = written < source.count ? Array(source[written...]) : []
                } else {
                    // Bytes past `written` were not handed over: they stay queued.
                    done.consumed += written
                }
            case .wantWrite, .wantRead:
                // OpenSSL holds this record now and must be given the same bytes again, whatever
                // happens to the queue meanwhile (a slow consumer's is cut down to the frame being
                // sent): they leave the queue for the retry buffer (at most one record).
                if !isRetry {
                    tls.retryWrite = Array(source)
                    done.consumed += source.count
                }
                tls.writeWantsRead = outcome == .wantRead
                return done
            case .closed:
                done.failure = "peer closed the TLS session"
                return done
            }
        }
    }

    /// The queue's bytes after the first `sent`, up to one record: the first chunk where it lies
    /// when it alone fills a record or is all that is pending, else a copy of the front chunks in
    /// the thread's record buffer. Nothing is consumed.
    private func nextRecord(of session: Session, after sent: Int, _ scratch: FlushScratch) -> UnsafeRawBufferPointer {
        let spans = scratch.spans
        let record = scratch.record
        let first = session.gatherOutput(into: spans, capacity: 2, skipping: sent)
        let front = spans[0]
        if first == 1 || front.count >= record.count {
            return UnsafeRawBufferPointer(start: front.base, count: min(front.count, record.count))
        }
        let count = session.gatherOutput(into: spans, capacity: OutputQueue.maxIovecs, skipping: sent)
        var filled = 0
        for index in 0..<count where filled < record.count {
            let take = min(spans[index].count, record.count - filled)
            (record.baseAddress! + filled).copyMemory(from: spans[index].base!, byteCount: take)
            filled += take
        }
        return UnsafeRawBufferPointer(rebasing: record[0..<filled])
    }
}
