// Date only: FoundationEssentials, not all of Foundation, where it exists.
#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif
package import Logging
package import SnapSyncModel
package import SnapSyncWire
package import SnapSyncStore

/// The daemon's rooms and everything clients ask of them, without sockets: sessions,
/// membership (`Membership.swift`), the handshake's rules and every request
/// (`Hub+Requests.swift`), the write path (`Hub+Writes.swift`), output queuing with its caps
/// (`Hub+Output.swift`, `Hub+OutputBudget.swift`), SNAPSHOT replies and the store side
/// (`Hub+Store.swift`). It makes no syscall: the IO layer (`Connection`, `OutputFlush`) hands it
/// whole frames and writes out what it queued, and its tests drive it with plain `Session`s.
///
/// Output: a handler only queues output on a session and puts the session on `dirty`; the IO
/// layer's flush, once per loop pass, commits the store and then sends each dirty session
/// everything it has pending in one gathering write (`Server`'s doc). `outputPending` is called
/// when the first session of a pass becomes dirty, so that the flush is scheduled once per pass.
///
/// Cluster mode (`log` set, #20): every room is a replica of its subject in the cluster's log,
/// resident while followed; writes are proposed to the log and rooms change only by the records
/// it delivers (Hub+Cluster.swift, Hub+ClusterWrites.swift, Hub+ClusterRecords.swift). Without
/// a log none of that runs and the write path is the single node's.
///
/// Threads: everything runs on the loop's thread, and nothing is locked.
package final class Hub {
    package let configuration: ServerConfiguration
    package let logger: Logger
    let store: any RoomStore
    /// Cluster mode (#20): the replicated log every room's writes go through (Hub+Cluster.swift);
    /// nil on a single node, where nothing of it runs.
    let log: (any RoomLog)?
    /// Cluster mode: the rooms this node follows in `log`, loaded or loading; a room is in
    /// `rooms` too once it has loaded.
    package var replicas: [RoomName: RoomReplica] = [:]
    /// Cluster mode: the token of the next proposal (`RoomReplica.InFlight.token`).
    var nextProposalToken: UInt64 = 1
    /// Cluster mode: sessions whose request the log answered, whose deferred frames are handled
    /// next (Hub+ClusterInput.swift), and whether that is under way.
    var sessionsToResume: [Session] = []
    var isResumingSessions = false

    /// Open sessions by id.
    package private(set) var sessions: [UInt64: Session] = [:]
    private var nextSessionID: UInt64 = 1
    /// Rooms by name, compared byte for byte (`RoomName`); a room lives as long as the hub
    /// (PROTOCOL.md §7).
    package var rooms: [RoomName: Room] = [:]
    /// Items of all rooms together (STATS `items`).
    package var totalItems = 0
    /// Rooms kept on disk only, not in `rooms` (sleeping rooms, #17); 0 without them.
    package var sleepingRoomCount = 0
    /// What the expiry sweep needs to know (Hub+Lifecycle.swift).
    var lifecycle = RoomLifecycle()
    /// When the sleeping rooms that have a TTL expire (Hub+Lifecycle.swift).
    var sleepingExpiries = SleepingExpiries()
    /// Resident rooms without members, longest idle first: the ones that may sleep (Hub+Sleep.swift).
    var idleRooms = IdleRooms()
    /// The store rooms sleep in: the durable store when `--room-idle` is on; nil otherwise
    /// (the memory store, or idle eviction off), and then no room is ever evicted.
    let sleepStore: (any SleepingRoomStore)?
    /// All rooms' bytes (`--max-room-total-bytes`).
    let roomBudget: RoomMemoryBudget
    /// Output memory of all sessions' queues, a shared chunk once (`--max-output-total-bytes`,
    /// Hub+OutputBudget.swift).
    package let outputMeter = OutputMeter()
    package var outputBytes: Int { outputMeter.bytes }
    /// The daemon's counters; the IO layer adds its own (bytes in and out, accepts).
    /// Counted once per frame sent; unchecked for the reason given on `Session.output`.
    @exclusivity(unchecked) package var stats = ServerStats()
    /// Frames and bytes by message type and write rejections by code, beside `stats` (whose
    /// totals they split): a `let` of the hub, so counting a frame retains nothing.
    package let traffic = TrafficCounters()
    package let startTime = ContinuousClock.now
    /// Token deadlines of authenticated sessions (`Hub+Auth.swift`, `TokenDeadlines`).
    var tokenDeadlines = TokenDeadlines()
    /// The wall clock tokens are checked against (`exp`, `nbf` and `iat` are wall-clock
    /// times); tests set their own.
    package var wallClock: () -> Date = { Date() }
    /// The monotonic clock the hub stamps its instants with: when a room became idle (its TTL,
    /// its sleep, its unfollowing), when a replica began to wait for the log, when a read
    /// barrier began, when a failed follow is tried again. The one-second timer passes the same
    /// clock's `now` to `expireRooms`, `sleepIdleRooms` and `maintainReplicas`; tests set a
    /// manual one and pass instants of it, so that no real time can pass between a stamp and
    /// the instant it is compared with.
    package var monotonicNow: () -> ContinuousClock.Instant = { .now }
    /// How long one eviction batch may keep writing checkpoint files (`SleepBatch.maxDuration`),
    /// spent on the store's `batchClock`; nil: no bound, for tests that expect every due room
    /// to sleep in one sweep whatever the disk's speed.
    var sleepBatchDuration: Duration? = SleepBatch.maxDuration

    /// Sessions with output queued in this pass, for the flush. Appended to once per session
    /// per pass (`markDirty`); unchecked for the reason given on `Session.output`.
    @exclusivity(unchecked) var dirty: [Session] = []
    /// The dirty list being handed out by `finishPass`, swapped with `dirty` (both keep their
    /// capacity); unchecked as `dirty`.
    @exclusivity(unchecked) var flushing: [Session] = []
    /// Called when `dirty` goes from empty to non-empty: the IO layer schedules its flush.
    package var outputPending: () -> Void = {}
    /// Called when the store failed: nothing of this pass may reach a client (`fail`).
    package var storeFailed: (ServerError) -> Void = { _ in }
    /// Times each acknowledged write to the flush that sends its ACK; nil (and free) unless
    /// the metrics endpoint is on.
    /// Unchecked for the reason given on `Session.output` (read once per write).
    @exclusivity(unchecked) package var writeAckTimer: WriteAckTimer?

    // Scratch buffers, reused for every encoding: the request path allocates nothing once they
    // have grown.
    var encodeBuffer: [UInt8] = []
    var diffBuffer: [UInt8] = []
    /// The latest encoding of each room's snapshot, shared by the SNAPSHOT replies that use it.
    var snapshotEncodings = SnapshotEncodings()

    package init(configuration: ServerConfiguration, logger: Logger, store: any RoomStore, log: (any RoomLog)? = nil) {
        self.configuration = configuration
        self.logger = logger
        self.store = store
        self.log = log
        self.sleepStore = configuration.roomIdle == nil ? nil : store as? any SleepingRoomStore
        self.roomBudget = RoomMemoryBudget(limit: configuration.maxRoomTotalBytes)
    }

    // MARK: Sessions

    /// The id for the next session (`WELCOME`'s session id).
    package func makeSessionID() -> UInt64 {
        defer { nextSessionID += 1 }
        return nextSessionID
    }

    /// A new session without a transport (for tests and in-process use), opened.
    func openSession() -> Session {
        let session = Session(id: makeSessionID(), outputCap: configuration.maxOutputBytes, meter: outputMeter)
        open(session)
        return session
    }

    /// Starts serving `session`: it may now send HELLO.
    package func open(_ session: Session) {
        sessions[session.id] = session
    }

    /// Starts closing a session: it leaves its rooms at once (no more DIFFs), `message` (if
    /// any) is queued after its pending output as an ERROR, and the IO layer delivers what is
    /// queued and then ends it (`SessionTransport.sessionStartedClosing`).
    package func close(_ session: Session, error code: ErrorCode?, _ message: String) {
        guard session.state != .closing else { return }
        leaveAllRooms(session)
        if let code {
            send(.error(code, message), to: session, force: true)
        }
        session.state = .closing
        session.transport?.sessionStartedClosing()
        markDirty(session)
    }

    /// Ends a session now: it leaves its rooms, its queue is dropped and it is forgotten; then
    /// its transport is closed (`SessionTransport.sessionEnded`) and let go.
    package func end(_ session: Session, reason: String) {
        guard !session.isEnded else { return }
        leaveAllRooms(session)
        session.isEnded = true
        session.state = .closing
        session.output.removeAll()
        sessions[session.id] = nil
        let transport = session.transport
        transport?.sessionEnded(reason: reason)
        session.transport = nil
    }

    /// The store failed: report it to the daemon, which stops at once.
    func fail(_ error: ServerError) {
        storeFailed(error)
    }

    // MARK: Frames

    /// Decodes one whole frame (length prefix included, cut by the IO layer), in place, and
    /// handles it.
    package func receive(frame: UnsafeRawBufferPointer, from session: Session) {
        if session.isAwaitingLog {
            deferInput(frame, from: session)
            return
        }
        stats.framesIn += 1
        traffic.received(type: frame.count > 4 ? frame[4] : 0, bytes: frame.count)
        let message: Message
        do {
            message = try FrameDecoder.decode(frame: frame, limits: configuration.wire, accepting: .client, version: session.protocolVersion)
        } catch {
            if let requestID = error.requestID, error.code.kind == .reject {
                // A whole, well-formed REPLACE (or REPLACE_SECTION) whose content breaks a rule: the request
                // fails, the session goes on. It decoded, so before HELLO the state answers
                // (PROTOCOL.md §8.1).
                guard session.state == .ready else {
                    protocolError(
                        WireError(.handshakeRequired, "REPLACE before HELLO: the first frame must be HELLO"),
                        on: session, bytes: frame)
                    return
                }
                countRejectedWrite(error.code)
                send(Rejection(error.code, error.detail, identifier: error.identifier).message(requestID: requestID), to: session)
                return
            }
            protocolError(error, on: session, bytes: frame)
            return
        }
        handle(message, from: session)
    }

    /// A frame the protocol does not allow: log it safely, answer ERROR, close.
    package func protocolError(_ error: WireError, on session: Session, bytes: UnsafeRawBufferPointer) {
        stats.protocolErrors += 1
        logger.warning(
            "protocol error, closing",
            metadata: session.logMetadata([
                "code": "\(error.code.name)", "detail": "\(error.detail)", "bytes": "\(LogEscaping.sample(bytes))",
            ]))
        close(session, error: error.code, error.detail)
    }
}
