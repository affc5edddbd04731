import Logging
import SnapSyncWire

// Reading and framing: bytes from a socket to whole frames to messages. Never blocks (the
// socket is non-blocking), never trusts a length before checking it, and turns every malformed
// input into an ERROR frame and a close, with a printable, bounded sample of the bytes in the log.

extension Server {
    /// The connection's socket is readable: read (up to `maxReadsPerCallback` × 64 KiB, or until
    /// the kernel has nothing more) and handle every whole frame.
    func readable(_ connection: Connection) {
        defer { noteHighPriorityCallback() }
        for _ in 0..<Self.maxReadsPerCallback {
            let result: Syscall.ReadResult
            do {
                result = try Syscall.read(connection.fd, into: readBuffer)
            } catch {
                destroy(connection, reason: error.isDisconnect ? "peer went away" : "\(error)")
                return
            }
            switch result {
            case .wouldBlock:
                return
            case .endOfFile:
                if connection.state == .closing || connection.output.isEmpty {
                    destroy(connection, reason: "peer closed")
                } else {
                    // Half-closed (e.g. `snapcat` after its input ended): the answers it is owed
                    // still go out, then the connection closes.
                    close(connection, error: nil, "")
                }
                return
            case .bytes(let count):
                stats.bytesIn += UInt64(count)
                guard connection.state != .closing else { continue }
                connection.lastInput = .now
                connection.pingOutstanding = false
                receive(UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]), on: connection)
                if connection.isDestroyed { return }
                // A short read means the socket is drained; skip the read that would say EAGAIN.
                if count < readBuffer.count { return }
            }
        }
    }

    /// Cuts whole frames out of `bytes` (preceded by the connection's pending partial frame) and
    /// handles them; keeps the incomplete tail in `pending`.
    private func receive(_ bytes: UnsafeRawBufferPointer, on connection: Connection) {
        if connection.pending.isEmpty {
            let used = handleFrames(in: bytes, on: connection)
            if connection.state != .closing && used < bytes.count {
                connection.pending.append(contentsOf: bytes[used...])
            }
        } else {
            // Taken out of the connection while frames are handled, so that it stays uniquely
            // referenced and trimming it below never copies it.
            var buffer: [UInt8] = []
            swap(&buffer, &connection.pending)
            buffer.append(contentsOf: bytes)
            let used = buffer.withUnsafeBytes { handleFrames(in: $0, on: connection) }
            guard connection.state != .closing else { return }
            if used == buffer.count {
                // Keep a small buffer for the next partial frame; give a large one back.
                if buffer.capacity <= Self.readBufferSize {
                    buffer.removeAll(keepingCapacity: true)
                    connection.pending = buffer
                }
            } else {
                if used > 0 { buffer.removeSubrange(0..<used) }
                connection.pending = buffer
            }
        }
    }

    /// Handles every whole frame at the start of `bytes`.
    /// - Returns: the bytes used (whole frames); the rest is an incomplete frame.
    /// - Complexity: O(bytes) plus the handling of each frame.
    private func handleFrames(in bytes: UnsafeRawBufferPointer, on connection: Connection) -> Int {
        var offset = 0
        while connection.state != .closing {
            let available = bytes.count - offset
            guard available >= 4 else { break }
            let length = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            // Checked as soon as the 4 length bytes are here, before anything is buffered for the body.
            if length == 0 {
                protocolError(WireError(.malformedFrame, "frame body length 0 (at least the type byte is required)"),
                              on: connection, bytes: UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                break
            }
            if length > configuration.wire.maxFrameBytes {
                protocolError(WireError(.frameTooLarge, "frame body length \(length) exceeds max_frame_bytes \(configuration.wire.maxFrameBytes)"),
                              on: connection, bytes: UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                break
            }
            guard available - 4 >= length else { break }
            let frame = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + 4 + length])
            offset += 4 + length
            handleFrame(frame, on: connection)
        }
        return offset
    }

    /// Decodes one whole frame (length prefix included) and dispatches it.
    private func handleFrame(_ frame: UnsafeRawBufferPointer, on connection: Connection) {
        stats.framesIn += 1
        let message: Message?
        do {
            // The decoder gets exactly one whole frame, so it never holds state between calls
            // and one decoder serves every connection of the loop.
            decoder.append(frame)
            message = try decoder.nextMessage()
        } catch {
            decoder = FrameDecoder(limits: configuration.wire, accepting: .client)
            if let requestId = error.requestId, error.code.kind == .reject {
                // A whole, well-formed REPLACE whose snapshot breaks a content rule: the request
                // fails, the connection goes on. It decoded, so before HELLO the state answers
                // (PROTOCOL.md §8.1).
                guard connection.state == .ready else {
                    protocolError(WireError(.handshakeRequired, "REPLACE before HELLO: the first frame must be HELLO"),
                                  on: connection, bytes: frame)
                    return
                }
                stats.writesRejected += 1
                send(Rejection(error.code, error.detail, identifier: error.identifier).message(requestId: requestId), to: connection)
                return
            }
            protocolError(error, on: connection, bytes: frame)
            return
        }
        guard let message else {
            preconditionFailure("the decoder was given a whole frame and returned none")
        }
        handle(message, from: connection)
    }

    /// A frame the protocol does not allow: log it safely, answer ERROR, close.
    func protocolError(_ error: WireError, on connection: Connection, bytes: UnsafeRawBufferPointer) {
        stats.protocolErrors += 1
        logger.warning("protocol error, closing", metadata: [
            "conn": "\(connection.id)", "peer": "\(connection.peer)", "code": "\(error.code.name)",
            "detail": "\(error.detail)", "bytes": "\(LogEscaping.sample(bytes))",
        ])
        close(connection, error: error.code, error.detail)
    }
}
