/// Each principal's allowance of new rooms (`--room-creations-per-minute`): a token bucket of
/// that many, refilled continuously, so a principal may create a burst of a minute's worth and
/// then one every 60/N seconds.
///
/// Only principals that created a room within the last minute have a bucket: a full bucket is
/// the same as none, and `prune` drops them, so the table holds at most one entry per principal
/// active in the last minute (without authentication a client names itself, so the quota is a
/// courtesy there: the server-wide limits are what hold).
struct RoomCreationQuota {
    private var buckets: [String: TokenBucket] = [:]

    /// Takes one creation from `principal`'s allowance as of `now`; false when it has none left.
    /// - Complexity: O(1).
    mutating func take(_ principal: String, perMinute: Int, now: ContinuousClock.Instant) -> Bool {
        let capacity = Double(perMinute)
        return buckets[principal, default: TokenBucket(capacity: capacity, now: now)]
            .take(capacity: capacity, perSecond: capacity / 60, now: now)
    }

    /// Whether `principal` has a creation left as of `now` (nothing is taken).
    /// - Complexity: O(1).
    func hasAllowance(_ principal: String, perMinute: Int, now: ContinuousClock.Instant) -> Bool {
        guard var bucket = buckets[principal] else { return true }
        bucket.refill(capacity: Double(perMinute), perSecond: Double(perMinute) / 60, now: now)
        return bucket.tokens >= 1
    }

    /// Forgets the buckets that are full again as of `now`.
    /// - Complexity: O(principals with a bucket); called once a minute or so.
    mutating func prune(perMinute: Int, now: ContinuousClock.Instant) {
        let capacity = Double(perMinute)
        buckets = buckets.filter { _, bucket in
            var bucket = bucket
            bucket.refill(capacity: capacity, perSecond: capacity / 60, now: now)
            return bucket.tokens < capacity
        }
    }

    var principalsTracked: Int { buckets.count }
}
