/// Each principal's allowance of new rooms (`--room-creations-per-minute`): a token bucket of
/// that many, refilled continuously, so a principal may create a burst of a minute's worth and
/// then one every 60/N seconds.
///
/// Only principals that created a room within the last minute have a bucket: a full bucket is
/// the same as none, and `prune` drops them, so the table holds at most one entry per principal
/// active in the last minute (without authentication a client names itself, so the quota is a
/// courtesy there: the server-wide limits are what hold).
struct RoomCreationQuota {
    private struct Bucket {
        var tokens: Double
        var refilled: ContinuousClock.Instant
    }

    private var buckets: [String: Bucket] = [:]

    /// Takes one creation from `principal`'s allowance as of `now`; false when it has none left.
    /// - Complexity: O(1).
    mutating func take(_ principal: String, perMinute: Int, now: ContinuousClock.Instant) -> Bool {
        let capacity = Double(perMinute)
        var bucket = buckets[principal].map { refilled($0, capacity: capacity, now: now) } ?? Bucket(tokens: capacity, refilled: now)
        guard bucket.tokens >= 1 else {
            buckets[principal] = bucket
            return false
        }
        bucket.tokens -= 1
        buckets[principal] = bucket
        return true
    }

    /// Whether `principal` has a creation left as of `now` (nothing is taken).
    /// - Complexity: O(1).
    func hasAllowance(_ principal: String, perMinute: Int, now: ContinuousClock.Instant) -> Bool {
        guard let bucket = buckets[principal] else { return true }
        return refilled(bucket, capacity: Double(perMinute), now: now).tokens >= 1
    }

    /// Forgets the buckets that are full again as of `now`.
    /// - Complexity: O(principals with a bucket); called once a minute or so.
    mutating func prune(perMinute: Int, now: ContinuousClock.Instant) {
        let capacity = Double(perMinute)
        buckets = buckets.filter { refilled($0.value, capacity: capacity, now: now).tokens < capacity }
    }

    var principalsTracked: Int { buckets.count }

    private func refilled(_ bucket: Bucket, capacity: Double, now: ContinuousClock.Instant) -> Bucket {
        let elapsed = now - bucket.refilled
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Bucket(tokens: min(capacity, bucket.tokens + seconds * capacity / 60), refilled: now)
    }
}
