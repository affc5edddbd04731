import SnapSync
import SnapSyncClientTestSupport
import Testing

// Outlines end to end: the seeds' outline screen written by one client through the real daemon,
// seen by a second one with its own expansion state, as UIKit would be told (visible rows).

@Suite("Client outlines against the real daemon", .serialized)
struct ClientOutlineDaemonTests {
    @Test("the seeds' outline screen, written by one client, is a tree of visible rows for another", .timeLimit(.minutes(2)))
    func outlineScreenAcrossClients() async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let writer = try await connectedClient(daemon, "writer")
        let viewer = try await connectedClient(daemon, "viewer")
        let room = "emoji"
        _ = try await writer.join(room)
        let replica = try await viewer.join(room)
        let log = ChangeLog.start(replica)

        try await writer.perform(room) { batch in
            try batch.appendSections(["outline"])
            try batch.appendItems(["smileys", "animals", "food"], toSection: "outline")
            try batch.appendChildren(["grin", "wink"], toParent: "smileys")
            try batch.appendChildren(["cat", "dog"], toParent: "animals")
            try batch.appendChildren(["tabby"], toParent: "cat")
        }
        var changes = try await log.wait(for: "the outline") { $0.last?.snapshot.numberOfItems == 8 }
        var last = changes.last!
        #expect(last.snapshot.children(of: "animals") == ["cat", "dog"])
        #expect(last.snapshot.level(of: "tabby") == 2)
        // Collapsed at first: the roots are the rows.
        #expect(replica.visibleItems == ["smileys", "animals", "food"])
        #expect(last.visibleSnapshot.itemIdentifiers == ["smileys", "animals", "food"])
        #expect(replica.sectionSnapshot(for: "outline")?.items == ["smileys", "grin", "wink", "animals", "cat", "tabby", "dog", "food"])

        replica.expand(["animals", "cat"])
        changes = try await log.wait(for: "the expansion") { $0.last?.kind == .expansion }
        let expansion = changes.last!
        expectReplays(expansion.updates, from: last.visibleSnapshot, to: expansion.visibleSnapshot, operations: [], "expand")
        #expect(replica.visibleItems == ["smileys", "animals", "cat", "tabby", "dog", "food"])
        last = expansion

        // Under a collapsed item: a version, no row.
        let count = changes.count
        try await writer.perform(room) { batch in try batch.appendChildren(["laugh"], toParent: "smileys") }
        changes = try await log.wait(for: "the hidden change") { $0.count > count }
        #expect(changes.last!.kind == .diff)
        #expect(changes.last!.updates.isEmpty)
        last = changes.last!

        // A subtree moved under another parent: rows move with it, UIKit takes the batch.
        try await writer.perform(room) { batch in try batch.moveItem("cat", toParent: "food") }
        changes = try await log.wait(for: "the move") { $0.last?.snapshot.parent(of: "cat") == "food" }
        let moved = changes.last!
        expectReplays(moved.updates, from: last.visibleSnapshot, to: moved.visibleSnapshot, operations: moved.operations, "move")
        // food is collapsed: cat and tabby are hidden now.
        #expect(replica.visibleItems == ["smileys", "animals", "dog", "food"])

        // A client joining later gets the hierarchy in its SNAPSHOT, and its own expansion.
        let late = try await connectedClient(daemon, "late")
        let lateReplica = try await late.join(room)
        #expect(lateReplica.snapshot == replica.snapshot)
        #expect(lateReplica.snapshot.digest == replica.snapshot.digest)
        #expect(lateReplica.visibleItems == ["smileys", "animals", "food"])

        await writer.close()
        await viewer.close()
        await late.close()
    }

    @Test("client.apply(_:to:in:) sets one section, hierarchy included, and leaves the others", .timeLimit(.minutes(2)))
    func applySectionSnapshot() async throws {
        let daemon = try DaemonProcess.start()
        defer { daemon.stop() }
        let writer = try await connectedClient(daemon, "writer")
        let viewer = try await connectedClient(daemon, "viewer")
        let room = "sections"
        _ = try await writer.join(room)
        let replica = try await viewer.join(room)
        let log = ChangeLog.start(replica)
        try await writer.perform(room) { batch in
            try batch.appendSections([SnapshotElement("outline", payload: "Outline"), "list"])
            try batch.appendItems(["old", "keep"], toSection: "outline")
            try batch.appendItems(["x"], toSection: "list")
        }
        var outline = SectionSnapshot()
        try outline.append(["fruit", "keep"])
        try outline.append(["apple", "pear"], to: "fruit")
        let position = try await writer.apply(outline, to: "outline", in: room)
        let changes = try await log.wait(for: "the section") { $0.last?.position == position }
        let change = changes.last!
        #expect(change.snapshot.sectionSnapshot(of: "outline") == outline)
        #expect(change.snapshot.itemIdentifiers(inSection: "list") == ["x"])
        #expect(change.snapshot.payload(ofSection: "outline") == "Outline")
        // Only that section's items: "old" deleted, "keep" kept (no insert of it).
        for op in change.operations {
            if case .appendItems(let e, _) = op { #expect(!e.map(\.id).contains("keep")) }
            if case .insertItems(let e, _) = op { #expect(!e.map(\.id).contains("keep")) }
        }
        #expect(change.operations.contains(.deleteItems(["old"])))
        // An item of another section is refused, as UIKit refuses it.
        var foreign = SectionSnapshot()
        try foreign.append(["x"])
        await #expect(throws: SnapSyncError.self) { try await writer.apply(foreign, to: "outline", in: room) }
        await writer.close()
        await viewer.close()
    }
}
