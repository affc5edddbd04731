#if canImport(Foundation)
    import Foundation
#endif

/// The wall clock the client plans token refreshes by: a token's `exp` and `iat` count seconds
/// since 1970, so the refresh is due at a wall-clock time, not after a duration.
///
/// A seam for tests (`Configuration.clock`): with a clock they drive, a test refreshes a token
/// when it says so, instead of waiting for real time to reach a token's refresh margin, which a
/// loaded machine makes late by seconds. Apps use the system's (`SystemWallClock`).
package protocol WallClock: Sendable {
    /// Now, in seconds since 1970.
    func now() -> Double
    /// Returns once `now()` has reached `deadline` (seconds since 1970), at once if it has;
    /// throws `CancellationError` when the task is cancelled first.
    func sleep(until deadline: Double) async throws
}

/// The system's wall clock: `Date`, and `Task.sleep` for the time left.
package struct SystemWallClock: WallClock {
    package init() {}

    package func now() -> Double {
        #if canImport(Foundation)
            Date().timeIntervalSince1970
        #else
            // Without Foundation no token has a readable `exp` (TokenLifetime.swift), so nothing
            // is ever planned by this clock.
            0
        #endif
    }

    /// Sleeps the time left as a duration: a change of the system's time while asleep is not
    /// followed, which a refresh margin of up to 30 s absorbs.
    package func sleep(until deadline: Double) async throws {
        try await Task.sleep(for: .wallSeconds(deadline - now()))
    }
}

extension Duration {
    /// `seconds` (a `Double`, negative counting as 0) as a duration, for sleeping until a wall-clock time.
    static func wallSeconds(_ seconds: Double) -> Duration {
        .nanoseconds(Int64(min(max(0, seconds), 1e9) * 1e9))
    }
}
