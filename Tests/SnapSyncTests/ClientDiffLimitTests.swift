import Dispatch
@testable import SnapSync
import SnapSyncClientTestSupport
import Testing
import SnapSyncWire

// A replica applies a DIFF under the limits the server announced in WELCOME (PROTOCOL.md §5):
// a DIFF that breaks them cannot be followed, like one that does not apply, so the client
// drops the replica and JOINs afresh (§11.13) instead of holding a room no server may hold.

@Suite("Client applies DIFFs under the server's limits")
struct ClientDiffLimitTests {
    @Test(.timeLimit(.minutes(5)))
    func aDiffOverTheAnnouncedLimitsIsResynchronised() async throws {
        let peer = try ScriptedPeer()
        let room = "r"
        let s1 = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a")])])
        let s2 = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a"), SnapshotElement("b")])])
        // The DIFFs wait until the test watches the replica's changes: a stream made after the
        // resync would start at v3 and never see it (each stream starts at the replica's
        // snapshot when it is made).
        let watching = DispatchSemaphore(value: 0)
        let script = play(peer) { peer in
            try peer.accept()
            guard case .hello = try peer.request() else { throw ScriptedPeer.Failure(description: "expected HELLO") }
            peer.send(
                .welcome(
                    version: 2, sessionID: 1, serverName: "scripted",
                    limits: [Message.LimitEntry(.maxItemsPerRoom, 2)]))
            var request = try peer.expectJoin(room, resume: nil)
            peer.send(.snapshot(requestID: request, room: room, epoch: 7, version: 1, reason: .initial, digest: s1.digest, snapshot: s1))
            guard watching.wait(timeout: .now() + hangBound.seconds) == .success else {
                throw ScriptedPeer.Failure(description: "the test never watched")
            }
            // Within the limits: applied.
            peer.send(.diff(room: room, epoch: 7, version: 2, ops: [.appendItems(["b"], toSection: "s")]))
            // A third item breaks max_items_per_room 2: the client must not follow it.
            peer.send(.diff(room: room, epoch: 7, version: 3, ops: [.appendItems(["c"], toSection: "s")]))
            request = try peer.expectJoin(room, resume: nil)
            peer.send(.snapshot(requestID: request, room: room, epoch: 7, version: 3, reason: .initial, digest: s2.digest, snapshot: s2))
        }
        let client = SnapSyncClient(configuration: peer.configuration())
        try await client.connect()
        let replica = try await client.join(room)
        let log = ChangeLog.start(replica)
        watching.signal()
        let changes = try await log.wait(for: "the resync at v3") { $0.last?.position == RoomPosition(epoch: 7, version: 3) }
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        // v3 is never followed by a diff, only reached by the resync.
        #expect(changes.first?.kind == .initial && changes.first?.position.version == 1)
        #expect(changes.dropFirst().dropLast().map(\.kind).allSatisfy { $0 == .diff })
        #expect(changes.last?.kind == .resync(.diffFailed(BatchError(operationIndex: 0, violation: .tooManyItems(limit: 2)))))
        #expect(changes.last?.previousPosition == RoomPosition(epoch: 7, version: 2))
        #expect(changes.last?.snapshot == s2)
        await client.close()
    }
}
