package import SnapSync

/// Collects a replica's presence updates in the background (`RoomReplica.presence`), and the
/// stream's end or failure.
package actor PresenceLog {
    package private(set) var updates: [PresenceUpdate] = []
    package private(set) var finished = false
    package private(set) var failure: SnapSyncError?

    package static func start(_ replica: RoomReplica) -> PresenceLog {
        let log = PresenceLog()
        let stream = replica.presence
        Task {
            var iterator = stream.makeAsyncIterator()
            do throws(SnapSyncError) {
                while let update = try await iterator.next() { await log.append(update) }
            } catch {
                await log.fail(error)
            }
            await log.finish()
        }
        return log
    }

    private func append(_ update: PresenceUpdate) { updates.append(update) }
    private func fail(_ error: SnapSyncError) { failure = error }
    private func finish() { finished = true }

    /// The set as of the last update.
    package var presence: PresenceSet? { updates.last?.presence }

    /// Waits until `condition` holds for the updates so far; returns them. `timeout` only stops
    /// a hang (see `hangBound`): a test never asserts that presence is quick.
    package func wait(
        for what: String, timeout: Duration = hangBound, _ condition: ([PresenceUpdate]) -> Bool
    ) async throws -> [PresenceUpdate] {
        let deadline = ContinuousClock.now + timeout
        while !condition(updates) {
            guard ContinuousClock.now < deadline, failure == nil, !finished else {
                throw TimedOut(
                    "\(what); failure \(failure.map { "\($0)" } ?? "none"), finished \(finished), updates so far: \(updates.map { "\($0.kind) \($0.presence.members.map { "\($0.memberID)/\($0.principal)" }) \($0.changes)" })"
                )
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return updates
    }
}
