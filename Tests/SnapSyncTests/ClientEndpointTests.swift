@testable import SnapSync
import Testing

// Configuration.endpoints without a daemon: the order the rotation tries them in, and how the
// single-endpoint `host` and `port` relate to the list. ClientFailoverTests runs the same against
// real daemons.

@Suite("Client: endpoints")
struct ClientEndpointTests {
    /// The endpoints a rotation tries until `isLive` accepts one, failing the others; nil when
    /// the round ends first.
    private func round(_ rotation: inout EndpointRotation, until isLive: (Int) -> Bool) -> (tried: [Int], connected: Int?) {
        var tried: [Int] = []
        while true {
            tried.append(rotation.current)
            if isLive(rotation.current) {
                rotation.beginRound()
                return (tried, rotation.current)
            }
            rotation.attemptFailed()
            if rotation.roundIsOver { return (tried, nil) }
        }
    }

    @Test("a round tries every endpoint once, from the first; later rounds start after the endpoint that failed last")
    func rotationOrder() {
        var rotation = EndpointRotation(count: 4)
        // connect(): 0 and 1 are dead, 2 answers.
        #expect(round(&rotation, until: { $0 == 2 }) == ([0, 1, 2], 2))
        // 2 drops: the next round starts after it and ends with it.
        rotation.attemptFailed()
        rotation.beginRound()
        #expect(round(&rotation, until: { _ in false }) == ([3, 0, 1, 2], nil))
        #expect(rotation.failedInRound == [3, 0, 1, 2])
        // The round after a failed round starts after its last endpoint (2), at 3 again.
        rotation.beginRound()
        #expect(rotation.failedInRound.isEmpty)
        #expect(round(&rotation, until: { $0 == 1 }) == ([3, 0, 1], 1))
        // A connection resets the round: a drop of 1 then tries 2, 3, 0, 1.
        rotation.attemptFailed()
        rotation.beginRound()
        #expect(round(&rotation, until: { _ in false }) == ([2, 3, 0, 1], nil))

        // One endpoint: every round is that endpoint alone, as before endpoints existed.
        var single = EndpointRotation(count: 1)
        #expect(round(&single, until: { _ in false }) == ([0], nil))
        single.beginRound()
        #expect(round(&single, until: { _ in false }) == ([0], nil))
    }

    @Test("host and port are the first endpoint's; the endpoints initializer keeps the list")
    func singleEndpointConvenience() {
        var configuration = SnapSyncClient.Configuration(host: "sync.example.com", port: 7443)
        #expect(configuration.endpoints == [.init(host: "sync.example.com", port: 7443)])
        configuration.port = 7444
        #expect(configuration.endpoints == [.init(host: "sync.example.com", port: 7444)])
        #expect(SnapSyncClient.Configuration().endpoints == [.init(host: "127.0.0.1", port: 7400)])

        var cluster = SnapSyncClient.Configuration(endpoints: [.init(host: "a", port: 1), .init(host: "b", port: 2)])
        #expect(cluster.host == "a" && cluster.port == 1)
        cluster.host = "c"
        #expect(cluster.endpoints == [.init(host: "c", port: 1), .init(host: "b", port: 2)], "the other endpoints stay")

        var empty = SnapSyncClient.Configuration(endpoints: [])
        #expect(empty.host == "" && empty.port == 7400)
        empty.host = "d"
        #expect(empty.endpoints == [.init(host: "d", port: 7400)])
    }

    @Test("an endpoint prints as host:port, an IPv6 address in brackets; the error names every endpoint tried")
    func descriptions() {
        let v4 = SnapSyncClient.Endpoint(host: "10.0.0.1", port: 7400), v6 = SnapSyncClient.Endpoint(host: "::1", port: 7401)
        #expect(v4.description == "10.0.0.1:7400")
        #expect(v6.description == "[::1]:7401")
        // And back (LosslessStringConvertible), as scripts/cluster prints SNAPSYNC_NODES.
        #expect(SnapSyncClient.Endpoint(v4.description) == v4 && SnapSyncClient.Endpoint(v6.description) == v6)
        #expect(SnapSyncClient.Endpoint("db.example:80") == .init(host: "db.example", port: 80))
        for bad in ["", "7400", ":7400", "host", "host:", "host:0", "host:65536", "host:x", "::1:7400", "[]:7400"] {
            #expect(SnapSyncClient.Endpoint(bad) == nil, "\(bad)")
        }
        let error = SnapSyncError.allEndpointsFailed(tried: [v6, v4], last: .connectFailed("10.0.0.1:7400: refused"))
        #expect(
            error.description == "no endpoint could be connected to (tried [::1]:7401, 10.0.0.1:7400); the last: could not connect: 10.0.0.1:7400: refused")
    }

    @Test("connect() with no endpoint throws at once", .timeLimit(.minutes(1)))
    func noEndpoint() async {
        let client = SnapSyncClient(configuration: .init(endpoints: []))
        await #expect(throws: SnapSyncError.connectFailed("Configuration.endpoints is empty: no daemon to connect to")) {
            try await client.connect()
        }
        #expect(client.state == .disconnected)
        #expect(client.endpoint == nil)
    }
}
