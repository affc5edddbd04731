import SnapSyncTestSupport
@testable import SnapSync
import SnapSyncClientTestSupport
import Testing

@Suite("Client: batch builder")
struct ClientBatchBuilderTests {
    let base = try! RoomSnapshot([(SnapshotElement("a"), [SnapshotElement("1"), SnapshotElement("2")])])

    @Test("records each operation and applies it to its own copy")
    func records() throws {
        var builder = BatchBuilder(base: base)
        try builder.appendSections(["b"])
        try builder.appendItems(["3"])
        try builder.moveItem("1", afterItem: "3")
        try builder.reconfigureItems([SnapshotElement("2", payload: "x")])
        #expect(
            builder.operations == [
                .appendSections(["b"]), .appendItems(["3"], toSection: nil),
                .moveItem("1", .after("3")), .updateItems([SnapshotElement("2", payload: "x")], .reconfigure),
            ])
        #expect(builder.snapshot.itemIdentifiers(inSection: "b") == ["3", "1"])
        #expect(builder.snapshot.payload(ofItem: "2") == "x")
        try builder.snapshot.checkInvariants()
        // The base is a value: untouched.
        #expect(base.itemIdentifiers == ["1", "2"])
        var replayed = base
        try replayed.apply(builder.operations)
        #expect(replayed == builder.snapshot)
    }

    @Test("a failing call throws with the batch index it would have had, and leaves the builder unchanged")
    func localValidation() throws {
        var builder = BatchBuilder(base: base)
        try builder.appendItems(["3"], toSection: "a")
        let before = builder.snapshot
        #expect(throws: BatchError(operationIndex: 1, violation: .duplicateItem("1"))) {
            try builder.appendItems(["1"])
        }
        #expect(throws: BatchError(operationIndex: 1, violation: .anchorItemNotFound("nope"))) {
            try builder.insertItems(["4"], beforeItem: "nope")
        }
        #expect(throws: BatchError(operationIndex: 1, violation: .sectionNotFound("zz"))) {
            try builder.deleteSections(["zz"])
        }
        #expect(builder.operations.count == 1)
        #expect(builder.snapshot == before)
    }

    @Test("limits are the ones given (the server's)")
    func limits() {
        var builder = BatchBuilder(base: base, limits: SnapshotLimits(maxIdentifierBytes: 4))
        #expect(throws: BatchError(operationIndex: 0, violation: .identifierTooLong("long-id", limit: 4))) {
            try builder.appendItems(["long-id"])
        }
    }

    @Test("deleteAllItems cannot fail and is recorded")
    func deleteAll() {
        var builder = BatchBuilder(base: base)
        builder.deleteAllItems()
        #expect(builder.operations == [.deleteAllItems])
        #expect(builder.snapshot.isEmpty)
    }
}

@Suite("Client: reconnect policy, errors, README")
struct ClientMiscellaneousTests {
    @Test("backoff grows exponentially up to the cap; jitter only shortens it, within its fraction")
    func backoff() {
        var random = SplitMix64(seed: 42)
        let exact = SnapSyncClient.ReconnectPolicy(initialDelay: .milliseconds(100), multiplier: 2, maximumDelay: .seconds(1), jitter: 0)
        #expect(exact.delay(attempt: 0, using: &random) == .milliseconds(100))
        #expect(exact.delay(attempt: 1, using: &random) == .milliseconds(200))
        #expect(exact.delay(attempt: 3, using: &random) == .milliseconds(800))
        #expect(exact.delay(attempt: 4, using: &random) == .seconds(1))
        #expect(exact.delay(attempt: 10_000, using: &random) == .seconds(1))
        let jittered = SnapSyncClient.ReconnectPolicy(initialDelay: .milliseconds(100), multiplier: 2, maximumDelay: .seconds(1), jitter: 0.5)
        var seen = Set<Duration>()
        for _ in 0..<200 {
            let delay = jittered.delay(attempt: 2, using: &random)
            #expect(delay >= .milliseconds(200) && delay <= .milliseconds(400))
            seen.insert(delay)
        }
        #expect(seen.count > 10, "jitter spreads the delays")
    }

    @Test("a REJECT's code maps one-to-one onto ErrorCode, unknown codes stay raw")
    func rejectionCodes() {
        for code in ErrorCode.allCases {
            let rejection = SnapSyncError.Rejection(rawCode: code.rawValue, operationIndex: 2, identifier: "x", message: "m")
            #expect(rejection.code == code)
            #expect(SnapSyncError.rejected(rejection).code == code)
            #expect(rejection.description.contains(code.name))
        }
        let unknown = SnapSyncError.Rejection(rawCode: 999, operationIndex: nil, identifier: nil, message: "m")
        #expect(unknown.code == nil)
        #expect(unknown.description.contains("999"))
    }

    @Test("calls on a client that never connected fail at once")
    func notConnected() async {
        let client = SnapSyncClient(host: "127.0.0.1", port: 9)
        await #expect(throws: SnapSyncError.connectionLost("not connected: call connect()")) {
            try await client.join("r")
        }
        await client.close()
        await #expect(throws: SnapSyncError.closed) { try await client.mutate("r", []) }
        #expect(client.state == .closed)
    }

    @Test("connecting to a port nobody listens on fails with connectFailed")
    func refused() async throws {
        // Port 1 on loopback: nothing listens there on a test machine, so the connect is refused
        // at once. The handshake timer (connectTimeout) would fail the attempt as .timedOut
        // instead: a hang bound long enough that a stalled test process never lets it win.
        let client = SnapSyncClient(configuration: .init(host: "127.0.0.1", port: 1, connectTimeout: hangBound))
        await #expect {
            try await client.connect()
        } throws: { error in
            (error as? SnapSyncError)?.kind == .connectFailed
        }
        #expect(client.state == .disconnected)
        await client.close()
    }
}
