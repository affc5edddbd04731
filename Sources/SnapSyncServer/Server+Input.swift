import Logging
import SnapSyncWire

// Reading and framing: bytes from a socket to whole frames to messages. Never blocks (the
// socket is non-blocking), never trusts a length before checking it, and turns every malformed
// input into an ERROR frame and a close, with a printable, bounded sample of the bytes in the log.

extension Server {
    /// The largest frame body accepted before HELLO (PROTOCOL.md §7.1). A HELLO is a few dozen
    /// bytes plus its client name and credentials; larger frames before the handshake are
    /// refused with `frame_too_large` as soon as their length arrives.
    static let maxFrameBytesBeforeHello = 4096
    /// An emptied input buffer up to this capacity is kept for the connection's next unfinished
    /// frame (saving an allocation per split frame); a larger one is freed.
    static let keptInputCapacity = 4096

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
                endOfInput(connection)
                return
            case .bytes(let count):
                stats.bytesIn += UInt64(count)
                guard connection.state != .closing else { continue }
                receive(UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]), on: connection)
                if connection.isDestroyed { return }
                if inputBytes > configuration.maxInputBytes { enforceInputBudget() }
                if connection.isDestroyed { return }
                // A short read means the socket is drained; skip the read that would say EAGAIN.
                if count < readBuffer.count { return }
            }
        }
    }

    /// The peer sent EOF (it closed, or only shut its sending side, as `nc -N` and many scripts
    /// do). Every frame received before it has been handled, since frames are handled as they
    /// are read; the answers still queued go out, then the connection closes (PROTOCOL.md §7.1),
    /// within `--shutdown-timeout`. An unfinished frame is dropped: it can never complete.
    private func endOfInput(_ connection: Connection) {
        connection.stopReading()
        dropInput(connection)
        if connection.output.isEmpty {
            // Nothing owed (or, when closing, everything already handed to the kernel, which
            // delivers it before the FIN: the peer's receive side is unaffected by its EOF).
            destroy(connection, reason: "peer closed")
        } else if connection.state != .closing {
            close(connection, error: nil, "")
        }
    }

    /// Cuts whole frames out of `bytes` (preceded by the connection's pending partial frame) and
    /// handles them; keeps the incomplete tail in `pending` and keeps `inputBytes` in step with
    /// its capacity.
    private func receive(_ bytes: UnsafeRawBufferPointer, on connection: Connection) {
        defer { accountInput(of: connection) }
        if connection.pending.isEmpty {
            let used = handleFrames(in: bytes, on: connection)
            if used > 0 { noteWholeFrames(on: connection) }
            if connection.state != .closing && used < bytes.count {
                connection.pending.append(contentsOf: bytes[used...])
            }
        } else {
            // Taken out of the connection while frames are handled, so that it stays uniquely
            // referenced and trimming it below never copies it.
            var buffer: [UInt8] = []
            swap(&buffer, &connection.pending)
            Self.grow(&buffer, toAppend: bytes.count)
            buffer.append(contentsOf: bytes)
            let used = buffer.withUnsafeBytes { handleFrames(in: $0, on: connection) }
            if used > 0 { noteWholeFrames(on: connection) }
            guard connection.state != .closing else { return }
            if used == buffer.count {
                // Keep a small buffer for the next partial frame; give a large one back.
                if buffer.capacity <= Self.keptInputCapacity {
                    buffer.removeAll(keepingCapacity: true)
                    connection.pending = buffer
                }
            } else if used > 0 && buffer.capacity > Self.readBufferSize && buffer.capacity > 4 * (buffer.count - used) {
                // A large frame completed and a small tail of the next one remains: keep the tail
                // in a buffer of its size, not in the large one. O(tail), at most a quarter of
                // the large buffer, so amortised against the bytes that filled it.
                connection.pending = Array(buffer[used...])
            } else {
                if used > 0 { buffer.removeSubrange(0..<used) }
                connection.pending = buffer
            }
        }
    }

    /// Makes room in `buffer` (which starts with an unfinished frame) for `count` more bytes.
    /// Capacity doubles, for amortised O(1) appends, but never past the end of the frame being
    /// received unless the new bytes themselves go past it: the memory held follows the bytes
    /// that arrived, and a frame's announced length alone never reserves anything.
    private static func grow(_ buffer: inout [UInt8], toAppend count: Int) {
        let needed = buffer.count + count
        guard needed > buffer.capacity else { return }
        var frameEnd = Int.max
        if buffer.count >= 4 {
            frameEnd = 4 + (Int(buffer[0]) << 24 | Int(buffer[1]) << 16 | Int(buffer[2]) << 8 | Int(buffer[3]))
        }
        buffer.reserveCapacity(max(needed, min(2 * buffer.capacity, frameEnd)))
    }

    /// At least one whole frame arrived: the peer is alive (PROTOCOL.md §8.3). Once per read,
    /// not per frame, to keep the clock off the per-frame path.
    private func noteWholeFrames(on connection: Connection) {
        connection.lastInput = .now
        connection.pingOutstanding = false
    }

    /// Forgets the connection's unfinished frame and gives its memory back to the budget.
    func dropInput(_ connection: Connection) {
        connection.pending = []
        accountInput(of: connection)
    }

    /// Brings `inputBytes` in step with the connection's buffer: its capacity while it holds an
    /// unfinished frame; an empty buffer kept for the next one (at most `keptInputCapacity`) is
    /// a per-connection cost, not budgeted input.
    private func accountInput(of connection: Connection) {
        let held = connection.pending.isEmpty ? 0 : connection.pending.capacity
        inputBytes += held - connection.budgetedInputBytes
        connection.budgetedInputBytes = held
    }

    /// Buffered input passed `--max-input-bytes`: closes the connections holding the largest
    /// unfinished frames, largest first, until the total is within the budget again, each with
    /// ERROR `input_budget_exceeded`.
    /// - Complexity: O(c log c) for c connections with an unfinished frame. It runs only when the
    ///   budget is passed, and every run frees at least one connection's buffer.
    private func enforceInputBudget() {
        let holders = connections.values.filter { $0.budgetedInputBytes > 0 && $0.state != .closing }
            .sorted { $0.budgetedInputBytes > $1.budgetedInputBytes }
        for connection in holders where inputBytes > configuration.maxInputBytes {
            let held = connection.budgetedInputBytes
            logger.warning(
                "input budget exceeded, closing the connection with the largest unfinished frame",
                metadata: [
                    "conn": "\(connection.id)", "peer": "\(connection.peer)", "buffered_bytes": "\(held)",
                    "input_bytes": "\(inputBytes)", "max_input_bytes": "\(configuration.maxInputBytes)",
                ])
            close(
                connection, error: .inputBudgetExceeded,
                "the server's buffered input passed --max-input-bytes \(ConfigurationValue.describe(byteCount: configuration.maxInputBytes)); this connection held the largest unfinished frame (\(held) bytes)"
            )
        }
    }

    /// Handles every whole frame at the start of `bytes`, cut in place (`FrameCutter`).
    /// - Returns: the bytes used (whole frames); the rest is an incomplete frame.
    /// - Complexity: O(1) per frame to cut, plus the handling of each frame.
    private func handleFrames(in bytes: UnsafeRawBufferPointer, on connection: Connection) -> Int {
        var offset = 0
        while connection.state != .closing {
            // HELLO is tiny: before it, a connection may not make the server hold more.
            let cutter = connection.state == .awaitingHello ? preHelloCutter : frameCutter
            let frame: UnsafeRawBufferPointer
            do {
                guard let whole = try cutter.nextFrame(in: bytes[offset...]) else { break }
                frame = whole
            } catch {
                protocolError(error, on: connection, bytes: UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                break
            }
            offset += frame.count
            handleFrame(frame, on: connection)
        }
        return offset
    }

    /// Decodes one whole frame (length prefix included), in place, and dispatches it.
    private func handleFrame(_ frame: UnsafeRawBufferPointer, on connection: Connection) {
        stats.framesIn += 1
        let message: Message
        do {
            message = try FrameDecoder.decode(frame: frame, limits: configuration.wire, accepting: .client)
        } catch {
            if let requestID = error.requestID, error.code.kind == .reject {
                // A whole, well-formed REPLACE whose snapshot breaks a content rule: the request
                // fails, the connection goes on. It decoded, so before HELLO the state answers
                // (PROTOCOL.md §8.1).
                guard connection.state == .ready else {
                    protocolError(
                        WireError(.handshakeRequired, "REPLACE before HELLO: the first frame must be HELLO"),
                        on: connection, bytes: frame)
                    return
                }
                stats.writesRejected += 1
                send(Rejection(error.code, error.detail, identifier: error.identifier).message(requestID: requestID), to: connection)
                return
            }
            protocolError(error, on: connection, bytes: frame)
            return
        }
        handle(message, from: connection)
    }

    /// A frame the protocol does not allow: log it safely, answer ERROR, close.
    func protocolError(_ error: WireError, on connection: Connection, bytes: UnsafeRawBufferPointer) {
        stats.protocolErrors += 1
        logger.warning(
            "protocol error, closing",
            metadata: [
                "conn": "\(connection.id)", "peer": "\(connection.peer)", "code": "\(error.code.name)",
                "detail": "\(error.detail)", "bytes": "\(LogEscaping.sample(bytes))",
            ])
        close(connection, error: error.code, error.detail)
    }
}
