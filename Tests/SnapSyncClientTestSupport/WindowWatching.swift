package import SnapSync
package import Testing

/// Collects a windowed replica's changes in the background.
package actor WindowLog {
    package private(set) var changes: [WindowChange] = []
    package private(set) var finished = false

    package static func start(_ replica: WindowedReplica) -> WindowLog {
        let log = WindowLog()
        let stream = replica.changes
        Task {
            for await change in stream { await log.append(change) }
            await log.finish()
        }
        return log
    }

    private func append(_ change: WindowChange) { changes.append(change) }
    private func finish() { finished = true }

    /// Waits until `condition` holds for the changes so far; returns them. `timeout` only
    /// stops a hang (see `hangBound`).
    package func wait(for what: String, timeout: Duration = hangBound, _ condition: ([WindowChange]) -> Bool) async throws -> [WindowChange] {
        let deadline = ContinuousClock.now + timeout
        while !condition(changes) {
            guard ContinuousClock.now < deadline else {
                throw TimedOut("\(what); changes so far: \(changes.map { "\($0.kind) v\($0.position.version) \($0.window)" })")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return changes
    }
}

/// What a server holds for one windowed member, and the messages it owes it: the room, the
/// effective window, and the window snapshot and counts it last sent (Protocol/PROTOCOL.md §9,
/// "Windows"). An independent statement of the rules: the window's rows from the model
/// (`RoomSnapshot.windowSnapshot`, `reanchored`), the ops as a REPLACE's (`difference(to:)`).
package struct WindowModel {
    package var room: RoomSnapshot
    package var window: [SectionWindow]
    package private(set) var held: RoomSnapshot
    package private(set) var counts: [SnapshotIdentifier: UInt64]

    package init(room: RoomSnapshot, window: [SectionWindow]) {
        self.room = room
        self.window = window
        held = room.windowSnapshot(window)
        counts = Self.counts(of: room)
    }

    package static func counts(of room: RoomSnapshot) -> [SnapshotIdentifier: UInt64] {
        Dictionary(uniqueKeysWithValues: zip(room.sectionIdentifiers, room.sectionItemCounts))
    }

    /// The counts in section order, as WINDOW_STATE sends them.
    package var orderedCounts: [UInt64] { room.sectionItemCounts }

    /// The room changed to `next`: the window re-anchored, and what a WINDOW_DIFF carries (nil
    /// when the member is owed none: nothing it holds changed).
    package mutating func change(to next: RoomSnapshot) -> (window: [SectionWindow]?, counts: [SectionCount], ops: [SnapshotOperation])? {
        let previousRows = window.map { room.windowRows($0) }
        let newWindow = zip(window, previousRows).map { next.reanchored($0, previousRows: $1) }
        return settle(room: next, window: newWindow)
    }

    /// The member asked for `newWindow`: the WINDOW_DIFF that answers it.
    package mutating func move(to newWindow: [SectionWindow]) -> (window: [SectionWindow]?, counts: [SectionCount], ops: [SnapshotOperation]) {
        let answer = settle(room: room, window: newWindow, force: true)!
        return (newWindow, answer.counts, answer.ops)
    }

    private mutating func settle(
        room next: RoomSnapshot, window newWindow: [SectionWindow], force: Bool = false
    ) -> (window: [SectionWindow]?, counts: [SectionCount], ops: [SnapshotOperation])? {
        let newHeld = next.windowSnapshot(newWindow)
        let newCounts = Self.counts(of: next)
        let ops = held.difference(to: newHeld)
        let changedCounts = next.sectionIdentifiers.compactMap { id in
            newCounts[id] != counts[id] || !held.contains(section: id) ? SectionCount(section: id, items: newCounts[id]!) : nil
        }
        let windowChanged = newWindow != window
        defer {
            room = next
            window = newWindow
            held = newHeld
            counts = newCounts
        }
        guard force || !ops.isEmpty || !changedCounts.isEmpty || windowChanged else { return nil }
        return (windowChanged ? newWindow : nil, changedCounts, ops)
    }
}

/// Checks a windowed replica's whole change stream: positions and windows follow each other, a
/// diff's operations take the previous window snapshot to its own, each change's index paths,
/// replayed on the previous rows as UIKit would (and through the adapters), give its rows, and
/// every section has a count no smaller than the items the window holds of it.
package func expectConsistentWindowStream(_ changes: [WindowChange], _ who: String, sourceLocation: SourceLocation = #_sourceLocation) {
    guard let first = changes.first else {
        Issue.record("\(who): no changes", sourceLocation: sourceLocation)
        return
    }
    #expect(first.kind == .initial, "\(who): the stream starts with the initial load", sourceLocation: sourceLocation)
    expectReplays(first.updates, from: RoomSnapshot(), to: first.snapshot, operations: [], "\(who): initial", sourceLocation: sourceLocation)
    for (previous, change) in zip(changes, changes.dropFirst()) {
        let what = "\(who): \(change.kind) v\(previous.position.version) → v\(change.position.version)"
        #expect(change.rows.previousPosition == previous.position, "\(what) follows", sourceLocation: sourceLocation)
        #expect(change.previousWindow == previous.window, "\(what): the previous window", sourceLocation: sourceLocation)
        if change.position.epoch == previous.position.epoch {
            #expect(change.position.version >= previous.position.version, "\(what): versions never go back", sourceLocation: sourceLocation)
        }
        switch change.kind {
        case .expansion:
            #expect(change.snapshot == previous.snapshot && change.position == previous.position, "\(what): only rows", sourceLocation: sourceLocation)
        case .diff, .moved:
            var replayed = previous.snapshot
            do {
                try replayed.apply(change.rows.operations, limits: .unlimited)
            } catch {
                Issue.record("\(what): the operations do not apply: \(error)", sourceLocation: sourceLocation)
            }
            #expect(replayed == change.snapshot, "\(what): the operations give the snapshot", sourceLocation: sourceLocation)
        default:
            break
        }
        expectReplays(
            change.updates, from: previous.rows.visibleSnapshot, to: change.rows.visibleSnapshot, operations: change.rows.operations, what,
            sourceLocation: sourceLocation)
        // The adapters take the visible rows (the window snapshot itself for a flat room).
        var shown = change.rows
        shown.snapshot = change.rows.visibleSnapshot
        expectAdapterReplays(shown, from: previous.rows.visibleSnapshot, what, sourceLocation: sourceLocation)
        expectDiffableUpdate(change.rows, from: previous.rows.visibleSnapshot, what, sourceLocation: sourceLocation)
    }
    for change in changes {
        for section in change.snapshot.sectionIdentifiers {
            guard let count = change.counts[section] else {
                Issue.record("\(who): v\(change.position.version): no count for \(section)", sourceLocation: sourceLocation)
                continue
            }
            #expect(
                count >= UInt64(change.snapshot.numberOfItems(inSection: section)!), "\(who): the count of \(section) covers the window",
                sourceLocation: sourceLocation)
        }
        #expect(change.counts.count == change.snapshot.numberOfSections, "\(who): counts only for the sections", sourceLocation: sourceLocation)
    }
    var positions = SnapshotPositions()
    for change in changes { positions.apply(change.rows) }
    if let last = changes.last {
        expectPositions(positions, match: last.rows.visibleSnapshot, "\(who): after v\(last.position.version)", sourceLocation: sourceLocation)
    }
}
