import Logging
import SnapSyncWire
import SnapSyncHub
import SnapSyncLoop

// Reading and framing: bytes from a socket to whole frames for the hub. Never blocks (the
// socket is non-blocking), never trusts a length before checking it, and turns every malformed
// input into an ERROR frame and a close, with a printable, bounded sample of the bytes in the log.

extension Connection {
    /// An emptied input buffer up to this capacity is kept for the connection's next unfinished
    /// frame (saving an allocation per split frame); a larger one is freed.
    static let keptInputCapacity = 4096
    /// At most this many reads per readable callback, for fairness between connections;
    /// level-triggered epoll calls back for the rest.
    static let maxReadsPerCallback = 4

    /// What one read of the connection's input gave, on the plain port (`readPlain`) or through
    /// TLS (`readTLS`).
    enum ReadOutcome {
        /// `count` bytes of plaintext in the shared read buffer; `mayHaveMore`: read again.
        case bytes(count: Int, mayHaveMore: Bool)
        /// Nothing more for now: the next readable callback brings the rest.
        case drained
        /// The peer closed its sending side.
        case endOfInput
        /// The read failed and the connection has been ended, or must wait (TLS: for room to
        /// write); nothing more is read in this callback.
        case stop
    }

    /// The socket is readable, or the connection's turn came again: hand the whole frames it
    /// holds to the hub, then read (up to `maxReadsPerCallback` × 64 KiB, or until the kernel,
    /// or OpenSSL, has nothing more) and hand every whole frame to the hub, within one
    /// `InputSlice`. The one read loop of both ports: only one read differs.
    func readable() {
        defer { context.flush.noteHighPriorityCallback() }
        var slice = InputSlice()
        if isHoldingFrames {
            isHoldingFrames = false
            receive(UnsafeRawBufferPointer(start: nil, count: 0), slice: &slice)
            if yieldIfSpent(slice) || session.isEnded { return }
            // Frames the hub handed back (cluster mode) after the peer's EOF: nothing more to
            // read; the end is handled once no request waits (`sessionDrainedDeferredInput`).
            if hasReachedEndOfInput {
                if !session.isAwaitingLog { sessionDrainedDeferredInput() }
                return
            }
        }
        if let tls, !prepareTLSRead(tls) { return }
        // TLS reads a record (16 KiB) at a time: as many as fill the plain port's reads, for the
        // same fairness between connections.
        let reads = tls == nil ? Self.maxReadsPerCallback : Self.maxReadsPerCallback * context.readBuffer.count / TLSSession.recordSize
        for _ in 0..<reads {
            let outcome = if let tls { readTLS(tls) } else { readPlain() }
            switch outcome {
            case .drained, .stop:
                return
            case .endOfInput:
                endOfInput()
                return
            case .bytes(let count, let mayHaveMore):
                hub.countBytesIn(count)
                received(count, slice: &slice)
                if yieldIfSpent(slice) || session.isEnded || !mayHaveMore { return }
            }
        }
        // Records OpenSSL already holds do not make the socket readable again: come back for
        // them in the next loop pass.
        if let tls, tls.hasBufferedInput { readEvent?.activate() }
    }

    /// One read(2) into the shared read buffer.
    private func readPlain() -> ReadOutcome {
        let result: Syscall.ReadResult
        do {
            result = try Syscall.read(fd, into: context.readBuffer)
        } catch {
            hub.end(session, reason: error.isDisconnect ? "peer went away" : "\(error)")
            return .stop
        }
        switch result {
        case .wouldBlock: return .drained
        case .endOfFile: return .endOfInput
        // A short read means the socket is drained: no read that would only say EAGAIN.
        case .bytes(let count): return .bytes(count: count, mayHaveMore: count == context.readBuffer.count)
        }
    }

    /// The slice ended with input left: the connection reads nothing more and waits for its
    /// next turn, after this pass's flush. Returns whether it yielded.
    private func yieldIfSpent(_ slice: InputSlice) -> Bool {
        guard slice.isSpent, !pending.isEmpty, session.state != .closing, !session.isEnded else { return false }
        hub.stats.inputYields += 1
        holdFramesUntilNextTurn()
        return true
    }

    /// Waits for the connection's next turn, after this pass's flush, to handle what `pending`
    /// holds. The read event is removed meanwhile: the socket may still be readable, and a
    /// level-triggered read event would call back at once, in every iteration of the loop, at the
    /// higher priority, so that the flush (and everyone's answers) would wait.
    func holdFramesUntilNextTurn() {
        guard !isHoldingFrames else { return }
        isHoldingFrames = true
        if !hasReachedEndOfInput { readEvent?.remove() }
        flush.resumeNextPass(self)
    }

    /// The connection's turn came (the flush that followed its yield): read events again, and
    /// the read callback now, for the frames it holds.
    func takeTurn() {
        guard !session.isEnded else { return }
        if !hasReachedEndOfInput {
            do {
                try readEvent?.add()
            } catch {
                hub.end(session, reason: "cannot watch for input: \(error)")
                return
            }
        }
        readEvent?.activate()
    }

    /// `count` bytes (plaintext) arrived in the shared read buffer: frames go to the hub, as
    /// many as `slice` allows, and the input budget is enforced.
    func received(_ count: Int, slice: inout InputSlice) {
        guard session.state != .closing else { return }
        receive(UnsafeRawBufferPointer(rebasing: context.readBuffer[0..<count]), slice: &slice)
        if session.isEnded { return }
        if context.inputBytes > context.configuration.maxInputBytes { Self.enforceInputBudget(context) }
    }

    /// The peer sent EOF (it closed, or only shut its sending side, as `nc -N` and many scripts
    /// do). Every frame received before it has been handled, since frames are handled as they
    /// are read; the answers still queued go out, then the connection closes (PROTOCOL.md §7.1),
    /// within `--shutdown-timeout`. An unfinished frame is dropped: it can never complete.
    func endOfInput() {
        stopReading()
        dropInput()
        // Cluster mode: requests still wait for the log (Hub+DeferredInput.swift); the end is
        // handled once they are answered (`sessionDrainedDeferredInput`).
        if session.isAwaitingLog && session.state != .closing {
            endOfInputIsDeferred = true
            return
        }
        if !hasUnsentOutput {
            // Nothing owed (or, when closing, everything already handed to the kernel, which
            // delivers it before the FIN: the peer's receive side is unaffected by its EOF).
            hub.end(session, reason: "peer closed")
        } else if session.state != .closing {
            hub.close(session, error: nil, "")
        }
    }

    /// Cuts whole frames out of `bytes` (preceded by what `pending` holds) and hands them to
    /// the hub, as many as `slice` allows; keeps the rest (an incomplete frame, or whole frames
    /// past the slice) in `pending`, in a buffer at most an eighth larger than it (or
    /// `keptInputCapacity`), and keeps the input budget in step with its bytes.
    private func receive(_ bytes: UnsafeRawBufferPointer, slice: inout InputSlice) {
        defer { accountInput() }
        if pending.isEmpty {
            let used = handleFrames(in: bytes, slice: &slice)
            if used > 0 { noteWholeFrames() }
            if session.state != .closing && used < bytes.count {
                // Into the kept buffer when it fits; else a buffer of the tail's size, where
                // `append` would double the kept one.
                if bytes.count - used <= pending.capacity {
                    pending.append(contentsOf: bytes[used...])
                } else {
                    pending = Array(bytes[used...])
                }
            }
        } else {
            // Taken out of `pending` while frames are handled, so that it stays uniquely
            // referenced and trimming it below never copies it.
            var buffer: [UInt8] = []
            swap(&buffer, &pending)
            Self.grow(&buffer, toAppend: bytes.count)
            buffer.append(contentsOf: bytes)
            let used = buffer.withUnsafeBytes { handleFrames(in: $0, slice: &slice) }
            if used > 0 { noteWholeFrames() }
            guard session.state != .closing else { return }
            let tail = buffer.count - used
            if tail == 0 {
                // Keep a small buffer for the next partial frame; give a large one back.
                if buffer.capacity <= Self.keptInputCapacity {
                    buffer.removeAll(keepingCapacity: true)
                    pending = buffer
                }
            } else if used > 0 && buffer.capacity > Self.slackCapacity(for: tail) {
                // A frame completed and the start of the next one remains in a buffer too large
                // for it: keep it in a buffer of its size. O(tail): the bytes of this read, or the
                // frames held past a slice (at most one callback's reads).
                pending = Array(buffer[used...])
            } else {
                if used > 0 { buffer.removeSubrange(0..<used) }
                pending = buffer
            }
        }
    }

    /// The largest buffer `pending` may keep for `count` bytes: an eighth more than them, or
    /// `keptInputCapacity`. It bounds the input's memory near the bytes the budget counts.
    private static func slackCapacity(for count: Int) -> Int {
        max(count + count / 8, keptInputCapacity)
    }

    /// Makes room in `buffer` (which starts with an unfinished frame) for `count` more bytes.
    /// Capacity grows by an eighth, not by doubling, so that the memory held stays within an
    /// eighth of the bytes that arrived (which the input budget counts); it never grows past
    /// the end of the frame being received unless the new bytes themselves go past it, so a
    /// frame's announced length alone never reserves anything.
    /// - Complexity: amortised O(1) per byte: a growth by at least an eighth moves the bytes
    ///   held, so each byte of a large frame is moved at most about 8 times.
    private static func grow(_ buffer: inout [UInt8], toAppend count: Int) {
        let needed = buffer.count + count
        guard needed > buffer.capacity else { return }
        var frameEnd = Int.max
        if buffer.count >= 4 {
            frameEnd = 4 + (Int(buffer[0]) << 24 | Int(buffer[1]) << 16 | Int(buffer[2]) << 8 | Int(buffer[3]))
        }
        buffer.reserveCapacity(max(needed, min(slackCapacity(for: needed), frameEnd)))
    }

    /// At least one whole frame arrived: the peer is alive (PROTOCOL.md §8.3). Once per read,
    /// not per frame, to keep the clock off the per-frame path.
    private func noteWholeFrames() {
        lastInput = .now
        pingOutstanding = false
    }

    /// Forgets the connection's unhandled input and gives its memory back to the budget.
    func dropInput() {
        pending = []
        isHoldingFrames = false
        accountInput()
    }

    /// Brings `inputBytes` in step with the connection's buffer: the bytes it holds (an
    /// unfinished frame, or frames left past a slice), what `--max-input-bytes` promises to
    /// count. The buffer's spare capacity (at most an eighth of them, or `keptInputCapacity`,
    /// as `receive` keeps it) is not counted.
    func accountInput() {
        let held = pending.count
        context.inputBytes += held - budgetedInputBytes
        budgetedInputBytes = held
    }

    /// Buffered input passed `--max-input-bytes`: closes the connections holding the largest
    /// unfinished frames, largest first, until the total is within the budget again, each with
    /// ERROR `input_budget_exceeded`.
    /// - Complexity: O(c log c) for c connections with an unfinished frame. It runs only when the
    ///   budget is passed, and every run frees at least one connection's buffer.
    private static func enforceInputBudget(_ context: ConnectionContext) {
        let configuration = context.configuration
        let holders = context.connections.filter { $0.budgetedInputBytes > 0 && $0.session.state != .closing }
            .sorted { $0.budgetedInputBytes > $1.budgetedInputBytes }
        for connection in holders where context.inputBytes > configuration.maxInputBytes {
            let held = connection.budgetedInputBytes
            context.hub.logLimited(
                .warning, cause: "input budget exceeded", "input budget exceeded, closing the connection with the largest unfinished frame",
                metadata: connection.session.logMetadata([
                    "buffered_bytes": "\(held)", "input_bytes": "\(context.inputBytes)",
                    "max_input_bytes": "\(configuration.maxInputBytes)",
                ]))
            context.hub.close(
                connection.session, error: .inputBudgetExceeded,
                "the server's buffered input passed --max-input-bytes \(ConfigurationValue.describe(byteCount: configuration.maxInputBytes)); this connection held the largest unfinished frame (\(held) bytes)"
            )
        }
    }

    /// A TLS record header of a handshake (content type 22, version 3.x) where the first frame's
    /// length prefix should be: a TLS client that was given the plain port.
    private static func looksLikeTLSHandshake(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= 2 && bytes[0] == 0x16 && bytes[1] == 0x03
    }

    /// Hands the whole frames at the start of `bytes`, cut in place (`FrameCutter`), to the
    /// hub, until `slice` ends.
    /// - Returns: the bytes used (whole frames handled); the rest is an incomplete frame, or
    ///   frames left for the connection's next turn.
    /// - Complexity: O(1) per frame to cut, plus the handling of each frame.
    private func handleFrames(in bytes: UnsafeRawBufferPointer, slice: inout InputSlice) -> Int {
        var offset = 0
        while session.state != .closing {
            // HELLO is tiny: before it, a connection may not make the server hold more.
            let cutter = session.state == .awaitingHello ? context.preHelloCutter : context.frameCutter
            let frame: UnsafeRawBufferPointer
            do {
                guard let whole = try cutter.nextFrame(in: bytes[offset...]) else { break }
                frame = whole
            } catch {
                let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
                if tls == nil && session.state == .awaitingHello && offset == 0 && pending.isEmpty && Self.looksLikeTLSHandshake(rest) {
                    hub.logLimited(
                        .warning, cause: "TLS handshake sent to the plain port", "TLS handshake sent to the plain port, closing",
                        metadata: session.logMetadata(["code": "\(error.code.name)", "bytes": "\(LogEscaping.sample(rest))"]))
                    hub.stats.protocolErrors += 1
                    hub.close(session, error: error.code, error.detail)
                } else {
                    hub.protocolError(error, on: session, bytes: rest)
                }
                break
            }
            offset += frame.count
            hub.receive(frame: frame, from: session)
            if !slice.handledFrame() { break }
        }
        return offset
    }
}
