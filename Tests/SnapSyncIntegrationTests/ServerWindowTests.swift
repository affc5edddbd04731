import Testing
import SnapSyncModel
import SnapSyncWire

// Windows against the real daemon (PROTOCOL.md §9 "Windows"): a member follows ten rows of a
// large room; a writer's changes above, inside and below the window reach it as WINDOW_DIFFs
// (or counts alone), and the window moves on request.

extension ServerIntegration {
    @Suite struct Windows {
        static func windowFrame(_ client: RawClient) throws -> Message {
            try client.receive(until: { $0.type == .windowDiff || $0.type == .windowState }, timeout: 10).0
        }

        @Test func aMemberFollowsTenRowsOfALargeRoom() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon), reader = try RawClient.ready(daemon, versions: [4])
            let items = (0..<5000).map { SnapshotElement(SnapshotIdentifier("i\($0)"), payload: SnapshotPayload(String(repeating: "p", count: 64))) }
            try writer.mustMutate("feed", [.appendSections([.named("s")]), .appendItems(items, toSection: "s")])

            let window = [SectionWindow(section: "s", range: .around(anchor: "i2500", before: 4, after: 5))]
            let (answer, _) = try reader.request { .window(requestID: $0, room: "feed", window: window) }
            guard case .windowState(_, "feed", _, 1, _, window, [5000], var replica) = answer else {
                Issue.record("expected WINDOW_STATE, got \(answer)")
                return
            }
            #expect(replica.rootItems(inSection: "s") == (2496...2505).map { SnapshotIdentifier("i\($0)") })
            // Ten rows of five thousand: the frame is a fraction of the room's.
            #expect(FrameEncoder().encode(answer).count < 2_000)

            // Inside: i2500's neighbour replaced; below: the count alone.
            try writer.mustMutate("feed", [.deleteItems(["i2501"])])
            guard case .windowDiff(0, _, _, 2, nil, [SectionCount(section: "s", items: 4999)], let ops) = try Self.windowFrame(reader) else {
                Issue.record("expected a WINDOW_DIFF")
                return
            }
            try replica.apply(ops)
            #expect(replica.rootItems(inSection: "s")?.last == "i2506")
            try writer.mustMutate("feed", [.appendItems([.named("end")], toSection: "s")])
            guard case .windowDiff(0, _, _, 3, nil, [SectionCount(section: "s", items: 5000)], []) = try Self.windowFrame(reader) else {
                Issue.record("expected counts alone")
                return
            }
            // Scroll: the first ten rows instead, answered by the WINDOW's own WINDOW_DIFF.
            let top = [SectionWindow(section: "s", range: .first(10))]
            let (moved, _) = try reader.request { .window(requestID: $0, room: "feed", window: top) }
            guard case .windowDiff(let id, _, _, 3, top?, [], let moveOps) = moved, id != 0 else {
                Issue.record("expected the WINDOW's WINDOW_DIFF, got \(moved)")
                return
            }
            try replica.apply(moveOps)
            #expect(replica.rootItems(inSection: "s") == (0..<10).map { SnapshotIdentifier("i\($0)") })
            #expect(replica.numberOfItems == 10)

            // Too many rows: refused, and the window stays.
            let (refused, _) = try reader.request { .window(requestID: $0, room: "feed", window: [SectionWindow(section: "s", range: .first(1001))]) }
            #expect(refused.errorCode == .windowTooLarge)
        }
    }
}
