@_spi(Testing) import SnapSync
import SnapSyncClientTestSupport
import Testing

// Many random batches through the real daemon, every change of every replica replayed through
// the UIKit validator (`expectConsistentStream`), and the replicas' index-path lookups compared
// with the snapshot's own positions. Split in tests of a few seconds each; their counts are
// printed, and together they pass 20,000 applied batches.

/// Writes `count` random batches to `room` from `client`, one after the other; returns how many
/// the daemon applied (a batch another writer made stale is rejected whole).
func writeRandomBatches(_ client: SnapSyncClient, _ room: String, count: Int, seed: UInt64) async throws -> Int {
    var random = RandomBatches(seed: seed, sectionPool: 6, itemPool: 50, allowsDeleteAll: true)
    var applied = 0
    for _ in 0..<count {
        var operations = 0
        do {
            try await client.perform(room) { batch in
                // 1–5 operations that apply to the replica (a random one often does not).
                let wanted = Int.random(in: 1...5, using: &random.random)
                for _ in 0..<wanted * 10 where batch.operations.count < wanted {
                    try? batch.apply(random.operation(on: batch.snapshot))
                }
                operations = batch.operations.count
            }
            if operations > 0 { applied += 1 }
        } catch {
            // Not `catch where`: a non-exhaustive `catch … where` of a typed error in a loop
            // hangs Swift 6.3.1's compiler (Migrating.md).
            guard error.kind == .rejected else { throw error }
        }
    }
    return applied
}

/// The replica's lookups agree with its snapshot's positions, for every section and item.
func expectLookupsMatch(_ replica: RoomReplica, _ who: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let snapshot = replica.snapshot
    let sections = snapshot.sectionIdentifiers
    for (s, section) in sections.enumerated() {
        #expect(replica.sectionIdentifier(for: s) == section, "\(who): section \(s)", sourceLocation: sourceLocation)
        #expect(replica.index(ofSection: section) == s, "\(who): index of \(section)", sourceLocation: sourceLocation)
        for (i, item) in snapshot.itemIdentifiers(inSection: section)!.enumerated() {
            let path = ItemIndexPath(item: i, section: s)
            #expect(replica.itemIdentifier(for: path) == item, "\(who): item at \(path)", sourceLocation: sourceLocation)
            #expect(replica.indexPath(for: item) == path, "\(who): path of \(item)", sourceLocation: sourceLocation)
        }
    }
    #expect(replica.sectionIdentifier(for: sections.count) == nil, sourceLocation: sourceLocation)
}

@Suite("Client: random batches through the real daemon", .serialized)
struct ClientRandomBatchTests {
    /// Rooms written by two clients at once: every change is a `.diff`.
    @Test("concurrent writers: every diff passes the UIKit validator", .timeLimit(.minutes(2)), arguments: [1, 2, 3])
    func concurrentDiffs(round: Int) async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let rooms = (0..<4).map { "diffs-\(round)-\($0)" }
        let a = try await connectedClient(daemon, "a"), b = try await connectedClient(daemon, "b")
        var logs: [(String, ChangeLog)] = []
        for room in rooms {
            logs.append(("a/\(room)", ChangeLog.start(try await a.join(room))))
            logs.append(("b/\(room)", ChangeLog.start(try await b.join(room))))
        }
        let applied = try await withThrowingTaskGroup(of: Int.self) { group in
            for (k, room) in rooms.enumerated() {
                for (w, client) in [a, b].enumerated() {
                    let seed = UInt64(round * 1000 + k * 10 + w + 1)
                    group.addTask { try await writeRandomBatches(client, room, count: 620, seed: seed) }
                }
            }
            return try await group.reduce(0, +)
        }
        // A fresh JOIN is the daemon's state: both replicas must reach it.
        let observer = try await connectedClient(daemon, "observer")
        var changes = 0
        for room in rooms {
            let truth = try await observer.join(room).position
            for (who, log) in logs where who.hasSuffix("/\(room)") {
                let stream = try await log.wait(for: "\(who) at \(truth)") { $0.last?.position == truth }
                expectConsistentStream(stream, who)
                changes += stream.count
            }
            expectLookupsMatch(try #require(await a.replica(room)), "a/\(room)")
            expectLookupsMatch(try #require(await b.replica(room)), "b/\(room)")
        }
        print("concurrentDiffs(\(round)): \(applied) batches applied, \(changes) changes validated")
        #expect(applied > 3500)
        for client in [a, b, observer] { await client.close() }
    }

    /// A reader whose connection is cut while a writer goes on: on each resume it gets a
    /// `.catchUp` folding the versions it missed, or, past the daemon's short history, a
    /// `.resync(.historyUnavailable)`, announced by an event each.
    @Test("a reader cut off again and again: catch-ups and resyncs pass the validator", .timeLimit(.minutes(2)), arguments: [1, 2, 3])
    func catchUpsAndResyncs(round: Int) async throws {
        let daemon = try DaemonProcess.start(arguments: ["--history-count", "24"])
        defer { daemon.stop() }
        let rooms = (0..<3).map { "churn-\(round)-\($0)" }
        let writer = try await connectedClient(daemon, "writer"), reader = try await connectedClient(daemon, "reader")
        let events = EventLog.start(reader)
        var logs: [String: ChangeLog] = [:]
        for room in rooms {
            _ = try await writer.join(room)
            logs[room] = ChangeLog.start(try await reader.join(room))
        }
        let done = Flag()
        let writing = Task {
            let applied = try await withThrowingTaskGroup(of: Int.self) { group in
                for (k, room) in rooms.enumerated() {
                    group.addTask { try await writeRandomBatches(writer, room, count: 1200, seed: UInt64(round * 100 + k + 1)) }
                }
                return try await group.reduce(0, +)
            }
            await done.set()
            return applied
        }
        // Cut the reader off for a few versions (a catch-up) or many (a resync), until the
        // writer is done.
        var cuts = 0
        let firstRoom = try #require(await writer.replica(rooms[0]))
        while true {
            let start = firstRoom.position.version
            await reader.dropConnection(reconnect: false)
            try await eventually("the reader reconnecting") { reader.state.isReconnecting }
            let gap = UInt64(cuts % 3 == 2 ? 40 : 3 + cuts % 12)
            var writerDone = false
            try await eventually("the writer \(gap) versions further") {
                writerDone = await done.isSet
                return writerDone || firstRoom.position.version >= start + gap
            }
            await reader.resumeReconnecting()
            try await eventually("the reader reconnected") { reader.state == .connected }
            cuts += 1
            if writerDone { break }
        }
        let applied = try await writing.value
        var catchUps = 0, resyncs = 0, folded = 0, changes = 0
        for room in rooms {
            let truth = try #require(await writer.replica(room)).position
            let stream = try await logs[room]!.wait(for: "the reader's \(room) at \(truth)") { $0.last?.position == truth }
            expectConsistentStream(stream, "reader/\(room)")
            catchUps += stream.filter { $0.kind == .catchUp }.count
            folded += stream.filter { $0.kind == .catchUp && $0.position.version > ($0.previousPosition?.version ?? 0) + 1 }.count
            resyncs += stream.filter { $0.kind == .resync(.historyUnavailable) }.count
            changes += stream.count
            expectLookupsMatch(try #require(await reader.replica(room)), "reader/\(room)")
        }
        let announced = await events.events.filter {
            if case .resyncing(_, .historyUnavailable) = $0 { true } else { false }
        }.count
        print(
            "catchUpsAndResyncs(\(round)): \(applied) batches applied, \(cuts) cuts, \(changes) changes validated "
                + "(\(catchUps) catch-ups, \(folded) folding several versions, \(resyncs) resyncs)")
        #expect(announced == resyncs, "every resync is announced by a .resyncing event")
        #expect(resyncs > 0)
        #expect(folded > 0)
        #expect(applied > 3000)
        await writer.close()
        await reader.close()
    }
}

/// Set once the writers are done.
private actor Flag {
    private(set) var isSet = false
    func set() { isSet = true }
}
