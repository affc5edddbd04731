#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Dispatch
import Foundation
import NIOConcurrencyHelpers
@testable import SnapSync
import SnapSyncClientTestSupport
import Testing
import SnapSyncWire

// A correct daemon never sends a bad digest, skips a version or sends a DIFF that does not apply,
// so the client's answers to those are tested against a scripted peer: a real loopback socket
// speaking real frames (the Wire codec), playing the server's side step by step on its own
// thread and checking every frame the client sends. Every wait has a deadline, a hang bound
// (`hangBound`) only: the peer never expects the client to be quick.

/// One accepted connection, driven synchronously by a script.
final class ScriptedPeer {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let listener: Int32
    let port: Int
    private var connection: Int32 = -1
    private var decoder = FrameDecoder(accepting: .client)

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM_VALUE), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        address.sin_port = 0
        #if canImport(Darwin)
            address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 4) == 0 else {
            close(fd)
            throw Failure(description: "bind/listen: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit {
        if connection >= 0 { close(connection) }
        close(listener)
    }

    private func wait(_ fd: Int32, timeout: Int32 = Int32(hangBound.components.seconds * 1000)) throws {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, timeout) > 0 else { throw Failure(description: "timed out waiting on the socket") }
    }

    func accept() throws {
        try wait(listener)
        if connection >= 0 { close(connection) }
        connection = peerAccept(listener)
        guard connection >= 0 else { throw Failure(description: "accept: errno \(errno)") }
        decoder = FrameDecoder(accepting: .client)
    }

    func receive() throws -> Message {
        while true {
            if let message = try decoder.nextMessage() { return message }
            try wait(connection)
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw Failure(description: "the client closed the connection") }
            decoder.append(buffer[..<n])
        }
    }

    /// Receives frames, answering PINGs, until one that is not a PING.
    func request() throws -> Message {
        while true {
            let message = try receive()
            guard case .ping(let nonce) = message else { return message }
            send(.pong(nonce: nonce))
        }
    }

    func send(_ message: Message) {
        let frame = FrameEncoder().encode(message)
        _ = frame.withUnsafeBytes { peerSend(connection, $0.baseAddress, $0.count) }
    }

    /// HELLO → WELCOME. Version 2 unless told: the scripts' SNAPSHOTs and DIFFs carry no chain,
    /// which version 3 has (a script that says version 3 sends them with one).
    func handshake(credentials expected: String = "", sessionID: UInt64 = 1, version: UInt64 = 2) throws {
        let credentials = try hello()
        guard credentials == expected else {
            throw Failure(description: "expected HELLO with credentials \"\(expected)\", got \"\(credentials)\"")
        }
        send(.welcome(version: version, sessionID: sessionID, serverName: "scripted", limits: []))
        // The client's frames from here on are in the chosen version's layouts (a version 3
        // JOIN's resume carries a chain).
        decoder.version = version
    }

    /// Receives a HELLO offering the current version; returns its credentials.
    func hello() throws -> String {
        let message = try request()
        guard case .hello(let versions, _, let credentials) = message, versions.contains(ProtocolVersion.current) else {
            throw Failure(description: "expected HELLO offering version \(ProtocolVersion.current), got \(message)")
        }
        return String(decoding: credentials, as: UTF8.self)
    }

    /// Whether a connection waits to be accepted, without waiting for one.
    var hasPendingConnection: Bool {
        var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0
    }

    /// A client of this peer whose timers cannot cut a script short on a loaded machine: the
    /// handshake and each call may take up to the hang bound, and the client sends no PING of
    /// its own (the peer answers PINGs only while it waits for a request).
    func configuration(
        reconnect: SnapSyncClient.ReconnectPolicy = .disabled, credentials: SnapSyncClient.CredentialsProvider? = nil
    ) -> SnapSyncClient.Configuration {
        SnapSyncClient.Configuration(
            host: "127.0.0.1", port: port, connectTimeout: hangBound, requestTimeout: hangBound,
            pingInterval: .seconds(3600), pingTimeout: .seconds(3600), reconnect: reconnect, credentials: credentials)
    }

    /// Expects a JOIN of `room` with `resume`; returns its request id.
    func expectJoin(_ room: String, resume: RoomPosition?) throws -> UInt64 {
        let message = try request()
        guard case .join(let requestID, room, let received, _) = message, received == resume else {
            throw Failure(description: "expected JOIN \(room) resume \(String(describing: resume)), got \(message)")
        }
        return requestID
    }
}

#if canImport(Glibc)
    private let SOCK_STREAM_VALUE = SOCK_STREAM.rawValue
    private func peerAccept(_ fd: Int32) -> Int32 { Glibc.accept(fd, nil, nil) }
    private func peerSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int { Glibc.send(fd, bytes, count, Int32(MSG_NOSIGNAL)) }
#else
    private let SOCK_STREAM_VALUE = SOCK_STREAM
    private func peerAccept(_ fd: Int32) -> Int32 { Darwin.accept(fd, nil, nil) }
    private func peerSend(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int { Darwin.send(fd, bytes, count, 0) }
#endif

/// Runs `script` on its own thread (it blocks in `poll`, which must not tie up a thread of
/// Swift's cooperative pool); the returned task ends with its outcome.
func play(_ peer: ScriptedPeer, _ script: @escaping @Sendable (ScriptedPeer) throws -> Void) -> Task<String?, Never> {
    let outcome = NIOLockedValueBox<String??>(nil)
    let box = UncheckedBox(peer)
    Thread.detachNewThread {
        do {
            try script(box.value)
            outcome.withLockedValue { $0 = .some(nil) }
        } catch {
            outcome.withLockedValue { $0 = .some("\(error)") }
        }
    }
    return Task {
        while true {
            if let result = outcome.withLockedValue({ $0 }) { return result }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}

@Suite("Client against a scripted peer")
struct ClientScriptedServerTests {
    @Test(
        "bad digest → fresh JOIN; version gap → resume (catch-up); DIFF that does not apply → fresh JOIN (resync); new epoch → resume (resync)",
        .timeLimit(.minutes(5)))
    func misbehavingServer() async throws {
        let peer = try ScriptedPeer()
        let room = "r"
        let s1 = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a"), SnapshotElement("b")])])
        let s3 = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("c"), SnapshotElement("a"), SnapshotElement("b")])])
        let s4 = try RoomSnapshot([(SnapshotElement("t"), [SnapshotElement("z")])])
        let watching = DispatchSemaphore(value: 0)
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake()
            // 1. A SNAPSHOT whose digest does not match: the client must ask again, fresh.
            var request = try peer.expectJoin(room, resume: nil)
            peer.send(
                .snapshot(
                    requestID: request, room: room, epoch: 7, version: 3, reason: .initial,
                    digest: RoomSnapshot().digest, snapshot: s1))
            request = try peer.expectJoin(room, resume: nil)
            peer.send(.snapshot(requestID: request, room: room, epoch: 7, version: 3, reason: .initial, digest: s1.digest, snapshot: s1))
            // The rest waits until the test watches the replica's changes (a stream starts at
            // the replica's snapshot when it is made, so a late one would miss changes).
            guard watching.wait(timeout: .now() + hangBound.seconds) == .success else {
                throw ScriptedPeer.Failure(description: "the test never watched")
            }
            // 2. A gap (v5 after v3): the replica is fine but behind, so it resumes from v3.
            peer.send(.diff(room: room, epoch: 7, version: 5, ops: [.moveItem("c", .before("a"))]))
            request = try peer.expectJoin(room, resume: .init(epoch: 7, version: 3))
            peer.send(.catchup(requestID: request, room: room, epoch: 7, fromVersion: 3, toVersion: 5))
            peer.send(.diff(room: room, epoch: 7, version: 4, ops: [.appendItems(["c"], toSection: "s")]))
            peer.send(.diff(room: room, epoch: 7, version: 5, ops: [.moveItem("c", .before("a"))]))
            // 3. A DIFF that does not apply: the replica is suspect, so the JOIN is fresh.
            peer.send(.diff(room: room, epoch: 7, version: 6, ops: [.deleteItems(["nope"])]))
            request = try peer.expectJoin(room, resume: nil)
            peer.send(.snapshot(requestID: request, room: room, epoch: 7, version: 6, reason: .initial, digest: s3.digest, snapshot: s3))
            // 4. A DIFF of another epoch (the room was recreated): resume, answered with a resync.
            peer.send(.diff(room: room, epoch: 8, version: 1, ops: []))
            request = try peer.expectJoin(room, resume: .init(epoch: 7, version: 6))
            peer.send(.snapshot(requestID: request, room: room, epoch: 8, version: 1, reason: .resync, digest: s4.digest, snapshot: s4))
            // 5. The client still works: a write is answered.
            guard case .mutate(let write, room, nil, let writeID, [.appendItems(["y"], toSection: "t")]) = try peer.request(),
                writeID.count == 16
            else { throw ScriptedPeer.Failure(description: "expected the MUTATE") }
            peer.send(.diff(room: room, epoch: 8, version: 2, ops: [.appendItems(["y"], toSection: "t")]))
            peer.send(.ack(requestID: write, epoch: 8, version: 2))
        }

        let client = SnapSyncClient(configuration: peer.configuration())
        let events = EventLog.start(client)
        try await client.connect()
        let replica = try await client.join(room)
        let log = ChangeLog.start(replica)
        watching.signal()
        let changes = try await log.wait(for: "the epoch-8 resync") { $0.last?.position == RoomPosition(epoch: 8, version: 1) }
        let position = try await client.mutate(room, [.appendItems(["y"], toSection: "t")])
        #expect(position == RoomPosition(epoch: 8, version: 2))
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")

        #expect(
            changes.map(\.kind) == [
                .initial, .catchUp, .resync(.diffFailed(BatchError(operationIndex: 0, violation: .itemNotFound("nope")))),
                .resync(.outOfSequence(expected: RoomPosition(epoch: 7, version: 7), received: RoomPosition(epoch: 8, version: 1))),
            ])
        #expect(changes[0].snapshot == s1 && changes[0].position.version == 3)
        #expect(changes[1].snapshot == s3 && changes[1].operations.count == 2)
        #expect(changes[1].updates.insertedItems == [ItemIndexPath(item: 0, section: 0)], "c, inserted at its final place")
        #expect(changes[2].snapshot == s3 && changes[2].updates.isEmpty, "the fresh snapshot held what the replica had")
        #expect(changes[3].snapshot == s4 && changes[3].updates.deletedSections == [0] && changes[3].updates.insertedSections == [0])
        expectConsistentStream(changes, "scripted")
        let resyncs = await events.events.compactMap { if case .resyncing(_, let reason) = $0 { reason } else { nil } }
        #expect(resyncs.count == 4, "\(resyncs)")
        #expect(resyncs.first == .digestMismatch)
        #expect(resyncs.dropFirst().first == .outOfSequence(expected: RoomPosition(epoch: 7, version: 4), received: RoomPosition(epoch: 7, version: 5)))
        await client.close()
    }

    @Test(
        "version 3: each DIFF's chain is checked against the replica's; one that does not follow (a DIFF altered on the way) is a divergence: a fresh JOIN, .diverged with both chains, counted",
        .timeLimit(.minutes(5)))
    func divergedReplica() async throws {
        let peer = try ScriptedPeer()
        let room = "r"
        let s3 = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a")])])
        let c3 = RoomChain.start(epoch: 7).next(frame: [1, 2, 3])  // any chain: the client takes the SNAPSHOT's
        let d4: [SnapshotOperation] = [.appendItems(["b"], toSection: "s")]
        let c4 = c3.next(frame: FrameEncoder().encode(.diff(room: room, epoch: 7, version: 4, ops: d4)))
        // What the server sent for version 5, and what reached the client: another item.
        let sent5: [SnapshotOperation] = [.appendItems(["c"], toSection: "s")]
        let received5: [SnapshotOperation] = [.appendItems(["x"], toSection: "s")]
        let c5 = c4.next(frame: FrameEncoder().encode(.diff(room: room, epoch: 7, version: 5, ops: sent5)))
        let s5 = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a"), SnapshotElement("b"), SnapshotElement("c")])])
        let watching = DispatchSemaphore(value: 0)
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(version: 3)
            var request = try peer.expectJoin(room, resume: nil)
            peer.send(.snapshot(requestID: request, room: room, epoch: 7, version: 3, reason: .initial, digest: s3.digest, snapshot: s3, chain: c3))
            guard watching.wait(timeout: .now() + hangBound.seconds) == .success else {
                throw ScriptedPeer.Failure(description: "the test never watched")
            }
            peer.send(.diff(room: room, epoch: 7, version: 4, ops: d4, chain: c4))
            peer.send(.diff(room: room, epoch: 7, version: 5, ops: received5, chain: c5))
            // It applies, but the replica is not the room: joined afresh, not resumed.
            request = try peer.expectJoin(room, resume: nil)
            peer.send(.snapshot(requestID: request, room: room, epoch: 7, version: 5, reason: .initial, digest: s5.digest, snapshot: s5, chain: c5))
        }

        let client = SnapSyncClient(configuration: peer.configuration())
        let events = EventLog.start(client)
        try await client.connect()
        #expect(await client.protocolVersion == 3)
        let replica = try await client.join(room)
        let log = ChangeLog.start(replica)
        watching.signal()
        let changes = try await log.wait(for: "the resync at version 5") { $0.last?.position.version == 5 }
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        let diverged = ResyncReason.diverged(
            expected: c4.next(frame: FrameEncoder().encode(.diff(room: room, epoch: 7, version: 5, ops: received5))), received: c5)
        #expect(changes.map(\.kind) == [.initial, .diff, .resync(diverged)])
        #expect(changes.last?.snapshot == s5)
        let resyncs = await events.events.compactMap { if case .resyncing(_, let reason) = $0 { reason } else { nil } }
        #expect(resyncs == [diverged])
        #expect(await client.divergences == 1)
        await client.close()
    }

    @Test(
        "version 3: a folded CATCHUP's one DIFF takes the replica to to_version as one change, its chain is taken and the next DIFF is checked from it; a folded DIFF whose result is not the CATCHUP's digest is a divergence: a fresh JOIN, .corrupted, counted",
        .timeLimit(.minutes(5)))
    func foldedCatchUp() async throws {
        let peer = try ScriptedPeer()
        let room = "r"
        let s3 = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a"), SnapshotElement("b"), SnapshotElement("c")])])
        let c3 = RoomChain.start(epoch: 7).next(frame: [3])
        // Versions 4...6 folded: c moved first, b updated, d appended.
        let folded: [SnapshotOperation] = [
            .moveItem("c", .before("a")), .updateItems([SnapshotElement("b", payload: "B")], .reload), .appendItems(["d"], toSection: "s"),
        ]
        func applying(_ ops: [SnapshotOperation], to state: RoomSnapshot) throws -> RoomSnapshot {
            var state = state
            try state.apply(ops, limits: .unlimited)
            return state
        }
        let s6 = try applying(folded, to: s3)
        let c6 = RoomChain.start(epoch: 7).next(frame: [6])  // the room's: taken, not computed
        let d7: [SnapshotOperation] = [.deleteItems(["a"])]
        let c7 = c6.next(frame: FrameEncoder().encode(.diff(room: room, epoch: 7, version: 7, ops: d7)))
        let s7 = try applying(d7, to: s6)
        // A second fold whose DIFF was altered on the way: it applies, but not to the digest.
        let sent: [SnapshotOperation] = [.appendItems(["e"], toSection: "s")]
        let received: [SnapshotOperation] = [.appendItems(["x"], toSection: "s")]
        let s9 = try applying(sent, to: s7)
        let damaged = try applying(received, to: s7)
        let c9 = RoomChain.start(epoch: 7).next(frame: [9])
        let watching = DispatchSemaphore(value: 0)
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(version: 3)
            var request = try peer.expectJoin(room, resume: nil)
            peer.send(.snapshot(requestID: request, room: room, epoch: 7, version: 3, reason: .initial, digest: s3.digest, snapshot: s3, chain: c3))
            guard watching.wait(timeout: .now() + hangBound.seconds) == .success else {
                throw ScriptedPeer.Failure(description: "the test never watched")
            }
            // A gap: the replica resumes from version 3 and is answered with one folded DIFF.
            peer.send(.diff(room: room, epoch: 7, version: 5, ops: [], chain: c6))
            request = try peer.expectJoin(room, resume: .init(epoch: 7, version: 3))
            peer.send(
                .catchup(requestID: request, room: room, epoch: 7, fromVersion: 3, toVersion: 6, form: .folded(digest: s6.digest)))
            peer.send(.diff(room: room, epoch: 7, version: 6, ops: folded, chain: c6))
            peer.send(.diff(room: room, epoch: 7, version: 7, ops: d7, chain: c7))
            // Another gap, and a folded DIFF altered on the way.
            peer.send(.diff(room: room, epoch: 7, version: 9, ops: [], chain: c9))
            request = try peer.expectJoin(room, resume: .init(epoch: 7, version: 7))
            peer.send(
                .catchup(requestID: request, room: room, epoch: 7, fromVersion: 7, toVersion: 9, form: .folded(digest: s9.digest)))
            peer.send(.diff(room: room, epoch: 7, version: 9, ops: received, chain: c9))
            request = try peer.expectJoin(room, resume: nil)
            peer.send(.snapshot(requestID: request, room: room, epoch: 7, version: 9, reason: .initial, digest: s9.digest, snapshot: s9, chain: c9))
        }

        let client = SnapSyncClient(configuration: peer.configuration())
        let events = EventLog.start(client)
        try await client.connect()
        let replica = try await client.join(room)
        let log = ChangeLog.start(replica)
        watching.signal()
        let changes = try await log.wait(for: "the resync at version 9") { $0.last?.position.version == 9 }
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        let corrupted = ResyncReason.corrupted(expected: s9.digest, computed: damaged.digest)
        #expect(changes.map(\.kind) == [.initial, .catchUp, .diff, .resync(corrupted)])
        // The catch-up is one change from version 3 to 6 carrying the folded ops.
        #expect(changes[1].previousPosition?.version == 3 && changes[1].position.version == 6)
        #expect(changes[1].snapshot == s6 && changes[1].operations == folded)
        #expect(changes[2].snapshot == s7 && changes.last?.snapshot == s9)
        let resyncs = await events.events.compactMap { if case .resyncing(_, let reason) = $0 { reason } else { nil } }
        #expect(resyncs.contains(corrupted))
        #expect(await client.divergences == 1)
        await client.close()
    }

    @Test(
        "a version 1 server: HELLO offers [4, 3, 2, 1], WELCOME 1 is accepted, flat writes go out, outline writes are refused unsent", .timeLimit(.minutes(5)))
    func versionOneServer() async throws {
        let peer = try ScriptedPeer()
        let room = "r"
        let flat = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a")])])
        let script = play(peer) { peer in
            try peer.accept()
            guard case .hello(let versions, _, _) = try peer.request(), versions == [4, 3, 2, 1] else {
                throw ScriptedPeer.Failure(description: "expected HELLO offering [4, 3, 2, 1]")
            }
            peer.send(.welcome(version: 1, sessionID: 1, serverName: "v1", limits: []))
            let join = try peer.expectJoin(room, resume: nil)
            peer.send(.snapshot(requestID: join, room: room, epoch: 3, version: 1, reason: .initial, digest: flat.digest, snapshot: flat))
            // The outline write never arrives: the next frame is the flat one.
            guard case .mutate(let write, room, nil, _, [.appendItems(["b"], toSection: "s")]) = try peer.request() else {
                throw ScriptedPeer.Failure(description: "expected the flat MUTATE and nothing before it")
            }
            peer.send(.diff(room: room, epoch: 3, version: 2, ops: [.appendItems(["b"], toSection: "s")]))
            peer.send(.ack(requestID: write, epoch: 3, version: 2))
        }
        let client = SnapSyncClient(configuration: peer.configuration())
        try await client.connect()
        #expect(await client.protocolVersion == 1)
        _ = try await client.join(room)
        var refusal: SnapSyncError?
        do {
            _ = try await client.mutate(room, [.appendChildren(["child"], toParent: "a")])
        } catch {
            refusal = error
        }
        if let refusal, refusal.kind == .unsupportedByServer, let what = refusal.reason {
            #expect(what.contains("protocol version 1"), "\(what)")
        } else {
            Issue.record("expected .unsupportedByServer, got \(String(describing: refusal))")
        }
        let position = try await client.mutate(room, [.appendItems(["b"], toSection: "s")])
        #expect(position == RoomPosition(epoch: 3, version: 2))
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        await client.close()
    }
}

private final class UncheckedBox<T>: @unchecked Sendable {
    // @unchecked: the value is handed to one thread and used only there.
    let value: T
    init(_ value: T) { self.value = value }
}
