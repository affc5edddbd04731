import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire

// Helpers for the daemon's black-box tests (Server*Tests.swift): the real snapsyncd
// (Support/DaemonProcess.swift) and raw frames (Support/RawClient.swift).

/// The server's black-box tests, one at a time, on a thread of their own: each starts its own
/// daemon, and these tests block their thread on sockets. Off the cooperative pool, so that the
/// async client tests are not kept waiting for a pool thread while one of these blocks. The
/// durability tests (`DaemonDurability`) are a second such group: the two run side by side, one
/// per core, since most of a daemon test's time is spent waiting for its daemon.
@Suite(.serialized, .ownThread("server tests")) struct ServerIntegration {}

/// The durability tests (kill -9, restarts, torn logs, full disks), one at a time on a thread
/// of their own, beside `ServerIntegration`.
@Suite(.serialized, .ownThread("durability")) struct DaemonDurability {}

extension SnapshotElement {
    /// `.named("a", "payload")`.
    static func named(_ id: String, _ payload: String = "") -> SnapshotElement { SnapshotElement(SnapshotIdentifier(id), payload: SnapshotPayload(payload)) }
}

/// The answer of a fresh JOIN: what the room holds now.
struct RoomState {
    var epoch: UInt64
    var version: UInt64
    var digest: SnapshotDigest
    var snapshot: RoomSnapshot
}

extension RawClient {
    /// JOINs `room` (fresh, or resuming) and returns the answer. On a version 3 connection a
    /// resume carries `chain`, by default the zero one (not known, so not compared).
    func join(_ room: String, resume: RoomPosition? = nil, chain: RoomChain? = nil) throws -> Message {
        let chain = resume != nil && ProtocolVersion.hasChain(version: decoder.version) ? chain ?? .unknown : nil
        return try request { .join(requestID: $0, room: room, resume: resume, chain: chain) }.answer
    }

    /// A fresh JOIN's SNAPSHOT, checked: reason initial, digest matching the snapshot.
    func state(of room: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> RoomState {
        let answer = try join(room)
        guard case .snapshot(_, let name, let epoch, let version, let reason, let digest, let snapshot, _) = answer else {
            throw RawClientError.unexpected("expected SNAPSHOT", answer)
        }
        #expect(name == room && reason == .initial, sourceLocation: sourceLocation)
        #expect(digest == snapshot.digest, "SNAPSHOT digest must match its snapshot", sourceLocation: sourceLocation)
        return RoomState(epoch: epoch, version: version, digest: digest, snapshot: snapshot)
    }

    /// Sends a MUTATE and returns its answer (ACK or REJECT) and the frames before it.
    func mutate(
        _ room: String, _ ops: [SnapshotOperation], expectedVersion: UInt64? = nil,
        writeID: [UInt8] = []
    ) throws -> (answer: Message, skipped: [Message]) {
        try request { .mutate(requestID: $0, room: room, expectedVersion: expectedVersion, writeID: writeID, ops: ops) }
    }

    /// A MUTATE that must be ACKed; returns the new version.
    @discardableResult
    func mustMutate(
        _ room: String, _ ops: [SnapshotOperation], writeID: [UInt8] = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> UInt64 {
        let (answer, _) = try mutate(room, ops, writeID: writeID)
        guard case .ack(_, _, let version) = answer else {
            throw RawClientError.unexpected("expected ACK", answer)
        }
        return version
    }

    /// STATS, as a dictionary.
    func stats() throws -> [String: UInt64] {
        let (answer, _) = try request { .stats(requestID: $0) }
        guard case .statsReply(_, let stats) = answer else { throw RawClientError.unexpected("expected STATS_REPLY", answer) }
        return Dictionary(stats.map { ($0.name, $0.value) }, uniquingKeysWith: { _, last in last })
    }

    /// The ERROR code of the last frame before the daemon closed the connection.
    func closingError(timeout: Double? = nil) throws -> (code: ErrorCode?, message: String, before: [Message]) {
        let messages = try receiveUntilClosed(timeout: timeout)
        guard let last = messages.last, case .error(let code, let text) = last else {
            throw RawClientError.failed("the daemon closed without an ERROR; got \(messages.count) frames, the last \(messages.last.map(summary) ?? "none")")
        }
        return (ErrorCode(rawValue: code), text, Array(messages.dropLast()))
    }
}

/// A message in a few words, for failure messages (frames can carry megabytes).
func summary(_ message: Message) -> String {
    switch message {
    case .diff(let room, _, let version, let ops, _): "DIFF \(room) v\(version) (\(ops.count) ops)"
    case .snapshot(let id, let room, _, let version, let reason, _, let snapshot, _):
        "SNAPSHOT #\(id) \(room) v\(version) \(reason) (\(snapshot.numberOfItems) items)"
    case .error(let code, let text): "ERROR \(code) \(text)"
    default: "\(message)".count > 200 ? String("\(message)".prefix(200)) + "…" : "\(message)"
    }
}

/// Polls `condition` every 10 ms for up to `timeout` seconds.
func waitUntil(timeout: Double = 60, _ condition: () throws -> Bool) rethrows -> Bool {
    var waited = 0.0
    while waited < timeout {
        if try condition() { return true }
        usleep(10_000)
        waited += 0.01
    }
    return try condition()
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
