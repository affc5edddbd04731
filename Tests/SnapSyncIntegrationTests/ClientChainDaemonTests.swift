@_spi(Testing) import SnapSync
import SnapSyncClientTestSupport
import SnapSyncWire
import Testing

// Protocol version 3 between the client and the real daemon: every DIFF the client receives
// carries the room's chain, which the client checks against its own (PROTOCOL.md §9, "The
// room's chain"). A daemon that lost the chain on restart, or computed it over other bytes, would
// show here as a divergence.

@Suite("Client and daemon agree on the room's chain", .serialized)
struct ClientChainDaemonTests {
    @Test(
        "a replica follows the daemon's chain through live DIFFs, a restart of the durable daemon (kill -9: replayed from the log; a clean stop: from the checkpoints it writes), a resume and the DIFFs after it: no divergence",
        .timeLimit(.minutes(5)), arguments: [true, false])
    func chainSurvivesRestart(kill: Bool) async throws {
        let directory = try DurableDirectory()
        defer { directory.remove() }
        var daemon = try directory.start()
        let port = daemon.port
        let room = "chain"
        let reader = try await connectedClient(daemon, "reader")
        #expect(await reader.protocolVersion == ProtocolVersion.current)
        let writer = try await connectedClient(daemon, "writer")
        let replica = try await reader.join(room)
        let log = ChangeLog.start(replica)
        try await writer.mutate(room, [.appendSections([SnapshotElement("s")])])
        for k in 0..<10 { try await writer.mutate(room, [.appendItems([SnapshotElement("a\(k)")], toSection: "s")]) }
        try await eventually("the reader at version 11") { replica.position.version == 11 }

        // Killed or stopped, and started again on the same port and data: both clients
        // reconnect, the reader resumes from version 11 and follows the writes made after.
        if kill {
            daemon.kill()
        } else {
            #expect(daemon.stop() == 0)
        }
        daemon = try directory.start(["--port", "\(port)"])
        defer { daemon.stop() }
        for k in 1..<11 {
            try await writer.mutate(
                room, [.moveItem("a\(k % 10)", .after("a\((k + 5) % 10)")), .updateItems([.named("a\(10 - k)", "after the restart \(k)")], .reload)])
        }
        let truth = try await connectedClient(daemon, "truth")
        let fresh = try await truth.join(room)
        #expect(fresh.position.version == 21)
        try await eventually("the reader at version 21") { replica.position == fresh.position }
        #expect(replica.snapshot == fresh.snapshot)
        let changes = try await log.wait(for: "the reader's last change") { $0.last?.position == fresh.position }
        #expect(!changes.contains { if case .resync = $0.kind { true } else { false } }, "\(changes.map(\.kind))")
        #expect(await reader.divergences == 0)
        for client in [reader, writer, truth] { await client.close() }
    }

    @Test(
        "verify: a replica that holds the room is confirmed; one damaged in memory (its DIFFs were right, so the chain cannot see it) is found by the room's digest, dropped, joined afresh and reported",
        .timeLimit(.minutes(5)))
    func verifyFindsADamagedReplica() async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let room = "verify"
        let reader = try await connectedClient(daemon, "reader")
        let events = EventLog.start(reader)
        let writer = try await connectedClient(daemon, "writer")
        let replica = try await reader.join(room)
        try await writer.mutate(room, [.appendSections([SnapshotElement("s")])])
        for k in 0..<5 { try await writer.mutate(room, [.appendItems([SnapshotElement("a\(k)", payload: "p\(k)")], toSection: "s")]) }
        try await eventually("the reader at version 6") { replica.position.version == 6 }
        #expect(try await reader.verify(room) == .holds(replica.position))

        await reader.damageReplica(room) { snapshot in
            try! snapshot.apply([.updateItems([SnapshotElement("a2", payload: "not what the room holds")], .reload)], limits: .unlimited)
        }
        guard case .diverged(.corrupted(let expected, let computed)) = try await reader.verify(room) else {
            Issue.record("expected the damaged replica to be found by its digest")
            return
        }
        #expect(expected != computed)
        let truth = try await connectedClient(daemon, "truth")
        let fresh = try await truth.join(room)
        try await eventually("the reader joined afresh") { replica.snapshot == fresh.snapshot }
        #expect(expected == fresh.snapshot.digest)
        #expect(await reader.divergences == 1)
        #expect(try await reader.verify(room) == .holds(fresh.position))
        let resyncs = await events.events.filter { if case .resyncing(room, .corrupted) = $0 { true } else { false } }
        #expect(resyncs.count == 1)
        await #expect(throws: SnapSyncError.notJoined(room: "elsewhere")) { try await reader.verify("elsewhere") }
        for client in [reader, writer, truth] { await client.close() }
    }
}
