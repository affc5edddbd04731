#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
@_spi(Testing) import SnapSync
import SnapSyncClientTestSupport
import Testing

// The client library against the real snapsyncd (Support/DaemonProcess.swift), over real
// sockets. Every wait has a deadline: a test can fail, never hang. The deadlines are hang bounds
// (`hangBound`): no test asks the client or the daemon to be quick.

/// A connected client with quick reconnects, as tests want. Its handshake, calls and PINGs wait
/// up to the hang bound by default: a test process kept from running on a loaded machine must
/// not make the client drop a good connection or fail a call.
func connectedClient(
    _ daemon: DaemonProcess, _ name: String, pingInterval: Duration = .seconds(30),
    pingTimeout: Duration = hangBound, connectTimeout: Duration = hangBound
) async throws -> SnapSyncClient {
    let configuration = SnapSyncClient.Configuration(
        host: daemon.host, port: daemon.port, clientName: name, connectTimeout: connectTimeout,
        requestTimeout: hangBound, pingInterval: pingInterval, pingTimeout: pingTimeout,
        reconnect: .init(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(500)))
    let client = SnapSyncClient(configuration: configuration)
    try await client.connect()
    return client
}

@Suite("Client against the real daemon", .serialized)
struct ClientDaemonTests {
    @Test(
        "N clients writing random batches concurrently converge to the daemon's snapshot and digest",
        .timeLimit(.minutes(5)))
    func concurrentWritersConverge() async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let room = "converge"
        var clients: [SnapSyncClient] = []
        var logs: [ChangeLog] = []
        for k in 0..<4 {
            let client = try await connectedClient(daemon, "writer-\(k)")
            clients.append(client)
            logs.append(ChangeLog.start(try await client.join(room)))
        }
        try await clients[0].mutate(room, [.appendSections([SnapshotElement("s0"), SnapshotElement("s1")])])

        let outcomes = try await withThrowingTaskGroup(of: (applied: Int, rejected: Int).self) { group in
            for (k, client) in clients.enumerated() {
                group.addTask {
                    var random = RandomBatches(seed: UInt64(k + 1) &* 7_777, sectionPool: 6, itemPool: 60, allowsDeleteAll: false)
                    var applied = 0, rejected = 0
                    for _ in 0..<30 {
                        var operations = 0
                        do {
                            try await client.perform(room) { batch in
                                for _ in 0..<Int.random(in: 1...4, using: &random.random) {
                                    try? batch.apply(random.operation(on: batch.snapshot))
                                }
                                operations = batch.operations.count
                            }
                            // An empty batch is acknowledged without a new version.
                            if operations > 0 { applied += 1 }
                        } catch {
                            guard (error as? SnapSyncError)?.kind == .rejected else { throw error }
                            // Another writer got there first and the batch no longer applies: the
                            // server refused it whole, which is the point.
                            rejected += 1
                        }
                    }
                    return (applied, rejected)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let applied = outcomes.map(\.applied).reduce(0, +)
        #expect(applied > 20, "\(outcomes)")

        // A fresh JOIN is the daemon's state; every replica must reach it.
        let observer = try await connectedClient(daemon, "observer")
        let truth = try await observer.join(room)
        let (finalSnapshot, finalPosition) = truth.current
        #expect(finalPosition.version == UInt64(1 + applied), "one version per applied batch, none for rejected ones")
        for (k, client) in clients.enumerated() {
            let replica = try #require(await client.replica(room))
            try await eventually("writer-\(k) at \(finalPosition), has \(replica.position)") { replica.position == finalPosition }
            #expect(replica.snapshot == finalSnapshot)
            #expect(replica.snapshot.digest == finalSnapshot.digest)
            try replica.snapshot.checkInvariants()
            let changes = try await logs[k].wait(for: "writer-\(k)'s last change") { $0.last?.position == finalPosition }
            expectConsistentStream(changes, "writer-\(k)")
            #expect(changes.allSatisfy { $0.kind == .initial || $0.kind == .diff }, "no reconnects, no resyncs")
        }
        for client in clients + [observer] { await client.close() }
    }

    @Test(
        "a client whose socket dies while another writes reconnects, reports .catchUp and converges",
        .timeLimit(.minutes(5)))
    func reconnectCatchesUp() async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let room = "catchup"
        let a = try await connectedClient(daemon, "a"), b = try await connectedClient(daemon, "b")
        let replicaA = try await a.join(room), replicaB = try await b.join(room)
        let logA = ChangeLog.start(replicaA)
        let eventsA = EventLog.start(a)
        try await b.mutate(room, [.appendSections(["s"])])
        try await eventually("a at v1") { replicaA.position.version == 1 }

        // Deterministic part: A is down for exactly five of B's writes.
        await a.dropConnection(reconnect: false)
        try await eventually("a reconnecting") { a.state.isReconnecting }
        for i in 0..<5 { try await b.mutate(room, [.appendItems([SnapshotElement(SnapshotIdentifier("i\(i)"))], toSection: "s")]) }
        await a.resumeReconnecting()
        var changes = try await logA.wait(for: "a's catch-up") { $0.contains { $0.kind == .catchUp } }
        let catchUp = try #require(changes.first { $0.kind == .catchUp })
        #expect(catchUp.previousPosition?.version == 1)
        #expect(catchUp.position.version == 6)
        #expect(catchUp.operations.count == 5)
        #expect(catchUp.updates.insertedItems == (0..<5).map { ItemIndexPath(item: $0, section: 0) })
        #expect(await !eventsA.disconnections.isEmpty)

        // Mid-stream part: B writes without pause while A's socket is killed twice.
        let writer = Task {
            for i in 0..<60 {
                try await b.mutate(room, [.appendItems([SnapshotElement(SnapshotIdentifier("w\(i)"))], toSection: "s")])
            }
        }
        for round in 0..<2 {
            try await Task.sleep(for: .milliseconds(30))
            let catchUps = await logA.changes.filter { $0.kind == .catchUp }.count
            await a.dropConnection()
            _ = try await logA.wait(for: "catch-up after drop \(round)") { $0.filter { $0.kind == .catchUp }.count > catchUps }
        }
        try await writer.value
        try await eventually("a converged with b") { replicaA.current.position == replicaB.current.position }
        #expect(replicaA.snapshot == replicaB.snapshot)
        #expect(replicaA.snapshot.numberOfItems == 65)
        changes = try await logA.wait(for: "a's last change") { $0.last?.position == replicaB.position }
        #expect(changes.filter { $0.kind == .catchUp }.count >= 3, "each reconnect resumes with a catch-up")
        #expect(!changes.contains { $0.kind.isResync }, "the history covered every gap")
        expectConsistentStream(changes, "a")
        await a.close()
        await b.close()
    }

    @Test(
        "a client that missed more than the history holds resyncs from a fresh snapshot",
        .timeLimit(.minutes(5)))
    func outsideHistoryResyncs() async throws {
        let daemon = try DaemonProcess.start(arguments: ["--history-count", "4"])
        defer { daemon.stop() }
        let room = "resync"
        let a = try await connectedClient(daemon, "a"), b = try await connectedClient(daemon, "b")
        let replicaA = try await a.join(room), replicaB = try await b.join(room)
        let logA = ChangeLog.start(replicaA)
        let eventsA = EventLog.start(a)
        try await b.mutate(room, [.appendSections(["s"]), .appendItems(["old"], toSection: "s")])
        try await eventually("a at v1") { replicaA.position.version == 1 }

        await a.dropConnection(reconnect: false)
        try await eventually("a reconnecting") { a.state.isReconnecting }
        for i in 0..<10 { try await b.mutate(room, [.appendItems([SnapshotElement(SnapshotIdentifier("i\(i)"))], toSection: "s")]) }
        try await b.mutate(room, [.deleteItems(["old"])])
        await a.resumeReconnecting()

        let changes = try await logA.wait(for: "a's resync") { $0.contains { $0.kind.isResync } }
        let resync = try #require(changes.first { $0.kind.isResync })
        #expect(resync.kind == .resync(.historyUnavailable))
        #expect(resync.previousPosition?.version == 1)
        #expect(resync.position.version == 12)
        #expect(resync.operations.isEmpty)
        #expect(resync.updates.deletedItems == [ItemIndexPath(item: 0, section: 0)])
        #expect(resync.updates.insertedItems.count == 10)
        #expect(!changes.contains { $0.kind == .catchUp })
        try await eventually("a converged") { replicaA.current.position == replicaB.current.position }
        #expect(replicaA.snapshot == replicaB.snapshot)
        expectConsistentStream(try await logA.wait(for: "a's last change") { $0.last?.position == replicaB.position }, "a")
        #expect(await !eventsA.disconnections.isEmpty)
        let seen = await eventsA.events
        let announced = seen.filter { if case .resyncing(room, .historyUnavailable) = $0 { true } else { false } }
        #expect(announced.count == 1, "the resync is announced: \(seen)")
        await a.close()
        await b.close()
    }

    @Test(
        "rejected writes throw the server's typed error; local validation throws before sending",
        .timeLimit(.minutes(5)))
    func rejectedWrites() async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let room = "rejects"
        let client = try await connectedClient(daemon, "c")
        let replica = try await client.join(room)
        try await client.mutate(room, [.appendSections(["s"]), .appendItems(["a", "b"], toSection: "s")])
        let before = replica.current

        func rejection(_ operations: [SnapshotOperation], expectedVersion: UInt64? = nil) async -> SnapSyncError.Rejection? {
            do {
                try await client.mutate(room, operations, expectedVersion: expectedVersion)
                return nil
            } catch {
                guard let rejection = error.rejection else {
                    Issue.record("expected a REJECT, got \(error)")
                    return nil
                }
                return rejection
            }
        }

        let duplicate = await rejection([.appendItems(["x"], toSection: "s"), .appendItems(["a"], toSection: "s")])
        #expect(duplicate?.code == .duplicateItem)
        #expect(duplicate?.operationIndex == 1)
        #expect(duplicate?.identifier == "a")

        let anchor = await rejection([.insertItems(["y"], .before("missing"))])
        #expect(anchor?.code == .anchorItemNotFound)
        #expect(anchor?.operationIndex == 0)
        #expect(anchor?.identifier == "missing")

        let noSection = await rejection([.deleteSections(["nope"])])
        #expect(noSection?.code == .sectionNotFound)
        #expect(noSection?.identifier == "nope")

        let stale = await rejection([.appendItems(["z"], toSection: "s")], expectedVersion: before.position.version - 1)
        #expect(stale?.code == .versionMismatch)
        #expect(stale?.operationIndex == nil)

        // Nothing above changed the room.
        #expect(replica.current.position == before.position)
        #expect(replica.snapshot == before.snapshot)

        // Compare-and-set at the right version applies.
        let next = try await client.mutate(room, [.appendItems(["z"], toSection: "s")], expectedVersion: before.position.version)
        #expect(next.version == before.position.version + 1)
        #expect(replica.position == next, "the writer's DIFF arrives before its ACK")

        // The builder refuses locally, with the index the server would have given, and sends nothing.
        await #expect(throws: SnapSyncError.invalidBatch(BatchError(operationIndex: 1, violation: .duplicateItem("a")))) {
            try await client.perform(room) { batch in
                try batch.appendItems(["new"], toSection: "s")
                try batch.appendItems(["a"], toSection: "s")
            }
        }
        #expect(replica.position == next)

        // The same mistake sent anyway is the server's typed REJECT.
        let raced = await rejection([.moveItem("a", .after("a"))])
        #expect(raced?.code == .anchorIsSelf)

        do {
            _ = try await client.join("")
            Issue.record("joined a room with an empty name")
        } catch {
            #expect(error.code == .invalidRoomName, "\(error)")
        }
        await #expect(throws: SnapSyncError.notJoined(room: "elsewhere")) {
            try await client.perform("elsewhere") { _ in }
        }
        await client.close()
    }

    @Test(
        "a write whose ACK is lost with the connection is resent with its write id and applied once",
        .timeLimit(.minutes(5)))
    func idempotentRetry() async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let room = "retry"
        let client = try await connectedClient(daemon, "c")
        let replica = try await client.join(room)
        let log = ChangeLog.start(replica)
        let events = EventLog.start(client)
        try await client.mutate(room, [.appendSections(["s"])])

        await client.loseNextWriteAcknowledgement()
        // Applied twice, this append would be REJECT duplicate_item; applied once, it is ACK v2.
        let position = try await client.mutate(room, [.appendItems(["once"], toSection: "s")])
        #expect(position.version == 2)
        try await eventually("the disconnection event") { await events.disconnections.count == 1 }

        let observer = try await connectedClient(daemon, "observer")
        let truth = try await observer.join(room)
        #expect(truth.position == position)
        #expect(truth.snapshot.itemIdentifiers == ["once"])
        let changes = try await log.wait(for: "the resumed room") { $0.contains { $0.kind == .catchUp } }
        #expect(changes.filter { $0.kind == .diff && $0.version == 2 }.count == 1)
        #expect(replica.position == position)
        await client.close()
        await observer.close()
    }

    @Test("one connection serves many rooms; leave ends a room's stream", .timeLimit(.minutes(5)))
    func manyRooms() async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let reader = try await connectedClient(daemon, "reader"), writer = try await connectedClient(daemon, "writer")
        let names = ["r1", "r2", "r3"]
        var replicas: [RoomReplica] = []
        for name in names { replicas.append(try await reader.join(name)) }
        #expect(try await reader.join("r1") === replicas[0], "joining again returns the same replica")
        for (k, name) in names.enumerated() {
            try await writer.mutate(
                name,
                [
                    .appendSections([SnapshotElement(SnapshotIdentifier(name))]),
                    .appendItems((0...k).map { SnapshotElement(SnapshotIdentifier("\(name)-\($0)")) }, toSection: nil),
                ])
        }
        for (k, replica) in replicas.enumerated() {
            try await eventually("\(names[k]) loaded") { replica.snapshot.numberOfItems == k + 1 }
            #expect(replica.snapshot.sectionIdentifiers == [SnapshotIdentifier(names[k])])
        }
        let log = ChangeLog.start(replicas[1])
        try await reader.leave("r2")
        try await eventually("r2's stream finished") { await log.finished }
        #expect(await reader.replica("r2") == nil)
        try await writer.mutate("r2", [.appendItems(["late"], toSection: nil)])
        try await writer.mutate("r1", [.appendItems(["r1-late"], toSection: nil)])
        try await eventually("r1 follows") { replicas[0].snapshot.contains(item: "r1-late") }
        #expect(!replicas[1].snapshot.contains(item: "late"), "a left room is no longer followed")
        await reader.close()
        await writer.close()
    }

    @Test(
        "the client answers the daemon's PINGs: an idle connection outlives the daemon's idle timeout",
        .timeLimit(.minutes(10)))
    func answersServerPings() async throws {
        // The daemon PINGs a connection that sent no frame for --idle-timeout and closes it when
        // as long again passes without one (Connection+Timer.swift). The test waits for the
        // daemon to count two PONGs, not for time. The PONGs are sent from this process: kept
        // from running for longer than the idle timeout while a PING waits, the client loses
        // the connection through no fault of its own, so such an attempt is tried again with a
        // timeout twice as long. A client that does not answer fails every attempt.
        var closed: [String] = []
        for seconds in [2, 4, 8, 16, 32] {
            guard let reasons = try await idleConnectionSurvives(idleTimeout: seconds) else { return }
            closed.append("\(seconds) s: \(reasons)")
        }
        Issue.record("the daemon closed the idle connection at every idle timeout: \(closed)")
    }

    /// One attempt of `answersServerPings`: nil when it proved its point (or recorded why it
    /// failed), else the disconnections that end it, all the daemon's idle timeout.
    private func idleConnectionSurvives(idleTimeout seconds: Int) async throws -> [SnapSyncError]? {
        let daemon = try DaemonProcess.start(arguments: ["--idle-timeout", "\(seconds)s", "--metrics-listen", "127.0.0.1:0"])
        defer { daemon.stop() }
        let metrics = try MetricsAddress(daemon)
        // The client's own PINGs are off the table (an hour): only its PONGs are frames.
        let client = try await connectedClient(daemon, "idle", pingInterval: .seconds(3600), pingTimeout: .seconds(3600))
        let events = EventLog.start(client)
        let session = await client.session?.id
        let replica = try await client.join("idle")
        // Each scrape runs curl, so the daemon is asked a few times a second, not more.
        let deadline = ContinuousClock.now + hangBound
        while await client.session?.id == session, await events.disconnections.isEmpty {
            let pongs = (try? metrics.scrape())?["snapsync_frames_received_total{type=\"PONG\"}"] ?? 0
            if pongs >= 2 { break }
            guard ContinuousClock.now < deadline else { throw TimedOut("two PONGs at the daemon (it counted \(pongs))") }
            try await Task.sleep(for: .milliseconds(250))
        }
        let accepted = try metrics.scrape()["snapsync_connections_accepted_total"]
        let position = try await client.mutate("idle", [.appendSections(["s"])])
        // A new session id is a reconnect: the daemon closed the connection.
        let reconnected = await client.session?.id != session
        let disconnected = await !events.disconnections.isEmpty
        if reconnected || disconnected {
            try await eventually("the disconnection event") { await !events.disconnections.isEmpty }
            let reasons = await events.disconnections
            await client.close()
            guard reasons.allSatisfy({ $0.code == .timeout }) else {
                Issue.record("the idle connection ended otherwise than by the daemon's idle timeout: \(reasons)\n\(daemon.log)")
                return nil
            }
            return reasons
        }
        #expect(accepted == 1, "one connection: the daemon closed nothing")
        #expect(position.version == 1)
        #expect(replica.position == position)
        #expect(client.state == .connected)
        await client.close()
        return nil
    }

    @Test(
        "the client's PINGs find a daemon that stopped answering; it reconnects when it is back",
        .timeLimit(.minutes(5)))
    func detectsDeadServer() async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        // While the daemon is stopped, the kernel still accepts the reconnect's TCP connection:
        // its HELLO waits (up to the default hang bound) and is answered after SIGCONT.
        let client = try await connectedClient(daemon, "watchful", pingInterval: .milliseconds(200), pingTimeout: .seconds(2))
        let events = EventLog.start(client)
        let replica = try await client.join("alive")
        let log = ChangeLog.start(replica)
        daemon.signal(SIGSTOP)
        // A stall of this process may have cut a PING short before the stop (and the client
        // reconnected): only a timeout with the client left reconnecting is the stopped daemon's.
        try await eventually("a timeout, the client reconnecting") {
            guard client.state.isReconnecting else { return false }
            return await events.disconnections.contains { $0.kind == .timedOut }
        }
        daemon.signal(SIGCONT)
        try await eventually("reconnected") { client.state == .connected }
        _ = try await log.wait(for: "the resumed room") { $0.contains { $0.kind == .catchUp } }
        try await client.mutate("alive", [.appendSections(["s"])])
        #expect(replica.position.version == 1)
        await client.close()
    }

    @Test("close fails waiting calls and finishes the streams", .timeLimit(.minutes(5)))
    func closing() async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let client = try await connectedClient(daemon, "c")
        let log = ChangeLog.start(try await client.join("room"))
        await client.dropConnection(reconnect: false)
        try await eventually("reconnecting") { client.state.isReconnecting }
        // A write made while disconnected waits for the reconnect...
        let pending = Task { try await client.mutate("room", [.appendSections(["s"])]) }
        try await Task.sleep(for: .milliseconds(50))
        // ...and fails when the client closes instead.
        await client.close()
        await #expect(throws: SnapSyncError.closed) { try await pending.value }
        try await eventually("the stream finished") { await log.finished }
        #expect(client.state == .closed)
        await #expect(throws: SnapSyncError.closed) { try await client.join("room") }
    }
}
