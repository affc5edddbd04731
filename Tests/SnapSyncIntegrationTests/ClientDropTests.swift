@_spi(Testing) import SnapSync
import SnapSyncClientTestSupport
import Testing

// `SnapSyncClient.drop` and `ClientEvent.roomEnded` against the real daemon.

@Suite("Client: rooms that end", .serialized)
struct ClientDropTests {
    /// One client drops a room two clients joined: both replicas finish, both hear
    /// `.roomEnded(.deleted)` (not `.roomLost`), and joining again gives a new, empty room.
    @Test(.timeLimit(.minutes(1)))
    func dropEndsEveryReplicaAndTheNameStartsOver() async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let owner = try await connectedClient(daemon, "owner")
        let viewer = try await connectedClient(daemon, "viewer")
        let ownerEvents = EventLog.start(owner)
        let viewerEvents = EventLog.start(viewer)
        try await owner.mutate("doc", [.appendSections([SnapshotElement("s")])])
        let ownerChanges = ChangeLog.start(try await owner.join("doc"))
        let viewerReplica = try await viewer.join("doc")
        let viewerChanges = ChangeLog.start(viewerReplica)
        let old = viewerReplica.position

        try await owner.drop("doc")
        try await eventually("both replicas to finish") {
            let ownerDone = await ownerChanges.finished
            let viewerDone = await viewerChanges.finished
            return ownerDone && viewerDone
        }
        for events in [ownerEvents, viewerEvents] {
            try await eventually("roomEnded") {
                await events.events.contains { if case .roomEnded("doc", .deleted) = $0 { true } else { false } }
            }
            #expect(await !events.events.contains { if case .roomLost = $0 { true } else { false } })
        }
        #expect(await owner.replica("doc") == nil)
        #expect(await viewer.replica("doc") == nil)

        let again = try await viewer.join("doc")
        #expect(again.position.epoch != old.epoch && again.position.version == 0 && again.snapshot.isEmpty)
        // Dropping a room that is not there succeeds.
        try await owner.drop("never-was")
        await owner.close()
        await viewer.close()
    }
}
