import SnapSyncLoop
import Logging
import SnapSyncCluster
import SnapSyncStore

/// What a follow received, comparable: `.base` by its checkpoint's sequence (nil: none).
enum SeenEvent: Equatable, CustomStringConvertible {
    case base(UInt64?)
    case record(UInt64, RoomLogEntry)
    case current
    case failed

    init(_ event: RoomLogEvent) {
        switch event {
        case .base(let checkpoint): self = .base(checkpoint?.sequence)
        case .record(let sequence, _, let entry): self = .record(sequence, entry)
        case .current: self = .current
        case .failed: self = .failed
        }
    }

    var description: String {
        switch self {
        case .base(let s): "base(\(s.map(String.init) ?? "nil"))"
        case .record(let s, .write(let w)): "record(\(s), v\(w.version) \(w.writeID))"
        case .record(let s, .tombstone(let e, let v)), .record(let s, .chainedTombstone(let e, let v, _)): "record(\(s), tombstone \(e)/\(v))"
        case .record(let s, .writes(let w)): "record(\(s), v\(w.firstVersion)...\(w.lastVersion))"
        case .current: "current"
        case .failed: "failed"
        }
    }
}

/// A follow's events as they came, with the checkpoint of its `.base` and its failure.
final class FollowRecorder {
    var events: [SeenEvent] = []
    var checkpoint: RoomLogCheckpoint?
    var failure: StoreError?

    var isCurrent: Bool { events.contains(.current) }
    var hasBase: Bool { events.first.map { if case .base = $0 { true } else { false } } ?? false }
    var records: [SeenEvent] { events.filter { if case .record = $0 { true } else { false } } }
    var sequences: [UInt64] { events.compactMap { if case .record(let s, _) = $0 { s } else { nil } } }

    func follow(_ log: JetStreamRoomLog, room: String) {
        log.follow(room: room) { [self] event in
            if case .base(let checkpoint) = event { self.checkpoint = checkpoint }
            if case .failed(let error) = event { failure = error }
            events.append(SeenEvent(event))
        }
    }
}

/// Runs `loop` until `condition` holds; the bound only protects against a hang
/// (the room log's one-second tick wakes the loop at least that often).
/// Runs the loop until `condition` holds. `bound` only stops a hang: what the tests wait for
/// comes in seconds on an idle machine, and a loaded one must not turn a wait into a failure.
func runLoop(_ loop: EventLoop, until condition: () -> Bool, bound: Duration = .seconds(120), _ what: String) throws {
    let deadline = ContinuousClock.now + bound
    while !condition() {
        guard ContinuousClock.now < deadline else { throw TestClusterError(message: "no \(what) within \(bound)") }
        try loop.runOnce()
    }
}

/// One proposal, waited for.
func propose(
    _ log: JetStreamRoomLog, _ loop: EventLoop, room: String, after sequence: UInt64, _ record: WriteRecord
) throws -> ProposalOutcome {
    var outcome: ProposalOutcome?
    log.propose(room: room, expectedSequence: sequence, messageID: record.writeID, entry: .write(record)) { outcome = $0 }
    try runLoop(loop, until: { outcome != nil }, "answer to the proposal of \(record.writeID)")
    return outcome!
}

/// One `lastSequence`, waited for; whether its completion ran inside the call is an issue.
func lastSequence(_ log: JetStreamRoomLog, _ loop: EventLoop, room: String) throws -> Result<UInt64, StoreError> {
    var result: Result<UInt64, StoreError>?
    log.lastSequence(room: room) { result = $0 }
    if result != nil { throw TestClusterError(message: "lastSequence of \(room) completed inside the call") }
    try runLoop(loop, until: { result != nil }, "the last sequence of \(room)")
    return result!
}

func write(_ room: String, version: UInt64, id: String, epoch: UInt64 = 7) -> WriteRecord {
    WriteRecord(room: room, epoch: epoch, version: version, writeID: Array(id.utf8), diffFrame: Array("diff \(id) v\(version)".utf8))
}

let testLogger = Logger(label: "snapsync.cluster.test")
