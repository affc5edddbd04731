/// How long the event loop's passes take, for STATS `loop_pass_p99_us` and `loop_pass_max_us`
/// (a pass that stalls delays every client's ACKs and DIFFs, and a burst after a
/// stall can cut healthy subscribers off as slow consumers).
///
/// Fixed buckets, so recording is O(1) with no allocation: exact below 32 µs, then 16 buckets
/// per power of two (each at most 1/16 = 6.25 % wide) up to 2^40 µs. A quantile is reported as
/// the upper end of its bucket, so it is never under-stated; the maximum is exact.
package struct PassTimeHistogram {
    static let exactBelow: UInt64 = 32
    static let subBuckets = 16
    static let maxExponent = 40
    static let bucketCount = Int(exactBelow) + (maxExponent - 5 + 1) * subBuckets

    private(set) var counts = [UInt32](repeating: 0, count: bucketCount)
    private(set) var count: UInt64 = 0
    package private(set) var max: UInt64 = 0

    static func bucket(of micros: UInt64) -> Int {
        if micros < exactBelow { return Int(micros) }
        let value = Swift.min(micros, (UInt64(1) << (maxExponent + 1)) - 1)
        let exponent = 63 - value.leadingZeroBitCount  // 5 ... maxExponent
        let sub = Int((value >> UInt64(exponent - 4)) & 15)
        return Int(exactBelow) + (exponent - 5) * subBuckets + sub
    }

    /// The largest value that falls in `bucket`.
    static func upperBound(of bucket: Int) -> UInt64 {
        if bucket < Int(exactBelow) { return UInt64(bucket) }
        let exponent = (bucket - Int(exactBelow)) / subBuckets + 5
        let sub = UInt64((bucket - Int(exactBelow)) % subBuckets)
        let width = UInt64(1) << UInt64(exponent - 4)
        return (16 + sub) * width + width - 1
    }

    package mutating func record(micros: UInt64) {
        counts[Self.bucket(of: micros)] &+= 1
        count += 1
        if micros > max { max = micros }
    }

    mutating func add(_ other: PassTimeHistogram) {
        for i in counts.indices { counts[i] &+= other.counts[i] }
        count += other.count
        max = Swift.max(max, other.max)
    }

    /// The value at quantile `q` (0...1), as its bucket's upper end (capped at the maximum);
    /// 0 when empty. - Complexity: O(buckets).
    package func quantile(_ q: Double) -> UInt64 {
        guard count > 0 else { return 0 }
        let rank = Swift.max(1, UInt64((Double(count) * q).rounded(.up)))
        var seen: UInt64 = 0
        for (bucket, n) in counts.enumerated() where n > 0 {
            seen += UInt64(n)
            if seen >= rank { return Swift.min(Self.upperBound(of: bucket), max) }
        }
        return max
    }
}

/// Pass times over a sliding window: the current `window` and the one before it, so STATS
/// always covers between one and two windows (10-20 s) of recent passes.
package struct PassTimeWindow {
    static let window: Duration = .seconds(10)

    private var current = PassTimeHistogram()
    private var previous = PassTimeHistogram()
    private var currentStarted: ContinuousClock.Instant?

    package mutating func record(_ elapsed: Duration) {
        let (seconds, attoseconds) = elapsed.components
        let micros = seconds < 0 ? 0 : UInt64(seconds) * 1_000_000 + UInt64(attoseconds / 1_000_000_000_000)
        current.record(micros: micros)
    }

    /// Starts a new window when the current one is `window` old (from the one-second timer).
    package mutating func tick(now: ContinuousClock.Instant) {
        guard let started = currentStarted else {
            currentStarted = now
            return
        }
        if now - started >= Self.window {
            previous = current
            current = PassTimeHistogram()
            currentStarted = now
        }
    }

    package var merged: PassTimeHistogram {
        var all = previous
        all.add(current)
        return all
    }
}
