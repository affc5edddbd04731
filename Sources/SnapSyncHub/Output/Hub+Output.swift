import Logging
import SnapSyncStore
package import SnapSyncWire

// Queuing output: replies are encoded into the hub's scratch buffer and copied into the
// session's queue; DIFFs and SNAPSHOT bodies are queued by reference. Nothing is written here:
// the session goes on `dirty`, and at the end of the loop pass (`finishPass`) the hub commits
// the pass's writes and hands each dirty session to its transport, which sends it.

extension Hub {
    /// Queues `message` for `session`. Over the session's output cap the session is cut off as a
    /// slow consumer instead (unless `force`, for the ERROR that ends it).
    package func send(_ message: Message, to session: Session, force: Bool = false) {
        guard !session.isEnded, force || session.state != .closing else { return }
        flushBroadcasts(reaching: session)
        // A WINDOW whose JOIN the engine refused (wherever it did) waits for its room no more.
        if !session.pendingWindows.isEmpty, case .reject(let requestID, _, _, _, _) = message { session.pendingWindows[requestID] = nil }
        encodeBuffer.removeAll(keepingCapacity: true)
        let size = FrameEncoder().encode(message, into: &encodeBuffer)
        if !force && session.output.wouldExceedCap(adding: size) {
            cutOff(session)
            return
        }
        encodeBuffer.withUnsafeBytes { session.output.append($0) }
        stats.framesOut += 1
        traffic.queued(type: encodeBuffer[4], bytes: size)
        markDirty(session)
        // Not for the ERROR that ends a session: budget enforcement itself queues those.
        if !force && outputBytes > configuration.maxOutputTotalBytes { enforceOutputBudget() }
    }

    /// Queues a shared frame (a DIFF) for `session`, by reference.
    /// - Complexity: O(1); the fan-out's per-member cost, so it touches only `Session`'s final
    ///   stored properties (no dynamic dispatch) and retains the chunk at most once
    ///   (`OutputQueue.enqueue`).
    package func send(shared chunk: OutputChunk, to session: Session, type: MessageType = .diff) {
        flushBroadcasts(reaching: session)
        queue(shared: chunk, to: session, type: type)
    }

    /// `send(shared:to:type:)` without flushing the session's rooms first: the broadcast's own.
    func queue(shared chunk: OutputChunk, to session: Session, type: MessageType = .diff) {
        guard session.state != .closing else { return }
        if session.output.wouldExceedCap(adding: chunk.count) {
            cutOff(session)
            return
        }
        session.output.enqueue(chunk)
        stats.framesOut += 1
        traffic.queued(type: type.rawValue, bytes: chunk.count)
        markDirty(session)
        if outputBytes > configuration.maxOutputTotalBytes { enforceOutputBudget() }
    }

    /// A subscriber that stopped reading: drop what it has not started receiving (keeping the
    /// rest of a partly sent frame, so the stream stays framed), queue ERROR slow_consumer and
    /// close. Its memory is now bounded by one frame, and no one else waits for it.
    func cutOff(_ session: Session) {
        stats.slowConsumerDisconnects += 1
        let queued = session.output.pendingBytes
        let dropped = session.output.dropAllButPartialHead()
        logLimited(
            .warning, cause: "slow consumer", "slow consumer, closing",
            metadata: session.logMetadata([
                "queued_bytes": "\(queued)", "dropped_bytes": "\(dropped)", "cap": "\(configuration.maxOutputBytes)",
            ]))
        close(
            session, error: .slowConsumer,
            "unread output passed the limit of \(ConfigurationValue.describe(byteCount: configuration.maxOutputBytes))")
    }

    /// The end of a loop pass, called by the IO layer once per pass that queued output: commits
    /// the pass's writes (`RoomEngine.commit`: the store's group commit), hands each dirty
    /// session to its transport (`SessionTransport.sendQueuedOutput`), or all of them at once to
    /// `sendPass` when the IO layer set one (the daemon's `OutputFlush`), then gives the rooms'
    /// pending DIFFs to their members, sent at once through `sendBroadcast` where it can, and
    /// hands out the sessions this left with output queued. So nothing a pass produced (a DIFF,
    /// an ACK, a LEFT after a tombstone) reaches a client before the pass is durable, and a
    /// writer's ACK does not wait for a big room's broadcast. A failed commit stops the daemon
    /// (`fail`) and sends nothing.
    ///
    /// Sending the queues before the broadcasts keeps every member's order: whatever a member
    /// has queued came before the room's pending DIFFs (`flushBroadcasts(reaching:)` flushes them
    /// before anything else is queued for it).
    /// - Returns: whether output was committed and handed out: false when none was queued, or
    ///   when the commit failed.
    /// - Complexity: O(dirty sessions + members of the rooms written) plus the commit (one
    ///   group commit per pass).
    package func finishPass() -> Bool {
        guard !dirty.isEmpty || pendingBroadcastCount > 0 else {
            broadcastRooms.removeAll(keepingCapacity: true)
            return false
        }
        do {
            try engine.commit()
        } catch {
            fail(ServerError("the store failed to commit: \(error); stopping without acknowledging"))
            return false
        }
        sendDirtySessions()
        if !broadcastRooms.isEmpty {
            flushBroadcasts(sendingDirectly: true)
            sendDirtySessions()
        }
        writeAckTimer?.flushed()
        return true
    }

    /// Hands the dirty sessions to their transports (see `finishPass`).
    /// - Complexity: O(dirty sessions).
    private func sendDirtySessions() {
        guard !dirty.isEmpty else { return }
        swap(&dirty, &flushing)
        if let sendPass {
            Session.forEachUnretained(in: flushing) { $0.isDirty = false }
            sendPass(flushing)
        } else {
            Session.forEachUnretained(in: flushing) { session in
                session.isDirty = false
                session.transport?.sendQueuedOutput()
            }
        }
        flushing.removeAll(keepingCapacity: true)
    }

    /// Puts the session on this pass's dirty list (once). A session whose transport is blocked
    /// is left alone: its socket's send buffer is full, so a write would only say EAGAIN, and the
    /// IO layer marks it again when the socket is writable.
    package func markDirty(_ session: Session) {
        guard !session.isDirty, !session.isOutputBlocked, !session.isEnded else { return }
        session.isDirty = true
        dirty.append(session)
        // A pass with a broadcast asked for its flush with the broadcast's first DIFF.
        if dirty.count == 1 && broadcastRooms.isEmpty { outputPending() }
    }
}
