// STATS loop_pass_p99_us / loop_pass_max_us: the fixed-bucket histogram never under-states a
// quantile, keeps its buckets within 6.25 %, and the window forgets old passes.

import Testing
import SnapSyncTestThreads
@testable import SnapSyncHub

@Suite(.unitTests) struct PassTimeHistogramTests {
    @Test func bucketsCoverEveryValueInOrderAndNarrowly() {
        var previous = -1
        for micros in Array(UInt64(0)..<5000) + [65_535, 65_536, 1 << 30, 1 << 40, UInt64.max] {
            let bucket = PassTimeHistogram.bucket(of: micros)
            #expect(bucket >= previous && bucket < PassTimeHistogram.bucketCount, "\(micros)")
            previous = bucket
            let upper = PassTimeHistogram.upperBound(of: bucket)
            if micros < 1 << 41 {
                #expect(upper >= micros, "\(micros)")
                #expect(Double(upper - micros) <= Double(micros) / 16 + 1, "\(micros) → \(upper)")
            }
        }
    }

    @Test func quantilesAndMaximum() {
        var h = PassTimeHistogram()
        #expect(h.quantile(0.99) == 0)
        for _ in 0..<990 { h.record(micros: 100) }
        for _ in 0..<10 { h.record(micros: 90_000) }
        #expect(h.max == 90_000)
        #expect(h.quantile(0.99) >= 100 && h.quantile(0.99) < 107)
        h.record(micros: 90_000)
        #expect(h.quantile(0.99) == 90_000, "capped at the maximum")
        #expect(h.quantile(0.5) < 107)
    }

    @Test func theWindowForgetsOldPasses() {
        var window = PassTimeWindow()
        let start = ContinuousClock.now
        window.tick(now: start)
        window.record(.milliseconds(250))
        window.tick(now: start + .seconds(10))
        #expect(window.merged.max == 250_000, "still in the previous window")
        window.record(.microseconds(300))
        window.tick(now: start + .seconds(20))
        #expect(window.merged.max == 300)
    }
}
