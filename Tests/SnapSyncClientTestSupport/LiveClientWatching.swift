package import SnapSync
package import Testing

/// Collects a replica's changes in the background.
package actor ChangeLog {
    package private(set) var changes: [RoomChange] = []
    package private(set) var finished = false

    package static func start(_ replica: RoomReplica) -> ChangeLog {
        let log = ChangeLog()
        let stream = replica.changes
        Task {
            for await change in stream { await log.append(change) }
            await log.finish()
        }
        return log
    }

    private func append(_ change: RoomChange) { changes.append(change) }
    private func finish() { finished = true }

    /// Waits until `condition` holds for the changes so far; returns them. `timeout` only
    /// stops a hang (see `hangBound`).
    package func wait(
        for what: String, timeout: Duration = hangBound,
        _ condition: ([RoomChange]) -> Bool
    ) async throws -> [RoomChange] {
        let deadline = ContinuousClock.now + timeout
        while !condition(changes) {
            guard ContinuousClock.now < deadline else {
                throw TimedOut("\(what); changes so far: \(changes.map { "\($0.kind) v\($0.version)" })")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return changes
    }
}

/// Collects a client's events in the background.
package actor EventLog {
    package private(set) var events: [ClientEvent] = []

    package static func start(_ client: SnapSyncClient) -> EventLog {
        let log = EventLog()
        let stream = client.events
        Task { for await event in stream { await log.append(event) } }
        return log
    }

    private func append(_ event: ClientEvent) { events.append(event) }

    package var disconnections: [SnapSyncError] {
        events.compactMap { if case .disconnected(let why) = $0 { why } else { nil } }
    }
}

package struct TimedOut: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = "timed out waiting for \(description)" }
}

/// How long a test waits for an event before it gives up: long enough that no stall of a
/// loaded machine reaches it (other tests have kept this process from running for over 20 s on
/// 2 busy cores), so it only ends a hang. A test never asserts that something happens quickly.
package let hangBound: Duration = .seconds(180)

/// Polls `condition` until it holds or `timeout` (a hang bound) passes.
package func eventually(
    _ what: @autoclosure () -> String, timeout: Duration = hangBound,
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TimedOut(what()) }
        try await Task.sleep(for: .milliseconds(10))
    }
}

extension ConnectionState {
    package var isReconnecting: Bool {
        if case .reconnecting = self { return true }
        return false
    }
}

extension RoomChange.Kind {
    package var isResync: Bool {
        if case .resync = self { return true }
        return false
    }
}

/// Checks a replica's whole change stream: positions follow each other, and each change's
/// index paths, replayed on the previous snapshot as UIKit would, give the change's snapshot.
package func expectConsistentStream(_ changes: [RoomChange], _ who: String, sourceLocation: SourceLocation = #_sourceLocation) {
    guard let first = changes.first else {
        Issue.record("\(who): no changes", sourceLocation: sourceLocation)
        return
    }
    #expect(first.kind == .initial, "\(who): the stream starts with the initial load", sourceLocation: sourceLocation)
    expectReplays(first.updates, from: RoomSnapshot(), to: first.snapshot, operations: [], "\(who): initial", sourceLocation: sourceLocation)
    for (previous, change) in zip(changes, changes.dropFirst()) {
        #expect(
            change.previousPosition == previous.position, "\(who): \(change.kind) v\(change.version) follows v\(previous.version)",
            sourceLocation: sourceLocation)
        if change.kind == .diff {
            #expect(change.position.version == previous.position.version + 1, sourceLocation: sourceLocation)
        }
        var replayed = previous.snapshot
        if !change.kind.isResync {
            // A DIFF or catch-up carries the operations that made it.
            do {
                try replayed.apply(change.operations, limits: .unlimited)
            } catch {
                Issue.record("\(who): v\(change.version)'s operations do not apply: \(error)", sourceLocation: sourceLocation)
            }
            #expect(replayed == change.snapshot, "\(who): v\(change.version)'s operations give its snapshot", sourceLocation: sourceLocation)
        }
        expectReplays(
            change.updates, from: previous.snapshot, to: change.snapshot, operations: change.operations,
            "\(who): \(change.kind) v\(previous.version) → v\(change.version)", sourceLocation: sourceLocation)
        // What the adapters do with it: the batch-update steps, and the diffable data source's.
        expectAdapterReplays(change, from: previous.snapshot, "\(who): \(change.kind) v\(change.version)", sourceLocation: sourceLocation)
        expectDiffableUpdate(change, from: previous.visibleSnapshot, "\(who): \(change.kind) v\(change.version)", sourceLocation: sourceLocation)
    }
    // The lookups a data source makes, kept up to date change by change as an app would.
    var positions = SnapshotPositions()
    for change in changes { positions.apply(change) }
    if let last = changes.last { expectPositions(positions, match: last.snapshot, "\(who): after v\(last.version)", sourceLocation: sourceLocation) }
}
