@_spi(Testing) import SnapSync
import SnapSyncClientTestSupport
import Testing

// Resuming with one folded DIFF (PROTOCOL.md §11.12) between the client and the real daemon: a
// replica that was away for hundreds of versions gets the net change as one CATCHUP DIFF, which
// the client publishes as one change UIKit can apply in one batch update.

/// Versions 1 and 2 of `room`: sections `s` and `t`, items i0…i39 in `s`; returns once
/// `replica` holds them.
private func writeSetup(_ writer: SnapSyncClient, _ room: String, seenBy replica: RoomReplica) async throws {
    try await writer.mutate(room, [.appendSections([SnapshotElement("s"), SnapshotElement("t")])])
    try await writer.mutate(room, [.appendItems((0..<40).map { SnapshotElement("i\($0)", payload: "item \($0)") }, toSection: "s")])
    try await eventually("the reader at version 2") { replica.position.version == 2 }
}

/// 300 writes to `room` (two sections, items i0…i39 in `s`): updates of a few hot items, moves,
/// inserts, deletes and moves to the other section.
private func writeMixedOps(_ writer: SnapSyncClient, _ room: String) async throws {
    for k in 0..<300 {
        let ops: [SnapshotOperation] =
            switch k % 10 {
            case 0: [.moveItem("i\(k % 40)", .after("i\((k + 17) % 40)"))]
            case 1: [.insertItems([SnapshotElement("n\(k)", payload: "new \(k)")], .before("i\((k + 3) % 40)"))]
            case 2 where k >= 20: [.deleteItems(["n\(k - 21)"])]
            case 3: [.moveItemToSection("i\((k * 7) % 40)", section: "t")]
            default: [.updateItems([SnapshotElement("i\(k % 5)", payload: "update \(k) of a few hot items")], .reload)]
            }
        try await writer.mutate(room, ops)
    }
}

@Suite("A resume after many versions is one folded change", .serialized)
struct ClientFoldedCatchupDaemonTests {
    @Test(
        "a replica cut off while 300 writes (updates, moves, inserts, deletes) land resumes with one catch-up change to the room's state, applicable as one UIKit batch; folded unless --no-fold-resumes, which replays; no divergence",
        .timeLimit(.minutes(5)), arguments: [true, false])
    func resumeAfterManyWrites(folds: Bool) async throws {
        let daemon = try DaemonProcess.start(arguments: folds ? [] : ["--no-fold-resumes"])
        defer { daemon.stop() }
        let room = "fold"
        let reader = try await connectedClient(daemon, "reader")
        let writer = try await connectedClient(daemon, "writer")
        let replica = try await reader.join(room)
        let log = ChangeLog.start(replica)
        try await writeSetup(writer, room, seenBy: replica)
        let held = replica.position
        let before = replica.snapshot

        await reader.dropConnection(reconnect: false)
        try await writeMixedOps(writer, room)
        let truth = try await connectedClient(daemon, "truth")
        let fresh = try await truth.join(room)
        #expect(fresh.position.version == 302)

        await reader.resumeReconnecting()
        try await eventually("the reader caught up") { replica.position == fresh.position }
        #expect(replica.snapshot == fresh.snapshot)
        let changes = try await log.wait(for: "the catch-up") { $0.last?.position == fresh.position }
        let after = changes.filter { $0.position.version > held.version }
        #expect(after.count == 1 && after.first?.kind == .catchUp, "\(after.map { "\($0.kind) v\($0.version)" })")
        if let change = after.first {
            #expect(change.previousPosition == held)
            // One performBatchUpdates from the screen before the cut to the room now.
            let layout = try replayAsUIKit(change.updates, on: before, dataSource: change.snapshot)
            #expect(layout.map(\.0) == fresh.snapshot.sectionIdentifiers)
            #expect(layout.map(\.1) == fresh.snapshot.sectionIdentifiers.map { fresh.snapshot.itemIdentifiers(inSection: $0)! })
            // Folded: the net change (a few hundred items at most), not 300 versions of ops.
            if folds { #expect(change.operations.count < 150, "\(change.operations.count) ops") }
        }
        #expect(await reader.divergences == 0)
        let stats = try RawClient.ready(daemon).stats()
        #expect(stats["catchups_folded"] == (folds ? 1 : 0))

        // The replica then follows live DIFFs, chain-checked from the chain the fold carried.
        try await writer.mutate(room, [.deleteItems(["i1"])])
        try await eventually("the reader at version 303") { replica.position.version == 303 }
        #expect(try await reader.verify(room) == .holds(replica.position))
        #expect(await reader.divergences == 0)
        for client in [reader, writer, truth] { await client.close() }
    }

    /// How the daemon goes away between the writes and the resume.
    enum Away: String, CustomStringConvertible {
        /// kill -9: the room comes back from the log alone (its base from the empty room).
        case killed
        /// The room sleeps in its checkpoint (`--room-idle`), then a clean stop and a start
        /// leave it asleep: it wakes from the checkpoint at the JOIN.
        case sleptThenStopped
        var description: String { rawValue }
    }

    @Test(
        "a replica away while 300 writes land and the daemon is killed, or the room sleeps and the daemon restarts, resumes with one folded catch-up change: the resume base outlasts both",
        .timeLimit(.minutes(5)), arguments: [Away.killed, .sleptThenStopped])
    func resumeAcrossARestart(away: Away) async throws {
        let directory = try DurableDirectory()
        defer { directory.remove() }
        let flags = away == .sleptThenStopped ? ["--room-idle", "1s"] : []
        var daemon = try directory.start(flags)
        let port = daemon.port
        let room = "fold"
        let reader = try await connectedClient(daemon, "reader")
        let writer = try await connectedClient(daemon, "writer")
        let replica = try await reader.join(room)
        let log = ChangeLog.start(replica)
        try await writeSetup(writer, room, seenBy: replica)
        let held = replica.position
        await reader.dropConnection(reconnect: false)
        try await writeMixedOps(writer, room)

        switch away {
        case .killed:
            daemon.kill()
        case .sleptThenStopped:
            try await eventually("the room asleep", timeout: .seconds(30)) { (try? RawClient.ready(daemon).stats()["rooms_sleeping"]) == 1 }
            #expect(daemon.stop() == 0)
        }
        daemon = try directory.start(["--port", "\(port)"] + flags)
        defer { daemon.stop() }

        await reader.resumeReconnecting()
        try await eventually("the reader at version 302") { replica.position.version == 302 }
        let truth = try await connectedClient(daemon, "truth")
        let fresh = try await truth.join(room)
        #expect(fresh.position == replica.position && replica.snapshot == fresh.snapshot)
        let changes = try await log.wait(for: "the catch-up") { $0.last?.position == fresh.position }
        let after = changes.filter { $0.position.version > held.version }
        #expect(after.count == 1 && after.first?.kind == .catchUp, "\(after.map { "\($0.kind) v\($0.version)" })")
        if let change = after.first { #expect(change.operations.count < 150, "\(change.operations.count) ops") }
        let stats = try RawClient.ready(daemon).stats()
        #expect(stats["catchups_folded"] == 1, "\(daemon.log)")
        if away == .sleptThenStopped { #expect(stats["rooms_woken"] == 1) }
        #expect(await reader.divergences == 0)
        for client in [reader, writer, truth] { await client.close() }
    }
}
