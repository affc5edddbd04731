// A log-linear latency histogram for the fan-out benchmark: 32 sub-buckets per power of two of
// nanoseconds, so every recorded value lands in a bucket within ~3% of it. Recording is O(1)
// (one leadingZeroBitCount and an increment, no allocation); percentiles are O(buckets).
#if canImport(Glibc)
    import Glibc

    struct FanoutHistogram {
        static let subBuckets = 32
        static let bucketCount = 64 * subBuckets

        private(set) var counts: [UInt64] = Array(repeating: 0, count: FanoutHistogram.bucketCount)
        private(set) var count: UInt64 = 0
        private(set) var maxValue: UInt64 = 0

        @inline(__always)
        static func index(_ value: UInt64) -> Int {
            if value < 32 { return Int(value) }
            let msb = 63 - value.leadingZeroBitCount
            let sub = Int(truncatingIfNeeded: (value >> UInt64(msb - 5)) & 31)
            return (msb - 4) * 32 + sub
        }

        /// The smallest value that lands in bucket `index`.
        static func lowerBound(_ index: Int) -> UInt64 {
            if index < 32 { return UInt64(index) }
            let msb = index / 32 + 4
            let sub = UInt64(index % 32)
            return (32 + sub) << UInt64(msb - 5)
        }

        init() {}

        /// A histogram from raw bucket counts (the generator records into a plain buffer).
        init(buckets: UnsafePointer<UInt64>, maxValue: UInt64) {
            counts = Array(UnsafeBufferPointer(start: buckets, count: FanoutHistogram.bucketCount))
            count = counts.reduce(0, +)
            self.maxValue = maxValue
        }

        /// Adds another histogram's samples: the pooled distribution of several runs. O(buckets)
        mutating func merge(_ other: FanoutHistogram) {
            for index in counts.indices { counts[index] &+= other.counts[index] }
            count &+= other.count
            maxValue = max(maxValue, other.maxValue)
        }

        mutating func record(_ value: UInt64) {
            counts[FanoutHistogram.index(value)] &+= 1
            count &+= 1
            if value > maxValue { maxValue = value }
        }

        /// The value at quantile `q` (0...1) in nanoseconds: the lower bound of the bucket holding it,
        /// or the exact maximum for the top bucket.
        func quantile(_ q: Double) -> UInt64 {
            guard count > 0 else { return 0 }
            var wanted = UInt64(q * Double(count))
            if wanted >= count { wanted = count - 1 }
            var seen: UInt64 = 0
            for (index, bucketCount) in counts.enumerated() where bucketCount > 0 {
                seen += bucketCount
                if seen > wanted { return min(FanoutHistogram.lowerBound(index), maxValue) }
            }
            return maxValue
        }
    }
#endif
