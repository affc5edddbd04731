import Logging
import SnapSyncWire

// Answers to one connection's requests come in the order the requests were sent (PROTOCOL.md
// §10), even when the engine answers one later: the replicated engine's writes (and JOINs of a
// room that is loading) wait for the cluster's log; the local engine answers every request at
// once and never defers. While one request of a session waits, the session's later frames are
// kept, whole, and handled once it is answered: a session has at most one request waiting. A
// room's queue orders the writes of all its sessions; this orders each session's.

extension Hub {
    /// The most a session may send while one of its requests waits for the log: beyond it, the
    /// session ends with ERROR `input_budget_exceeded`.
    var maxDeferredInputBytes: Int { max(configuration.wire.maxFrameBytes, 1024 * 1024) }

    /// `session`'s current request waits for the log: its next frames are deferred.
    func awaitLog(_ session: Session) {
        session.isAwaitingLog = true
    }

    /// `session`'s waiting request was answered: its deferred frames are handled at the end of
    /// the log's callback (`resumeSessions`), not inside it, so that no room is re-entered.
    func logAnswered(_ session: Session) {
        guard session.isAwaitingLog else { return }
        session.isAwaitingLog = false
        sessionsToResume.append(session)
    }

    /// Keeps a whole frame of a session that waits. O(frame) for the copy.
    func deferInput(_ frame: UnsafeRawBufferPointer, from session: Session) {
        guard session.deferredBytes + frame.count <= maxDeferredInputBytes else {
            close(
                session, error: .inputBudgetExceeded,
                "more than \(maxDeferredInputBytes) bytes of requests sent while a request waits for the cluster's log")
            return
        }
        session.deferredBytes += frame.count
        session.deferredInput.append(Array(frame))
    }

    /// Handles the deferred frames of the sessions answered, in order, until each waits again
    /// or has none left. Called at the end of every callback of the log.
    func resumeSessions() {
        guard !isResumingSessions else { return }
        isResumingSessions = true
        defer { isResumingSessions = false }
        var index = 0
        while index < sessionsToResume.count {
            let session = sessionsToResume[index]
            index += 1
            while !session.isAwaitingLog, !session.isEnded, session.state != .closing, session.deferredHead < session.deferredInput.count {
                let frame = session.deferredInput[session.deferredHead]
                session.deferredInput[session.deferredHead] = []
                session.deferredHead += 1
                session.deferredBytes -= frame.count
                frame.withUnsafeBytes { receive(frame: $0, from: session) }
            }
            if session.deferredHead == session.deferredInput.count || session.isEnded || session.state == .closing {
                session.deferredInput = []
                session.deferredHead = 0
                session.deferredBytes = 0
                if !session.isAwaitingLog && !session.isEnded { session.transport?.sessionDrainedDeferredInput() }
            }
        }
        sessionsToResume.removeAll(keepingCapacity: true)
    }
}
