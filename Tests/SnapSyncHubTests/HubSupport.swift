import Logging
import Testing
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub
import SnapSyncStore
internal import Glibc

// The Hub in-process: sessions without sockets, frames encoded as a client would send them,
// and each session's queued output decoded back into messages.

/// A monotonic clock that moves only when a test moves it: the hub's `monotonicNow` in
/// `HubHarness`, so that no real time passes between an instant the hub stamps and the `now`
/// a test hands its timer functions.
final class ManualClock {
    var now = ContinuousClock.now

    func advance(by duration: Duration) { now += duration }
}

/// What the tests read and drive of the hub's engine, which a test knows from how it made the
/// hub: a store (`local`) or a log (`replicated`).
extension Hub {
    var local: LocalRoomEngine { localEngine! }
    var replicated: ReplicatedRoomEngine { replicatedEngine! }
    var store: any RoomStore { local.store }
    var sleepBatchDuration: Duration? {
        get { local.sleepBatchDuration }
        set { local.sleepBatchDuration = newValue }
    }
    func expireRooms(now: ContinuousClock.Instant) { local.expireRooms(now: now) }
    func sleepIdleRooms(now: ContinuousClock.Instant) { local.sleepIdleRooms(now: now) }
    func maintainStore() { local.maintainStore() }
    func restore(_ recovered: [RecoveredRoom]) throws(ServerError) { try local.restore(recovered) }
    func roomImages(_ names: [String]) -> some Sequence<RoomImage> { local.roomImages(names) }
    var log: any RoomLog { replicated.log }
    var replicas: [RoomName: ReplicatedRoom] { replicated.replicas }
    func maintainReplicas(now: ContinuousClock.Instant) { replicated.maintainReplicas(now: now) }
}

/// A hub with no sockets and memory storage (unless given one), and a client's view of it.
struct HubHarness {
    let hub: Hub
    /// The hub's monotonic clock: time passes only through `clock.advance(by:)`, and the timer
    /// functions are given instants of it (`later(_:)`).
    let clock = ManualClock()

    /// - Parameter log: cluster mode's log (ClusterSupport.swift); nil: a single node.
    /// - Parameter logger: where the hub logs; nowhere by default.
    init(
        store: any RoomStore = MemoryStore(), log: (any RoomLog)? = nil, logger: Logger? = nil,
        _ configure: (inout ServerConfiguration) -> Void = { _ in }
    ) {
        var configuration = ServerConfiguration()
        configure(&configuration)
        let logger = logger ?? Logger(label: "hub-tests", factory: { _ in SwiftLogNoOpLogHandler() })
        hub =
            if let log { Hub(configuration: configuration, logger: logger, log: log) } else {
                Hub(configuration: configuration, logger: logger, store: store)
            }
        hub.monotonicNow = { [clock] in clock.now }
    }

    /// The instant `duration` after the hub's clock reads now (which it does not change).
    func later(_ duration: Duration) -> ContinuousClock.Instant { clock.now + duration }

    /// A session that has done its handshake (offering `versions`), its WELCOME already read.
    func connect(versions: [UInt64] = [ProtocolVersion.current], sourceLocation: SourceLocation = #_sourceLocation) -> Session {
        let session = hub.openSession()
        send(.hello(versions: versions, clientName: "test", credentials: []), from: session)
        let welcome = drain(session)
        #expect(welcome.count == 1, sourceLocation: sourceLocation)
        if case .welcome(_, let id, _, _) = welcome.first {
            #expect(id == session.id, sourceLocation: sourceLocation)
        } else {
            Issue.record("no WELCOME: \(welcome)", sourceLocation: sourceLocation)
        }
        return session
    }

    /// Hands `message` to the hub as one whole frame from `session`.
    func send(_ message: Message, from session: Session) {
        let frame = FrameEncoder().encode(message)
        frame.withUnsafeBytes { hub.receive(frame: $0, from: session) }
    }

    /// Hands raw frame bytes to the hub.
    func send(frame: [UInt8], from session: Session) {
        frame.withUnsafeBytes { hub.receive(frame: $0, from: session) }
    }

    /// Joins `room` and reads the answer.
    @discardableResult
    /// On version 3 a resume carries a chain: `chain`, or by default the zero one (not known,
    /// so not compared).
    func join(_ session: Session, _ room: String, resume: RoomPosition? = nil, chain: RoomChain? = nil, requestID: UInt64 = 1) -> [Message] {
        let chain = resume != nil && ProtocolVersion.hasChain(version: session.protocolVersion) ? chain ?? .unknown : nil
        send(.join(requestID: requestID, room: room, resume: resume, chain: chain), from: session)
        return drain(session)
    }

    /// Sends a MUTATE (not read: the answers stay queued).
    func mutate(
        _ session: Session, _ room: String, _ ops: [SnapshotOperation], requestID: UInt64 = 7,
        expectedVersion: UInt64? = nil, writeID: [UInt8] = []
    ) {
        send(.mutate(requestID: requestID, room: room, expectedVersion: expectedVersion, writeID: writeID, ops: ops), from: session)
    }

    /// Everything queued for `session`, as a client would read it (and the queue emptied, as a
    /// flush would leave it).
    func drain(_ session: Session, sourceLocation: SourceLocation = #_sourceLocation) -> [Message] {
        // The rooms' DIFFs of this "pass" reach their members first, as at the end of a pass.
        hub.flushBroadcasts()
        return decode(takeQueuedBytes(session), as: session, sourceLocation: sourceLocation)
    }

    /// The bytes queued for `session`, taken out of its queue as a flush that sent them would.
    func takeQueuedBytes(_ session: Session) -> [UInt8] {
        let iovecs = UnsafeMutablePointer<OutputSpan>.allocate(capacity: OutputQueue.maxIovecs)
        defer { iovecs.deallocate() }
        var bytes: [UInt8] = []
        while !session.output.isEmpty {
            let count = session.output.gather(into: iovecs, capacity: OutputQueue.maxIovecs)
            var gathered = 0
            for index in 0..<count {
                bytes += iovecs[index].bytes
                gathered += iovecs[index].count
            }
            session.output.consume(gathered)
        }
        return bytes
    }

    /// `bytes`, whole frames, decoded as `session`'s version: a version 2 frame sent to a
    /// version 1 session fails here, and so does a stream that ends inside a frame.
    func decode(_ bytes: [UInt8], as session: Session, sourceLocation: SourceLocation = #_sourceLocation) -> [Message] {
        var decoder = FrameDecoder(limits: hub.configuration.wire, accepting: .server)
        decoder.version = session.protocolVersion
        decoder.append(bytes)
        var messages: [Message] = []
        do {
            while let message = try decoder.nextMessage() { messages.append(message) }
        } catch {
            Issue.record("undecodable output: \(error)", sourceLocation: sourceLocation)
        }
        #expect(decoder.bufferedByteCount == 0, "the stream ends inside a frame", sourceLocation: sourceLocation)
        return messages
    }

    /// The room satisfies every invariant: the model's, and its resume base's (`Room.checkInvariants`).
    func checkInvariants(_ room: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let room = hub.rooms[RoomName(room)] else {
            Issue.record("no room \(room)", sourceLocation: sourceLocation)
            return
        }
        #expect(throws: Never.self, sourceLocation: sourceLocation) { try room.checkInvariants() }
    }
}

func hubElement(_ id: String, _ payload: String = "") -> SnapshotElement {
    SnapshotElement(SnapshotIdentifier(id), payload: SnapshotPayload(payload))
}

/// A section `s` with item `id`.
func addItem(_ id: String, first: Bool = false) -> [SnapshotOperation] {
    (first ? [.appendSections([hubElement("s")])] : []) + [.appendItems([hubElement(id, "payload of \(id)")], toSection: "s")]
}

extension Message {
    /// The version of a DIFF, nil for anything else.
    var diffVersion: UInt64? {
        if case .diff(_, _, let version, _, _) = self { return version }
        return nil
    }

    /// The version an ACK acknowledges, nil for anything else.
    var ackVersion: UInt64? {
        if case .ack(_, _, let version) = self { return version }
        return nil
    }
}

/// An `OffLoopWorker` the test runs step by step: `perform` only queues; `finish()` runs every
/// queued work, then its completion, in order, as the daemon's worker would at a later pass.
final class ManualWorker: OffLoopWorker {
    private var queued: [() -> Void] = []
    /// Works queued and not finished.
    var count: Int { queued.count }

    func perform<Result: Sendable>(_ work: @escaping @Sendable () -> Result, then done: @escaping (Result) -> Void) {
        queued.append { done(work()) }
    }

    func finish() {
        let jobs = queued
        queued = []
        for job in jobs { job() }
    }
}

/// A test step that could not go on, with why.
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
