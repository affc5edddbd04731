import Dispatch
import NIOConcurrencyHelpers
@_spi(Testing) @testable import SnapSync
import SnapSyncClientTestSupport
import SnapSyncTestSupport
import SnapSyncWire
import Testing

// Windowed replicas (protocol version 4, PROTOCOL.md §9 "Windows") against a scripted server
// whose WINDOW_STATEs and WINDOW_DIFFs come from an independent model of the rules
// (`WindowModel`: the window's rows from the model, re-anchoring, ops as a REPLACE's), every
// change replayed as UIKit would (`expectConsistentWindowStream`).

extension ScriptedPeer {
    /// Expects a WINDOW of `room` asking for `window`; returns its request id.
    func expectWindow(_ room: String, _ window: [SectionWindow]) throws -> UInt64 {
        let message = try request()
        guard case .window(let requestID, room, let received) = message, received == window else {
            throw Failure(description: "expected WINDOW \(room) \(window), got \(message)")
        }
        return requestID
    }

    /// Expects a LEAVE of `room` and acknowledges it.
    func expectLeave(_ room: String) throws {
        let message = try request()
        guard case .leave(let requestID, room) = message else { throw Failure(description: "expected LEAVE \(room), got \(message)") }
        send(.ack(requestID: requestID, epoch: 0, version: 0))
    }

    /// WINDOW_STATE of `model`'s window, room at `version`.
    func sendWindowState(_ requestID: UInt64, _ room: String, _ model: WindowModel, version: UInt64) {
        send(
            .windowState(
                requestID: requestID, room: room, epoch: 7, version: version, chain: .unknown, window: model.window, counts: model.orderedCounts,
                snapshot: model.held))
    }

    func sendWindowDiff(
        _ requestID: UInt64, _ room: String, version: UInt64, _ diff: (window: [SectionWindow]?, counts: [SectionCount], ops: [SnapshotOperation])
    ) {
        send(.windowDiff(requestID: requestID, room: room, epoch: 7, version: version, window: diff.window, counts: diff.counts, ops: diff.ops))
    }
}

private func items(_ prefix: String, _ range: Range<Int>) -> [SnapshotElement] {
    range.map { SnapshotElement(SnapshotIdentifier("\(prefix)\($0)")) }
}

private func around(_ section: SnapshotIdentifier, _ anchor: SnapshotIdentifier, _ before: UInt64, _ after: UInt64) -> SectionWindow {
    SectionWindow(section: section, range: .around(anchor: anchor, before: before, after: after))
}

private func first(_ section: SnapshotIdentifier, _ count: UInt64) -> SectionWindow {
    SectionWindow(section: section, range: .first(count))
}

@Suite("Client: windowed replicas")
struct ClientWindowTests {
    @Test(
        "join a window; writes above, inside and below it, an untouched one skipped, the anchor deleted (re-anchored); move, extend (answered by a WINDOW_STATE), a refused move; a diff that does not apply → LEAVE + WINDOW (.resync); reconnect → WINDOW again, its anchor gone → re-anchored by the client (.reloaded); leave",
        .timeLimit(.minutes(5)))
    func lifecycle() async throws {
        let peer = try ScriptedPeer()
        let room = "feed"
        let room0 = try RoomSnapshot([(SnapshotElement("s"), items("i", 0..<20)), (SnapshotElement("t"), items("t", 0..<5))])
        let window0 = [around("s", "i10", 2, 2)]
        let watching = DispatchSemaphore(value: 0)
        let expected = NIOLockedValueBox<RoomSnapshot?>(nil)
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(version: 4)
            var model = WindowModel(room: room0, window: window0)
            var version: UInt64 = 1
            var request = try peer.expectWindow(room, window0)
            peer.sendWindowState(request, room, model, version: version)
            guard watching.wait(timeout: .now() + hangBound.seconds) == .success else {
                throw ScriptedPeer.Failure(description: "the test never watched")
            }
            func write(_ ops: [SnapshotOperation]) throws {
                var next = model.room
                try next.apply(ops, limits: .unlimited)
                version += 1
                if let diff = model.change(to: next) { peer.sendWindowDiff(0, room, version: version, diff) }
            }
            try write([.insertItems(["above"], .before("i0"))])  // a count only
            try write([.insertItems(["inside"], .after("i10"))])  // a row in, i12 out
            try write([.appendItems(["t5"], toSection: "t")])  // another section's count
            try write([.updateItems([SnapshotElement("i0", payload: "x")], .reload)])  // nothing held: no WINDOW_DIFF, a version skipped
            try write([.deleteItems(["i10"])])  // the anchor: the window moves to `inside`
            // move(to:) and extend(section:by:at:)
            request = try peer.expectWindow(room, [first("t", 3)])
            peer.sendWindowDiff(request, room, version: version, model.move(to: [first("t", 3)]))
            request = try peer.expectWindow(room, [first("t", 5)])
            _ = model.move(to: [first("t", 5)])
            peer.sendWindowState(request, room, model, version: version)  // in place of its WINDOW_DIFF
            // A move the server refuses: nothing changes.
            request = try peer.expectWindow(room, [first("s", 5000)])
            peer.send(.reject(requestID: request, code: ErrorCode.windowTooLarge.rawValue, opIndex: nil, identifier: nil, message: "5000 rows"))
            // A WINDOW_DIFF that does not apply: LEAVE, then WINDOW, answered by WINDOW_STATE.
            version += 1
            peer.send(.windowDiff(requestID: 0, room: room, epoch: 7, version: version, window: nil, counts: [], ops: [.deleteItems(["nope"])]))
            try peer.expectLeave(room)
            request = try peer.expectWindow(room, [first("t", 5)])
            peer.sendWindowState(request, room, model, version: version)
            request = try peer.expectWindow(room, [around("s", "i5", 1, 1)])
            peer.sendWindowDiff(request, room, version: version, model.move(to: [around("s", "i5", 1, 1)]))
            // The connection drops; meanwhile the anchor and the row after it go.
            try peer.accept()
            try peer.handshake(version: 4)
            var next = model.room
            try next.apply([.deleteItems(["i5", "i6"])], limits: .unlimited)
            version += 1
            request = try peer.expectWindow(room, [around("s", "i5", 1, 1)])
            peer.send(.reject(requestID: request, code: ErrorCode.anchorItemNotFound.rawValue, opIndex: nil, identifier: "i5", message: "gone"))
            request = try peer.expectWindow(room, [around("s", "i6", 1, 1)])
            peer.send(.reject(requestID: request, code: ErrorCode.anchorItemNotFound.rawValue, opIndex: nil, identifier: "i6", message: "gone"))
            request = try peer.expectWindow(room, [around("s", "i4", 1, 1)])
            model = WindowModel(room: next, window: [around("s", "i4", 1, 1)])
            peer.sendWindowState(request, room, model, version: version)
            expected.withLockedValue { $0 = model.held }
            try peer.expectLeave(room)
        }

        let client = SnapSyncClient(configuration: peer.configuration(reconnect: .init(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(50))))
        let events = EventLog.start(client)
        try await client.connect()
        let replica = try await client.joinWindow(room, window0)
        #expect(replica.window == window0)
        #expect(replica.snapshot.itemIdentifiers(inSection: "s") == ["i8", "i9", "i10", "i11", "i12"])
        #expect(replica.snapshot.itemIdentifiers(inSection: "t") == [])
        #expect(replica.count(ofSection: "s") == 20 && replica.count(ofSection: "t") == 5)
        #expect(replica.indexPath(for: "i10") == ItemIndexPath(item: 2, section: 0))
        #expect(replica.numberOfItems(inSection: 0) == 5 && replica.numberOfItems(inSection: 1) == 0)
        #expect(await client.windowedReplica(room) === replica)
        let log = WindowLog.start(replica)
        watching.signal()

        var changes = try await log.wait(for: "the re-anchoring") { $0.last?.window == [around("s", "inside", 2, 2)] }
        #expect(changes.map(\.kind) == [.initial, .diff, .diff, .diff, .diff])
        #expect(changes.map(\.position.version) == [1, 2, 3, 4, 6], "version 5 changed nothing held: skipped")
        #expect(changes[1].updates.isEmpty && changes[1].changedCounts == [SectionCount(section: "s", items: 21)])
        #expect(changes[2].updates.insertedItems == [ItemIndexPath(item: 3, section: 0)])
        #expect(changes[2].updates.deletedItems == [ItemIndexPath(item: 4, section: 0)])
        #expect(changes[3].changedCounts == [SectionCount(section: "t", items: 6)] && changes[3].counts["t"] == 6)
        #expect(changes[4].windowChanged && replica.snapshot.itemIdentifiers(inSection: "s") == ["i8", "i9", "inside", "i11", "i12"])

        try await replica.move(to: [first("t", 3)])
        #expect(replica.window == [first("t", 3)])
        #expect(replica.snapshot.itemIdentifiers(inSection: "s") == [] && replica.snapshot.itemIdentifiers(inSection: "t") == ["t0", "t1", "t2"])
        #expect(try await replica.extend(section: "t", by: 2))
        #expect(replica.snapshot.itemIdentifiers(inSection: "t") == ["t0", "t1", "t2", "t3", "t4"])
        #expect(try await !replica.extend(section: "t", by: 2, at: .start), "a first window starts with its section")
        do throws(SnapSyncError) {
            try await replica.move(to: [first("s", 5000)])
            Issue.record("a refused move succeeded")
        } catch {
            #expect(error.code == .windowTooLarge)
        }
        #expect(replica.window == [first("t", 5)], "a refused move changes nothing")

        changes = try await log.wait(for: "the resync") { $0.last?.rows.kind.isResync == true }
        #expect(changes.last?.kind == .resync(.diffFailed(BatchError(operationIndex: 0, violation: .itemNotFound("nope")))))
        #expect(changes.last?.updates.isEmpty == true, "the fresh state held what the replica had")
        try await replica.move(to: [around("s", "i5", 1, 1)])
        #expect(replica.snapshot.itemIdentifiers(inSection: "s") == ["i4", "i5", "i6"])

        await client.dropConnection()
        changes = try await log.wait(for: "the reload after the reconnect") { $0.last?.kind == .reloaded }
        #expect(replica.window == [around("s", "i4", 1, 1)])
        #expect(replica.snapshot == expected.withLockedValue { $0 })
        #expect(replica.snapshot.itemIdentifiers(inSection: "s") == ["i3", "i4", "i7"])
        #expect(changes.map(\.kind).filter { $0 == .moved }.count == 3)
        expectConsistentWindowStream(changes, "scripted")

        try await replica.leave()
        try await eventually("the stream finishes") { await log.finished }
        #expect(await client.windowedReplica(room) == nil)
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        let resyncs = await events.events.compactMap { if case .resyncing(_, let reason) = $0 { reason } else { nil } }
        #expect(resyncs.count == 1)
        await client.close()
    }

    @Test(
        "random writes: the replica follows the model server's WINDOW_DIFFs (re-anchorings included) and WINDOW_STATEs in their place, every change replays in UIKit",
        .timeLimit(.minutes(5)))
    func randomWrites() async throws {
        for seed in UInt64(1)...6 { _ = try await randomRun(seed: seed, outline: false) }
    }

    @Test(
        "random outline writes: the window's rows are roots with their subtrees; some expanded, some not; every change replays in UIKit",
        .timeLimit(.minutes(5)))
    func randomOutlineWrites() async throws {
        var outlines = 0
        for seed in UInt64(11)...16 where try await randomRun(seed: seed, outline: true) { outlines += 1 }
        #expect(outlines >= 3, "most runs start from a window snapshot with children")
    }

    /// Returns whether the initial window snapshot was an outline.
    @discardableResult
    private func randomRun(seed: UInt64, outline: Bool) async throws -> Bool {
        do {
            var random = RandomBatches(seed: seed, sectionPool: 5, itemPool: 30, allowsDeleteAll: false)
            var room0 = random.snapshot()
            while room0.numberOfItems == 0 { room0 = random.snapshot() }
            if outline { room0 = random.outlineBatch(on: room0, count: 6).result }
            var window: [SectionWindow] = []
            for section in room0.sectionIdentifiers {
                let rows = room0.windowRoots(inSection: section)
                switch Int.random(in: 0..<4, using: &random.random) {
                case 0: window.append(SectionWindow(section: section, range: .first(UInt64.random(in: 0...4, using: &random.random))))
                case 1: window.append(SectionWindow(section: section, range: .last(UInt64.random(in: 1...4, using: &random.random))))
                case 2 where !rows.isEmpty:
                    window.append(
                        around(
                            section, rows.randomElement(using: &random.random)!, UInt64.random(in: 0...2, using: &random.random),
                            UInt64.random(in: 0...2, using: &random.random)))
                default: break
                }
            }
            // A section that does not exist yet: empty until it does.
            if !room0.contains(section: RandomBatches.id("s", 4)) { window.append(first(RandomBatches.id("s", 4), 3)) }
            var model = WindowModel(room: room0, window: window)
            var steps: [(version: UInt64, diff: (window: [SectionWindow]?, counts: [SectionCount], ops: [SnapshotOperation]), state: WindowModel)] = []
            var version: UInt64 = 1
            for _ in 0..<80 {
                var next = model.room
                if outline {
                    next = random.outlineBatch(on: next, count: Int.random(in: 1...3, using: &random.random)).result
                    guard next != model.room else { continue }
                } else {
                    let operation = random.operation(on: next)
                    guard (try? next.apply([operation], limits: .unlimited)) != nil else { continue }
                }
                version += 1
                if let diff = model.change(to: next) { steps.append((version, diff, model)) }
            }
            let final = model.held, finalWindow = model.window
            let initial = WindowModel(room: room0, window: window)
            let asked = window
            let peer = try ScriptedPeer()
            let watching = DispatchSemaphore(value: 0)
            let script = play(peer) { [steps] peer in
                try peer.accept()
                try peer.handshake(version: 4)
                let request = try peer.expectWindow("r", asked)
                peer.sendWindowState(request, "r", initial, version: 1)
                guard watching.wait(timeout: .now() + hangBound.seconds) == .success else {
                    throw ScriptedPeer.Failure(description: "the test never watched")
                }
                for (k, step) in steps.enumerated() {
                    // In place of a WINDOW_DIFF, a server may send the whole state.
                    if k % 7 == 3 {
                        peer.sendWindowState(0, "r", step.state, version: step.version)
                    } else {
                        peer.sendWindowDiff(0, "r", version: step.version, step.diff)
                    }
                }
            }
            let client = SnapSyncClient(configuration: peer.configuration())
            try await client.connect()
            let replica = try await client.joinWindow("r", asked)
            let log = WindowLog.start(replica)
            // This viewer expands every other root it holds (the children of others stay hidden).
            let expanded = outline ? replica.snapshot.itemIdentifiers.enumerated().filter { $0.offset % 2 == 0 }.map(\.element) : []
            if outline { replica.expand(expanded) }
            watching.signal()
            let last = steps.last?.version ?? 1
            let changes = try await log.wait(for: "seed \(seed): version \(last)") { $0.last?.position.version == last }
            let expansions = outline && initial.held.isOutline ? 1 : 0
            #expect(changes.count == steps.count + 1 + expansions, "seed \(seed): one change per WINDOW_DIFF, none a resync")
            #expect(replica.snapshot == final, "seed \(seed)")
            #expect(replica.window == finalWindow, "seed \(seed)")
            #expect(replica.counts == WindowModel.counts(of: model.room), "seed \(seed)")
            expectConsistentWindowStream(changes, "seed \(seed)")
            let failure = await script.value
            #expect(failure == nil, "seed \(seed): \(failure ?? "")")
            await client.close()
            return initial.held.isOutline
        }
    }

    @Test(
        "a live frame at the version the replica holds is taken; one of an older version or another epoch → LEAVE + WINDOW (.resync(outOfSequence))",
        .timeLimit(.minutes(2)))
    func outOfSequence() async throws {
        let peer = try ScriptedPeer()
        let room0 = try RoomSnapshot([(SnapshotElement("s"), items("i", 0..<10))])
        let watching = DispatchSemaphore(value: 0)
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(version: 4)
            var model = WindowModel(room: room0, window: [first("s", 3)])
            var request = try peer.expectWindow("r", [first("s", 3)])
            peer.sendWindowState(request, "r", model, version: 5)
            guard watching.wait(timeout: .now() + hangBound.seconds) == .success else {
                throw ScriptedPeer.Failure(description: "the test never watched")
            }
            var next = model.room
            try next.apply([.appendItems(["i10"], toSection: "s")], limits: .unlimited)
            peer.sendWindowDiff(0, "r", version: 5, model.change(to: next)!)  // counts held back until a frame at 5
            peer.send(.windowDiff(requestID: 0, room: "r", epoch: 7, version: 4, window: nil, counts: [], ops: []))
            try peer.expectLeave("r")
            request = try peer.expectWindow("r", [first("s", 3)])
            peer.sendWindowState(request, "r", model, version: 6)
            peer.send(.windowDiff(requestID: 0, room: "r", epoch: 8, version: 1, window: nil, counts: [], ops: []))
            try peer.expectLeave("r")
            request = try peer.expectWindow("r", [first("s", 3)])
            peer.send(
                .windowState(
                    requestID: request, room: "r", epoch: 8, version: 1, chain: .unknown, window: model.window, counts: model.orderedCounts,
                    snapshot: model.held))
        }
        let client = SnapSyncClient(configuration: peer.configuration())
        try await client.connect()
        let replica = try await client.joinWindow("r", [first("s", 3)])
        let log = WindowLog.start(replica)
        watching.signal()
        let changes = try await log.wait(for: "epoch 8") { $0.last?.position.epoch == 8 }
        #expect(
            changes.map(\.kind) == [
                .initial, .diff, .resync(.outOfSequence(expected: RoomPosition(epoch: 7, version: 5), received: RoomPosition(epoch: 7, version: 4))),
                .resync(.outOfSequence(expected: RoomPosition(epoch: 7, version: 6), received: RoomPosition(epoch: 8, version: 1))),
            ])
        #expect(changes[1].counts["s"] == 11 && changes[1].position.version == 5)
        expectConsistentWindowStream(changes, "out of sequence")
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        await client.close()
    }

    @Test(
        "a reconnect to a server of protocol version 3 loses the window: roomLost with unsupportedByServer, the stream finishes",
        .timeLimit(.minutes(2)))
    func failoverToAnOlderServer() async throws {
        let peer = try ScriptedPeer()
        let room0 = try RoomSnapshot([(SnapshotElement("s"), items("i", 0..<5))])
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(version: 4)
            let request = try peer.expectWindow("r", [first("s", 2)])
            peer.sendWindowState(request, "r", WindowModel(room: room0, window: [first("s", 2)]), version: 1)
            try peer.accept()
            try peer.handshake(version: 3)
            // Nothing more: a WINDOW would be a frame version 3 does not have.
            let next = try peer.request()
            guard case .mutate(let write, "r", _, _, _) = next else { throw ScriptedPeer.Failure(description: "expected MUTATE, got \(next)") }
            peer.send(.ack(requestID: write, epoch: 7, version: 2))
        }
        let client = SnapSyncClient(configuration: peer.configuration(reconnect: .init(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(50))))
        let events = EventLog.start(client)
        try await client.connect()
        let replica = try await client.joinWindow("r", [first("s", 2)])
        let log = WindowLog.start(replica)
        await client.dropConnection()
        try await eventually("the stream finishes") { await log.finished }
        let lost = await events.events.compactMap { if case .roomLost(let room, let error) = $0 { (room, error) } else { nil } }
        #expect(lost.count == 1 && lost.first?.0 == "r" && lost.first?.1.kind == .unsupportedByServer)
        #expect(await client.windowedReplica("r") == nil)
        try await client.mutate("r", [.appendItems(["i5"], toSection: "s")])
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        await client.close()
    }

    @Test("on a protocol version 3 connection, joinWindow throws unsupportedByServer and sends nothing", .timeLimit(.minutes(2)))
    func olderServer() async throws {
        let peer = try ScriptedPeer()
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(version: 3)
            let next = try peer.request()
            guard case .mutate(let request, "r", _, _, _) = next else { throw ScriptedPeer.Failure(description: "expected MUTATE, got \(next)") }
            peer.send(.ack(requestID: request, epoch: 7, version: 1))
        }
        let client = SnapSyncClient(configuration: peer.configuration())
        try await client.connect()
        do throws(SnapSyncError) {
            _ = try await client.joinWindow("r", [first("s", 10)])
            Issue.record("a window joined over version 3")
        } catch {
            #expect(error.kind == .unsupportedByServer)
            #expect("\(error)".contains("windows need 4"))
        }
        #expect(await client.windowedReplica("r") == nil)
        try await client.mutate("r", [.appendSections(["s"])])
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        await client.close()
    }

    @Test(
        "a room joined whole becomes windowed (WINDOW_STATE; the RoomReplica finishes), and a windowed one whole again (JOIN, SNAPSHOT)",
        .timeLimit(.minutes(2)))
    func switchingWays() async throws {
        let peer = try ScriptedPeer()
        let snapshot = try RoomSnapshot([(SnapshotElement("s"), items("i", 0..<10))])
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(version: 4)
            var request = try peer.expectJoin("r", resume: nil)
            peer.send(
                .snapshot(
                    requestID: request, room: "r", epoch: 7, version: 1, reason: .initial, digest: snapshot.digest, snapshot: snapshot,
                    chain: RoomChain.start(epoch: 7)))
            request = try peer.expectWindow("r", [first("s", 2)])
            peer.sendWindowState(request, "r", WindowModel(room: snapshot, window: [first("s", 2)]), version: 1)
            request = try peer.expectJoin("r", resume: nil)
            peer.send(
                .snapshot(
                    requestID: request, room: "r", epoch: 7, version: 1, reason: .initial, digest: snapshot.digest, snapshot: snapshot,
                    chain: RoomChain.start(epoch: 7)))
        }
        let client = SnapSyncClient(configuration: peer.configuration())
        try await client.connect()
        let whole = try await client.join("r")
        let changes = ChangeLog.start(whole)
        let windowed = try await client.joinWindow("r", [first("s", 2)])
        #expect(windowed.snapshot.itemIdentifiers == ["i0", "i1"])
        #expect(await client.replica("r") == nil)
        try await eventually("the room replica's stream finishes") { await changes.finished }
        let log = WindowLog.start(windowed)
        let again = try await client.join("r")
        #expect(again.snapshot == snapshot)
        #expect(await client.windowedReplica("r") == nil)
        try await eventually("the windowed replica's stream finishes") { await log.finished }
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        await client.close()
    }
}

@Suite("Client: growing windows and prefetching")
struct ClientWindowPrefetchTests {
    @Test(
        "extended: first/last/around grow at their open end, not at the end they hold; a new section starts; past the budget the window slides around its last (first) row"
    )
    func extending() {
        let rows: [SnapshotIdentifier] = ["a", "b", "c"]
        func grow(_ window: [SectionWindow], _ added: UInt64, _ edge: WindowEdge = .end, budget: UInt64 = 1000) -> [SectionWindow] {
            WindowedReplica.extended(window, section: "s", by: added, at: edge, rows: rows, budget: budget)
        }
        #expect(grow([first("s", 3)], 100) == [first("s", 103)])
        #expect(grow([first("s", 3)], 100, .start) == [first("s", 3)])
        #expect(grow([SectionWindow(section: "s", range: .last(3))], 10, .start) == [SectionWindow(section: "s", range: .last(13))])
        #expect(grow([SectionWindow(section: "s", range: .last(3))], 10) == [SectionWindow(section: "s", range: .last(3))])
        #expect(grow([around("s", "b", 1, 1)], 5) == [around("s", "b", 1, 6)])
        #expect(grow([around("s", "b", 1, 1)], 5, .start) == [around("s", "b", 6, 1)])
        #expect(grow([first("t", 7)], 5) == [first("t", 7), first("s", 5)])
        #expect(grow([first("t", 7)], 5, .start) == [first("t", 7), SectionWindow(section: "s", range: .last(5))])
        #expect(grow([first("t", 7)], 5, budget: 10) == [first("t", 7), first("s", 3)], "what the budget leaves")
        #expect(grow([first("t", 10)], 5, budget: 10) == [first("t", 10)], "no room")
        #expect(grow([first("s", 3)], 0) == [first("s", 3)])
        // Sliding: 3 rows held, budget 6, 5 more asked: the last row, 5 after it, none kept before.
        #expect(grow([first("s", 3)], 5, budget: 6) == [around("s", "c", 0, 5)])
        #expect(grow([first("s", 3)], 2, budget: 6) == [first("s", 5)], "it fits: it grows")
        #expect(grow([first("s", 5)], 4, budget: 6) == [around("s", "c", 1, 4)])
        #expect(grow([around("s", "b", 1, 1)], 10, .start, budget: 4) == [around("s", "a", 3, 0)])
        #expect(grow([first("t", 2), first("s", 3)], 4, budget: 6) == [first("t", 2), around("s", "c", 0, 3)])
    }

    @Test("reanchor: the first row after the missing anchor, then the last before it, that the server has not refused; else the section's first rows")
    func reanchoring() throws {
        let held = try RoomSnapshot([(SnapshotElement("s"), items("i", 0..<4)), (SnapshotElement("t"), items("t", 0..<2))])
        var tried: Set<SnapshotIdentifier> = []
        let window = [around("s", "i1", 1, 2), first("t", 2)]
        #expect(SnapSyncClient.reanchor(window, missing: "zz", tried: &tried, in: held) == nil)
        let once = try #require(SnapSyncClient.reanchor(window, missing: "i1", tried: &tried, in: held))
        #expect(once == [around("s", "i2", 1, 2), first("t", 2)])
        let twice = try #require(SnapSyncClient.reanchor(once, missing: "i2", tried: &tried, in: held))
        #expect(twice == [around("s", "i3", 1, 2), first("t", 2)])
        let thrice = try #require(SnapSyncClient.reanchor(twice, missing: "i3", tried: &tried, in: held))
        #expect(thrice == [around("s", "i0", 1, 2), first("t", 2)])
        let last = try #require(SnapSyncClient.reanchor(thrice, missing: "i0", tried: &tried, in: held))
        #expect(last == [first("s", 4), first("t", 2)])
    }

    /// A replica holding `model`'s window, as after its WINDOW_STATE.
    private func replica(_ model: WindowModel) -> WindowedReplica {
        let replica = WindowedReplica(room: "r")
        replica.publish(
            WindowChange(
                kind: .initial,
                rows: RoomChange(
                    kind: .initial, room: "r", previousPosition: nil, position: RoomPosition(epoch: 1, version: 1), operations: [],
                    snapshot: model.held, updates: BatchUpdates(from: RoomSnapshot(), to: model.held)),
                previousWindow: nil, window: model.window, counts: WindowModel.counts(of: model.room), changedCounts: []))
        return replica
    }

    @Test("rows(inSection:): what the window holds, and whether it reaches each end of the room's section")
    func sectionRows() throws {
        let room = try RoomSnapshot([
            (SnapshotElement("s"), items("i", 0..<50)), (SnapshotElement("t"), items("t", 0..<3)), (SnapshotElement("u"), items("u", 0..<9)),
        ])
        let held = replica(
            WindowModel(room: room, window: [first("s", 10), first("t", 10), SectionWindow(section: "u", range: .last(2))]))
        let s = try #require(held.rows(inSection: 0))
        #expect(s.rows == 10 && s.items == 10 && s.count == 50 && s.hasMore && s.reachesStart && !s.reachesEnd)
        let t = try #require(held.rows(inSection: 1))
        #expect(t.rows == 3 && !t.hasMore && t.reachesStart && t.reachesEnd)
        let u = try #require(held.rows(inSection: 2))
        #expect(u.rows == 2 && u.hasMore && !u.reachesStart && u.reachesEnd)
        #expect(held.rows(inSection: 3) == nil)
        let middle = replica(WindowModel(room: room, window: [around("s", "i1", 3, 2)]))
        let m = try #require(middle.rows(inSection: 0))
        #expect(m.rows == 4 && m.reachesStart && !m.reachesEnd)
        #expect(try #require(middle.rows(inSection: 1)).window == nil)
        let end = replica(WindowModel(room: room, window: [around("s", "i48", 3, 2)]))
        let e = try #require(end.rows(inSection: 0))
        #expect(e.rows == 5 && !e.reachesStart && e.reachesEnd)
    }

    @Test("the policy extends a section near its window's open end while the room holds more; at the start only when asked")
    func policy() throws {
        let room = try RoomSnapshot([(SnapshotElement("s"), items("i", 0..<500)), (SnapshotElement("t"), items("t", 0..<30))])
        let held = replica(WindowModel(room: room, window: [first("s", 100), first("t", 100)]))
        let policy = WindowPrefetchPolicy(distance: 20, batchSize: 50)
        func decide(_ paths: [(Int, Int)], _ policy: WindowPrefetchPolicy = policy, _ replica: WindowedReplica? = nil) -> [WindowExtension] {
            let replica = replica ?? held
            return policy.extensions(for: paths.map { ItemIndexPath(item: $0.1, section: $0.0) }) { replica.rows(inSection: $0) }
        }
        #expect(decide([(0, 10), (0, 79)]) == [])
        #expect(decide([(0, 10), (0, 80)]) == [WindowExtension(section: "s", edge: .end, rows: 50)])
        #expect(decide([(1, 29)]) == [], "t is whole")
        #expect(
            decide([(0, 99), (0, 0)], WindowPrefetchPolicy(distance: 20, batchSize: 50, extendsAtStart: true)) == [
                WindowExtension(section: "s", edge: .end, rows: 50)
            ], "a first window starts with its section")
        let middle = replica(WindowModel(room: room, window: [around("s", "i250", 50, 49)]))
        #expect(
            decide([(0, 0), (0, 99)], WindowPrefetchPolicy(distance: 20, batchSize: 50, extendsAtStart: true), middle) == [
                WindowExtension(section: "s", edge: .end, rows: 50), WindowExtension(section: "s", edge: .start, rows: 50),
            ])
        #expect(decide([(0, 5)], policy, middle) == [], "the start only when asked")
        #expect(decide([(7, 5)]) == [], "no such section")
    }

    @Test("the prefetcher runs one extension per section end at a time, and keeps the last error")
    func prefetcher() async throws {
        let room = try RoomSnapshot([(SnapshotElement("s"), items("i", 0..<500))])
        let held = replica(WindowModel(room: room, window: [first("s", 100)]))
        let gate = DispatchSemaphore(value: 0)
        let runs = NIOLockedValueBox<[WindowExtension]>([])
        let prefetcher = WindowPrefetcher(held, policy: WindowPrefetchPolicy(distance: 10, batchSize: 100)) { extension_ in
            runs.withLockedValue { $0.append(extension_) }
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    gate.wait()
                    continuation.resume()
                }
            }
            return .timedOut("scripted")
        }
        #expect(prefetcher.prefetch([ItemIndexPath(item: 50, section: 0)]) == [])
        #expect(prefetcher.displaying(ItemIndexPath(item: 95, section: 0)) == [WindowExtension(section: "s", edge: .end, rows: 100)])
        #expect(prefetcher.isExtending)
        #expect(prefetcher.prefetch([ItemIndexPath(item: 99, section: 0)]) == [], "already running")
        gate.signal()
        try await eventually("the extension ends") { !prefetcher.isExtending }
        #expect(prefetcher.lastError?.kind == .timedOut)
        #expect(prefetcher.prefetch([ItemIndexPath(item: 99, section: 0)]).count == 1, "tried again")
        gate.signal()
        try await eventually("the extension ends") { !prefetcher.isExtending }
        #expect(runs.withLockedValue { $0.count } == 2)
    }
}
