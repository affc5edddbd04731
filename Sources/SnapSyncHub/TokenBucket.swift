/// A token bucket refilled continuously: at most `capacity` tokens, `perSecond` more each second,
/// one taken per allowed request. The hub's rate limits are these: new rooms per principal
/// (`RoomCreationQuota`) and presence updates per connection (Hub+Presence.swift).
struct TokenBucket {
    private(set) var tokens: Double
    private(set) var refilled: ContinuousClock.Instant

    /// A full bucket, as of `now`.
    init(capacity: Double, now: ContinuousClock.Instant) {
        tokens = capacity
        refilled = now
    }

    /// Adds what accrued since the last refill, up to `capacity`. O(1).
    mutating func refill(capacity: Double, perSecond: Double, now: ContinuousClock.Instant) {
        let elapsed = now - refilled
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        tokens = min(capacity, tokens + max(0, seconds) * perSecond)
        refilled = now
    }

    /// Refills, then takes one token; false (nothing taken) when less than one is left. O(1).
    mutating func take(capacity: Double, perSecond: Double, now: ContinuousClock.Instant) -> Bool {
        refill(capacity: capacity, perSecond: perSecond, now: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
