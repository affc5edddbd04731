@testable import SnapSync
import SnapSyncClientTestSupport
import Testing
import SnapSyncWire

// The client's side of the server's keepalive (PROTOCOL.md §8.3): a PING from the server gets a
// PONG with its nonce, against the scripted peer (ClientScriptedServerTests.swift). Nothing here
// waits for time: the peer sends the PINGs and reads the answers. That the daemon keeps such a
// connection open is ClientDaemonTests' `answersServerPings`.

@Suite("Client answers the server's PINGs")
struct ClientPingTests {
    @Test(
        "a PING from the server is answered with a PONG of its nonce, each in order, and the session goes on",
        .timeLimit(.minutes(5)))
    func answersPings() async throws {
        let peer = try ScriptedPeer()
        let pinged = play(peer) { peer in
            try peer.accept()
            try peer.handshake()
            // One PING, then two back to back: each PONG carries its PING's nonce, in order.
            for burst: [UInt64] in [[7], [0, .max]] {
                for nonce in burst { peer.send(.ping(nonce: nonce)) }
                for nonce in burst {
                    let answer = try peer.receive()
                    guard case .pong(nonce) = answer else {
                        throw ScriptedPeer.Failure(description: "expected PONG \(nonce), got \(answer)")
                    }
                }
            }
        }
        // The client's own PINGs are off (ScriptedPeer.configuration): every frame it sends
        // unasked is an answer.
        let client = SnapSyncClient(configuration: peer.configuration())
        let events = EventLog.start(client)
        try await client.connect()
        let failure = await pinged.value
        #expect(failure == nil, "\(failure ?? "")")
        #expect(client.state == .connected)
        #expect(await events.disconnections.isEmpty)
        // The same session still serves requests.
        let snapshot = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a")])])
        let joined = play(peer) { peer in
            let join = try peer.expectJoin("r", resume: nil)
            peer.send(.snapshot(requestID: join, room: "r", epoch: 1, version: 1, reason: .initial, digest: snapshot.digest, snapshot: snapshot))
        }
        let replica = try await client.join("r")
        #expect(replica.snapshot == snapshot)
        let joinFailure = await joined.value
        #expect(joinFailure == nil, "\(joinFailure ?? "")")
        await client.close()
    }
}
