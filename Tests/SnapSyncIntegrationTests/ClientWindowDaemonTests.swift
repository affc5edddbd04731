@_spi(Testing) import SnapSync
import SnapSyncClientTestSupport
import Testing

// Windowed replicas (protocol version 4) through the client library against the real
// snapsyncd: a reader follows a few rows of a 1,000-item room while a writer changes it above,
// inside and below the window. What the reader holds is checked against a full replica of the
// room (its `windowSnapshot` of the reader's effective window, its counts) once both are at the
// same version; every change is replayed as UIKit would. Counts-only frames may lag (the
// daemon's `--window-counts-interval`): the tests wait for them, never for a time.

private func around(_ anchor: SnapshotIdentifier, _ before: UInt64, _ after: UInt64) -> SectionWindow {
    SectionWindow(section: "feed", range: .around(anchor: anchor, before: before, after: after))
}

private func posts(_ range: Range<Int>) -> [SnapshotElement] {
    range.map { SnapshotElement(SnapshotIdentifier("p\($0)"), payload: SnapshotPayload("post \($0)")) }
}

/// Waits until the windowed replica holds what the full replica's room shows through its
/// effective window, with the room's counts (at the room's version, or an earlier one after
/// which nothing it holds changed: its versions skip those). Call it once the writes are done.
private func expectFollows(_ windowed: WindowedReplica, _ full: RoomReplica, _ what: String) async throws {
    try await eventually("\(what): the window follows the room") {
        let room = full.current, window = windowed.current
        guard room.position.epoch == window.position.epoch, window.position.version <= room.position.version else { return false }
        let counts = Dictionary(uniqueKeysWithValues: zip(room.snapshot.sectionIdentifiers, room.snapshot.sectionItemCounts))
        return window.snapshot == room.snapshot.windowSnapshot(window.window) && window.counts == counts
    }
}

@Suite("Client windows against the real daemon", .serialized)
struct ClientWindowDaemonTests {
    @Test(
        "a window of a 1,000-item room: writes above, inside and below it, counts, extend, the anchor deleted (re-anchored), move, a reconnect (.reloaded), leave",
        .timeLimit(.minutes(5)))
    func followAWindow() async throws {
        let daemon = try DaemonProcess.start(arguments: ["--window-counts-interval", "10ms"])
        defer { daemon.stop() }
        let room = "feed-room"
        let writer = try await connectedClient(daemon, "writer")
        try await writer.mutate(room, [.appendSections(["pinned", "feed"]), .appendItems(posts(0..<1000), toSection: "feed")])
        let full = try await writer.join(room)

        let reader = try await connectedClient(daemon, "reader")
        #expect(await reader.protocolVersion == 4)
        #expect(await reader.serverLimits.maxWindowRows == 1000)
        let windowed = try await reader.joinWindow(room, [around("p500", 2, 2)])
        #expect(windowed.window == [around("p500", 2, 2)])
        #expect(windowed.snapshot.itemIdentifiers(inSection: "feed") == ["p498", "p499", "p500", "p501", "p502"])
        #expect(windowed.snapshot.sectionIdentifiers == ["pinned", "feed"])
        #expect(windowed.count(ofSection: "feed") == 1000 && windowed.count(ofSection: "pinned") == 0)
        #expect(windowed.numberOfItems(inSection: 1) == 5)
        #expect(windowed.snapshot.payload(ofItem: "p500") == SnapshotPayload("post 500"))
        let log = WindowLog.start(windowed)

        // Above: the count alone.
        try await writer.mutate(room, [.insertItems(["above"], .before("p0"))])
        _ = try await log.wait(for: "the count after the insert above") { $0.last?.counts["feed"] == 1001 }
        #expect(windowed.snapshot.itemIdentifiers(inSection: "feed") == ["p498", "p499", "p500", "p501", "p502"])
        // Inside: a row comes in after the anchor, p502 goes.
        try await writer.mutate(room, [.insertItems([SnapshotElement("inside", payload: "new")], .after("p500"))])
        _ = try await log.wait(for: "the insert inside") { $0.last?.snapshot.contains(item: "inside") == true }
        #expect(windowed.snapshot.itemIdentifiers(inSection: "feed") == ["p498", "p499", "p500", "inside", "p501"])
        #expect(windowed.indexPath(for: "inside") == ItemIndexPath(item: 3, section: 1))
        // Below, and in another section: counts.
        try await writer.mutate(room, [.insertItems(["below"], .after("p999")), .appendItems(["pin"], toSection: "pinned")])
        _ = try await log.wait(for: "the counts after the insert below") { $0.last?.counts["feed"] == 1003 && $0.last?.counts["pinned"] == 1 }
        #expect(windowed.snapshot.itemIdentifiers(inSection: "pinned") == [], "a section the window does not name has no rows")
        // A payload inside the window: a reload of its row.
        try await writer.mutate(room, [.updateItems([SnapshotElement("p499", payload: "edited")], .reconfigure)])
        let edited = try await log.wait(for: "the edit") { $0.last?.snapshot.payload(ofItem: "p499") == SnapshotPayload("edited") }
        // The ops are the server's choice (PROTOCOL.md §11.31): a reload or a reconfigure.
        let refreshed = edited.last.map { $0.updates.reloadedItemIdentifiers + $0.updates.reconfiguredItemIdentifiers }
        #expect(refreshed == ["p499"])
        try await expectFollows(windowed, full, "after the writes")

        // "Three more rows after the last."
        #expect(try await windowed.extend(section: "feed", by: 3))
        #expect(windowed.window == [around("p500", 2, 5)])
        #expect(windowed.snapshot.itemIdentifiers(inSection: "feed") == ["p498", "p499", "p500", "inside", "p501", "p502", "p503", "p504"])
        #expect(await log.changes.last?.kind == .moved)
        #expect(windowed.rows(inSection: 1)?.reachesEnd == false)

        // The anchor deleted: the first row after it in the window becomes the anchor.
        try await writer.mutate(room, [.deleteItems(["p500"])])
        _ = try await log.wait(for: "the re-anchoring") { $0.last?.window == [around("inside", 2, 5)] }
        #expect(windowed.snapshot.itemIdentifiers(inSection: "feed") == ["p498", "p499", "inside", "p501", "p502", "p503", "p504", "p505"])
        try await expectFollows(windowed, full, "after the re-anchoring")

        // Moved elsewhere: the end of the feed and the pinned section.
        try await windowed.move(to: [SectionWindow(section: "feed", range: .last(3)), SectionWindow(section: "pinned", range: .first(10))])
        #expect(windowed.snapshot.itemIdentifiers(inSection: "feed") == ["p998", "p999", "below"])
        #expect(windowed.snapshot.itemIdentifiers(inSection: "pinned") == ["pin"])
        #expect(windowed.rows(inSection: 1)?.reachesEnd == true && windowed.rows(inSection: 1)?.reachesStart == false)

        // A reconnect: the window is asked for again (windows have no resume).
        await reader.dropConnection()
        let reloaded = try await log.wait(for: "the reload") { $0.last?.kind == .reloaded }
        #expect(reloaded.last?.updates.isEmpty == true, "nothing changed meanwhile")
        try await writer.mutate(room, [.appendItems(["newest"], toSection: "feed")])
        _ = try await log.wait(for: "the newest post") { $0.last?.snapshot.itemIdentifiers(inSection: "feed") == ["p999", "below", "newest"] }
        try await expectFollows(windowed, full, "after the reconnect")

        let changes = await log.changes
        expectConsistentWindowStream(changes, "reader")
        try await windowed.leave()
        try await eventually("the stream finishes") { await log.finished }
        #expect(await reader.windowedReplica(room) == nil)
        await reader.close()
        await writer.close()
    }

    @Test(
        "random batches of a writer: the window (an around window that re-anchors, a first window) follows the room's full replica; UIKit replays every change",
        .timeLimit(.minutes(5)))
    func randomWrites() async throws {
        let daemon = try DaemonProcess.start(arguments: ["--window-counts-interval", "10ms"])
        defer { daemon.stop() }
        let room = "random-window"
        let writer = try await connectedClient(daemon, "writer")
        var random = RandomBatches(seed: 4242, sectionPool: 4, itemPool: 80, allowsDeleteAll: false)
        var start = random.snapshot()
        while start.numberOfItems < 10 { start = random.snapshot() }
        try await writer.replace(room, with: start)
        let full = try await writer.join(room)
        let sections = full.snapshot.sectionIdentifiers
        let anchorSection = try #require(sections.first { (full.snapshot.numberOfItems(inSection: $0) ?? 0) > 0 })
        let anchor = try #require(full.snapshot.itemIdentifiers(inSection: anchorSection)?.first)
        var window = [SectionWindow(section: anchorSection, range: .around(anchor: anchor, before: 2, after: 3))]
        if let other = sections.first(where: { $0 != anchorSection }) { window.append(SectionWindow(section: other, range: .first(4))) }
        let reader = try await connectedClient(daemon, "reader")
        let windowed = try await reader.joinWindow(room, window)
        let log = WindowLog.start(windowed)
        for _ in 0..<60 {
            do {
                try await writer.perform(room) { batch in
                    for _ in 0..<Int.random(in: 1...3, using: &random.random) { try? batch.apply(random.operation(on: batch.snapshot)) }
                }
            } catch {
                // An empty or refused batch: the room is unchanged.
            }
        }
        try await expectFollows(windowed, full, "after 60 random batches")
        expectConsistentWindowStream(await log.changes, "reader")
        await reader.close()
        await writer.close()
    }

    @Test("max_window_rows: a window over it is refused (window_too_large); extend slides the window instead of passing it", .timeLimit(.minutes(5)))
    func windowLimit() async throws {
        let daemon = try DaemonProcess.start(arguments: ["--max-window-rows", "10", "--window-counts-interval", "10ms"])
        defer { daemon.stop() }
        let room = "limited"
        let writer = try await connectedClient(daemon, "writer")
        try await writer.mutate(room, [.appendSections(["feed"]), .appendItems(posts(0..<100), toSection: "feed")])
        let reader = try await connectedClient(daemon, "reader")
        #expect(await reader.serverLimits.maxWindowRows == 10)
        do throws(SnapSyncError) {
            _ = try await reader.joinWindow(room, [SectionWindow(section: "feed", range: .first(11))])
            Issue.record("a window over max_window_rows was followed")
        } catch {
            #expect(error.code == .windowTooLarge)
        }
        #expect(await reader.windowedReplica(room) == nil)
        let windowed = try await reader.joinWindow(room, [SectionWindow(section: "feed", range: .first(8))])
        // 8 + 4 > 10: around the last row, 4 after it, 5 kept before it.
        #expect(try await windowed.extend(section: "feed", by: 4))
        #expect(windowed.window == [around("p7", 5, 4)])
        #expect(windowed.snapshot.itemIdentifiers(inSection: "feed") == (2..<12).map { SnapshotIdentifier("p\($0)") })
        // The prefetcher, as a list scrolled to the last row would drive it.
        let prefetcher = WindowPrefetcher(windowed, policy: WindowPrefetchPolicy(distance: 3, batchSize: 5))
        #expect(prefetcher.prefetch([ItemIndexPath(item: 9, section: 0)]) == [WindowExtension(section: "feed", edge: .end, rows: 5)])
        try await eventually("the prefetched rows") { windowed.snapshot.itemIdentifiers(inSection: "feed")?.last == "p16" }
        try await eventually("the extension's end") { !prefetcher.isExtending }
        #expect(prefetcher.lastError == nil)
        #expect(windowed.window == [around("p11", 4, 5)])
        await reader.close()
        await writer.close()
    }
}
