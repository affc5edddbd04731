/// Which of `Configuration.endpoints` each connection attempt goes to (SnapSyncClient+Link.swift).
///
/// Attempts come in rounds: a round tries every endpoint once, in the configured order and
/// wrapping around. `connect()` starts a round at the first endpoint; every later round starts
/// after the endpoint that failed last (a connection that dropped is its endpoint failing), so
/// the endpoint that just failed is tried last, not first. O(1) per step, but for the list of a
/// round's failures, kept for the error that names them (O(endpoints)).
struct EndpointRotation: Sendable, Equatable {
    let count: Int
    /// The index of the endpoint of the attempt under way, or of the connection.
    private(set) var current = 0
    /// The indices of the endpoints that failed in this round, in the order they were tried.
    private(set) var failedInRound: [Int] = []

    /// A first round from the first endpoint.
    init(count: Int) {
        precondition(count > 0, "Configuration.endpoints is empty")
        self.count = count
    }

    /// Whether every endpoint failed in this round: the round is over.
    var roundIsOver: Bool { failedInRound.count >= count }

    /// The attempt at `current` failed: the next one goes to the next endpoint.
    mutating func attemptFailed() {
        failedInRound.append(current)
        current = (current + 1) % count
    }

    /// A new round, from `current` (the endpoint after the one that failed last).
    mutating func beginRound() {
        failedInRound = []
    }
}
