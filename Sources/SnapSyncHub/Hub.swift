// Date only: FoundationEssentials, not all of Foundation, where it exists.
#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif
package import Logging
import SnapSyncModel
package import SnapSyncWire
package import SnapSyncStore
import DequeModule

/// The daemon's rooms and everything clients ask of them, without sockets: sessions,
/// membership (`Membership.swift`), the handshake's rules and every request's prologue and
/// dispatch (`Hub+Requests.swift`), output queuing with its caps (`Hub+Output.swift`,
/// `Hub+OutputBudget.swift`), SNAPSHOT replies, and the resident rooms (`Hub+Rooms.swift`). It
/// makes no syscall: the IO layer (`Connection`, `OutputFlush`) hands it whole frames, calls
/// `finishPass` once per loop pass and writes out what it queued; its tests drive it with plain
/// `Session`s.
///
/// How rooms are found, changed and made durable is its `engine`'s, chosen once, when the hub
/// is made: the single node's (`LocalRoomEngine`: the store, sleep, expiry) or the cluster's
/// (`ReplicatedRoomEngine`: replicas of a log). Nothing else in the hub depends on which.
///
/// Output: a handler only queues output on a session and puts the session on `dirty`; at the
/// end of the pass `finishPass` commits the engine and hands each dirty session to its
/// transport, which sends everything it has pending in one gathering write (`Server`'s doc).
/// `outputPending` is called when the first session of a pass becomes dirty, so that the end
/// of the pass is scheduled once.
///
/// Threads: everything runs on the loop's thread, and nothing is locked.
package final class Hub {
    package let configuration: ServerConfiguration
    package let logger: Logger
    /// The lines clients can cause again and again, per cause (`logLimited`).
    package internal(set) var logRateLimit = LogRateLimit()
    /// How rooms are held and changed (see the type's doc). Set once, by `init`.
    private(set) var engine: (any RoomEngine)!
    /// Sessions whose waiting request the engine answered, whose deferred frames are handled
    /// next (Hub+DeferredInput.swift), and whether that is under way.
    var sessionsToResume: [Session] = []
    /// Without an `offLoopWorker`: when a fold of a room over `foldFreeBytes` was last computed
    /// on the loop, in any room; such folds cost the loop O(size of the room) each, so at most
    /// one per `foldInterval` (Hub+FoldedCatchup.swift).
    var lastLargeFold: ContinuousClock.Instant?
    /// Where folds of large rooms run (`OffLoopWorker`); nil: on the loop, bounded.
    package var offLoopWorker: (any OffLoopWorker)?
    /// The folds running off the loop, and the JOINs each will answer (Hub+FoldedCatchup.swift).
    var foldsInFlight: [FoldKey: [FoldWaiter]] = [:]
    var isResumingSessions = false

    /// Open sessions by id.
    package private(set) var sessions: [UInt64: Session] = [:]
    private var nextSessionID: UInt64 = 1
    /// Rooms by name, compared byte for byte (`RoomName`); a room lives as long as the hub
    /// (PROTOCOL.md §7).
    var rooms: [RoomName: Room] = [:]
    /// Items of all rooms together (STATS `items`).
    var totalItems = 0
    /// Rooms kept on disk only, not in `rooms` (sleeping rooms, LocalRoomEngine+Sleep.swift); 0
    /// without them.
    package var sleepingRoomCount = 0
    /// The data directory's size and free space, last measured (Local/LocalRoomEngine+DataUsage.swift);
    /// nil before the first measurement and without a data directory.
    package var dataUsage: DataDirectoryUsage?
    /// Rooms whose presence changed since their last PRESENCE_DIFF, waiting for
    /// `flushPresence`; whether its timer is armed; how the IO layer arms it.
    var presenceQueue: [Room] = []
    /// PRESENCE_DIFFs made and not yet handed to all their watchers, oldest first, at most
    /// `presenceDeliveriesPerPass` deliveries per timer turn (Hub+Presence.swift).
    var presenceDeliveries = Deque<PresenceDelivery>()
    var isPresenceTimerArmed = false
    package var presenceTimerNeeded: (Duration) -> Void = { _ in }
    /// Rooms with windowed members owed counts (Hub+Windows.swift), flushed together by one
    /// timer `windowCountsInterval` after the first; how the IO layer arms it.
    var windowCountsQueue: [Room] = []
    package var windowCountsTimerNeeded: (Duration) -> Void = { _ in }
    /// Cluster mode: tells the other nodes of local presence changes (Hub+Presence.swift).
    package weak var presenceRelay: (any PresenceRelay)?
    /// Each principal's allowance of new rooms (Hub+RoomCreation.swift).
    var roomCreations = RoomCreationQuota()
    /// Resident rooms without members, longest idle first: the ones that may sleep
    /// (LocalRoomEngine+Sleep.swift).
    var idleRooms = IdleRooms()
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
    /// clock's `now` to `maintainRooms` (the engine's `tick`); tests set a
    /// manual one and pass instants of it, so that no real time can pass between a stamp and
    /// the instant it is compared with. Read on every write (`touch`): unchecked, as `stats`
    /// (it is set once, before the loop runs).
    @exclusivity(unchecked) package var monotonicNow: () -> ContinuousClock.Instant = { .now }

    /// Sessions with output queued in this pass, for the flush. Appended to once per session
    /// per pass (`markDirty`); unchecked for the reason given on `Session.output`.
    @exclusivity(unchecked) var dirty: [Session] = []
    /// The dirty list being handed out by `finishPass`, swapped with `dirty` (both keep their
    /// capacity); unchecked as `dirty`.
    @exclusivity(unchecked) var flushing: [Session] = []
    /// Rooms given a broadcast in this pass, in the order of their first DIFF
    /// (Hub+Broadcast.swift); a room flushed early may be listed again. Emptied by
    /// `finishPass`: while it holds one, the pass's flush has been asked for. Unchecked as
    /// `dirty`.
    @exclusivity(unchecked) var broadcastRooms: [Room] = []
    /// How many rooms have a pending broadcast: while 0, queuing a frame checks nothing more.
    @exclusivity(unchecked) var pendingBroadcastCount = 0
    /// Called when `dirty` goes from empty to non-empty: the IO layer schedules its flush.
    /// Read once per pass (`markDirty`); unchecked as `dirty`.
    @exclusivity(unchecked) package var outputPending: () -> Void = {}
    /// Sends a committed pass's dirty sessions, all at once (the daemon's `OutputFlush`: through
    /// each connection's unretained pointer, spread over its IO threads when it has some); nil:
    /// `finishPass` calls each session's transport in turn (in-process sessions, tests).
    package var sendPass: (([Session]) -> Void)?
    /// Sends a committed pass's run of one room's DIFFs (`spans`, in the room's arena) to each
    /// of `members`, whose queues are empty, handing back what a socket did not take
    /// (`queueUnsent`); nil: every member's copy is queued (Hub+DirectBroadcast.swift).
    package var sendBroadcast: BroadcastSender?
    /// The broadcast `sendBroadcast` is sending, for `queueUnsent`.
    var directBroadcast: BroadcastRuns?
    /// Spare member lists of direct broadcasts, kept with their capacity (`DirectMembers`).
    var directLists: [[Unmanaged<Session>]] = []
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

    /// A single node's hub: its rooms live here, made durable by `store` (`LocalRoomEngine`).
    package convenience init(configuration: ServerConfiguration, logger: Logger, store: any RoomStore) {
        self.init(configuration: configuration, logger: logger)
        engine = LocalRoomEngine(hub: self, store: store)
    }

    /// A cluster node's hub: its rooms are replicas of `log` (`ReplicatedRoomEngine`).
    package convenience init(configuration: ServerConfiguration, logger: Logger, log: any RoomLog) {
        self.init(configuration: configuration, logger: logger)
        engine = ReplicatedRoomEngine(hub: self, log: log)
    }

    private init(configuration: ServerConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        self.roomBudget = RoomMemoryBudget(limit: configuration.maxRoomTotalBytes)
    }

    /// The IO layer's counts on its hot paths (bytes read and sent, the pass's time), as
    /// calls: `stats` is a struct in a class, which another module would check for exclusive
    /// access and could copy whole on each `+=`.
    package func countBytesIn(_ count: Int) { stats.bytesIn += UInt64(count) }
    package func countBytesOut(_ count: Int) { stats.bytesOut += UInt64(count) }
    package func recordPassTime(_ duration: Duration) { stats.passTimes.record(duration) }

    /// Resident rooms and the items of all of them, for the metrics endpoint. The stored
    /// properties stay internal: a property other modules can see is checked for exclusive
    /// access at run time on every access, and these are touched on every write.
    package var residentRoomCount: Int { rooms.count }
    package var itemCount: Int { totalItems }
    /// Each resident room's members, for the metrics' histogram. O(rooms).
    package var roomMemberCounts: [Int] { rooms.values.map(\.members.count) }
    /// Rooms the store holds, awake or asleep (`--max-stored-rooms`).
    package var storedRoomCount: Int { engine.storedRoomCount }

    /// The engine, when it is the single node's: for start-up (`restore`) and shutdown
    /// (`roomImages`), which only a store has.
    package var localEngine: LocalRoomEngine? { engine as? LocalRoomEngine }
    /// The engine, when it is the cluster's: for the metrics of its follows.
    package var replicatedEngine: ReplicatedRoomEngine? { engine as? ReplicatedRoomEngine }

    // MARK: Sessions

    /// Cluster mode: session ids (so presence member ids, PROTOCOL.md §9) are unique across
    /// nodes: `tag` (the node's random presence tag, nonzero, below 2³¹, drawn at each start)
    /// is their high 32 bits, the count from 1 their low ones (Protocol/CLUSTER.md, "Presence").
    /// Before the first session.
    package func useSessionIDTag(_ tag: UInt32) {
        precondition(sessions.isEmpty && nextSessionID & 0xffff_ffff == 1, "the session id tag is set before the first session")
        nextSessionID = UInt64(tag) << 32 | 1
    }

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
        // The server's idle timeout and a slow reader are "timed out" to the room's presence.
        leaveAllRooms(session, reason: code == .timeout || code == .slowConsumer ? .timedOut : .disconnected)
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
        leaveAllRooms(session, reason: .disconnected)
        session.isEnded = true
        session.state = .closing
        session.output.removeAll()
        sessions[session.id] = nil
        let transport = session.transport
        transport?.sessionEnded(reason: reason)
        session.transport = nil
    }

    /// The one-second timer's work on rooms, as of `now` (an instant of `monotonicNow`): the
    /// engine's expiries, sleep and store maintenance, or its follows' maintenance.
    package func maintainRooms(now: ContinuousClock.Instant) {
        engine.tick(now: now)
        if configuration.roomCreationsPerMinute > 0 && roomCreations.principalsTracked > 0 {
            roomCreations.prune(perMinute: configuration.roomCreationsPerMinute, now: now)
        }
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
            // A write of the room the session's waiting writes are queued in joins them;
            // anything else waits for them (Hub+DeferredInput.swift).
            guard session.pipelinedRoom != nil,
                let message = try? FrameDecoder.decode(
                    frame: frame, limits: configuration.wire, accepting: .client, version: session.protocolVersion),
                pipelines(message, from: session)
            else {
                deferInput(frame, from: session)
                return
            }
            stats.framesIn += 1
            traffic.received(type: frame.count > 4 ? frame[4] : 0, bytes: frame.count)
            handle(message, from: session)
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
        logLimited(
            .warning, cause: "protocol error (\(error.code.name))", "protocol error, closing",
            metadata: session.logMetadata([
                "code": "\(error.code.name)", "detail": "\(error.detail)", "bytes": "\(LogEscaping.sample(bytes))",
            ]))
        close(session, error: error.code, error.detail)
    }
}
