import Logging
import SnapSyncWire

// Answers to one connection's requests come in the order the requests were sent (PROTOCOL.md
// §10), even when the engine answers one later: the replicated engine's writes (and JOINs of a
// room that is loading) wait for the cluster's log; the local engine answers every request at
// once and never defers. While a request of a session waits, the session's later frames are
// kept, whole, and handled once it is answered. One exception keeps a writing client from
// paying a round trip to the log per write: writes of the room its waiting writes are queued in
// go straight into that room's queue (up to `maxPipelinedWrites`), which answers them in order
// after the ones before them (`pipelines`). A room's queue orders the writes of all its
// sessions; this orders each session's.

extension Hub {
    /// The most a session may send while one of its requests waits for the log: beyond it, the
    /// session ends with ERROR `input_budget_exceeded`.
    var maxDeferredInputBytes: Int { max(configuration.wire.maxFrameBytes, 1024 * 1024) }

    /// The most writes of one session that may wait in a room's queue at once; its frames
    /// after them wait as deferred input.
    static let maxPipelinedWrites = 64

    /// `session`'s current request waits for the log: its next frames are deferred (but see
    /// `pipelines`). `room`: the room whose queue holds it, when it is a write.
    func awaitLog(_ session: Session, writeOf room: String? = nil) {
        session.pipelinedRoom = session.logWaits == 0 || session.pipelinedRoom == room ? room : nil
        session.logWaits += 1
    }

    /// A request of `session` that waited was answered: once none waits, its deferred frames
    /// are handled at the end of the log's callback (`resumeSessions`), not inside it, so that
    /// no room is re-entered.
    func logAnswered(_ session: Session) {
        guard session.logWaits > 0 else { return }
        session.logWaits -= 1
        guard session.logWaits == 0 else { return }
        session.pipelinedRoom = nil
        sessionsToResume.append(session)
    }

    /// Whether the frame `session` sent while its requests wait joins them at once: it is a
    /// write (MUTATE, REPLACE, REPLACE_SECTION) of the room whose queue holds them all, nothing
    /// of the session is deferred before it, and the engine will queue it behind them without
    /// answering it first. Then its answer comes after theirs, as if it had waited. The room is
    /// read from the decoded frame, which the caller then handles.
    func pipelines(_ message: Message, from session: Session) -> Bool {
        guard let room = session.pipelinedRoom, session.deferredHead == session.deferredInput.count,
            session.logWaits < Self.maxPipelinedWrites
        else { return false }
        switch message {
        case .mutate(_, let name, _, _, _), .replace(_, let name, _, _, _), .replaceSection(_, let name, _, _, _, _):
            return name == room && engine.queuesWrite(toRoom: name)
        default:
            return false
        }
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

    /// The most deferred frames of one session handled in one callback of the log: as a
    /// connection's input is, a turn at a time (the server's `InputSlice`), so that up to
    /// `maxDeferredInputBytes` of small requests do not hold the loop.
    static let maxDeferredFramesPerTurn = 1024

    /// Handles the deferred frames of the sessions answered, in order, until each waits again,
    /// has none left, or had a turn's worth handled: then the rest goes back to its transport
    /// (`sessionReturnsInput`), which handles it before anything it reads later, a turn per
    /// pass. Called at the end of every callback of the log.
    func resumeSessions() {
        guard !isResumingSessions else { return }
        isResumingSessions = true
        defer { isResumingSessions = false }
        var index = 0
        while index < sessionsToResume.count {
            let session = sessionsToResume[index]
            index += 1
            var handled = 0
            while !session.isAwaitingLog, !session.isEnded, session.state != .closing, session.deferredHead < session.deferredInput.count {
                if handled == Self.maxDeferredFramesPerTurn, let transport = session.transport {
                    transport.sessionReturnsInput(Array(session.deferredInput[session.deferredHead...].joined()))
                    session.deferredInput = []
                    session.deferredHead = 0
                    session.deferredBytes = 0
                    break
                }
                let frame = session.deferredInput[session.deferredHead]
                session.deferredInput[session.deferredHead] = []
                session.deferredHead += 1
                session.deferredBytes -= frame.count
                frame.withUnsafeBytes { receive(frame: $0, from: session) }
                handled += 1
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
