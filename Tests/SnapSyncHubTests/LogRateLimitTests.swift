import Logging
import Synchronization
import Testing
import SnapSyncTestSupport
import SnapSyncWire
@testable import SnapSyncHub

// The log's rate limit per cause: the burst, the summary when the interval ends, and a flood of
// refused tokens and protocol errors through the hub.

@Suite struct LogRateLimitTests {
    /// The lines a hub wrote, as "LEVEL: message".
    typealias Lines = LogCapture

    @Test func eachCauseHasItsBurstAndItsSummaryWhenTheIntervalEnds() {
        var limit = LogRateLimit(burst: 3, interval: .seconds(10))
        let start = ContinuousClock.now
        let written = (0..<5).map { _ in limit.admit("a", level: .warning, now: start).write }
        #expect(written == [true, true, true, false, false])
        #expect(limit.admit("b", level: .info, now: start + .seconds(1)) == (true, nil))
        #expect(limit.endIntervals(now: start + .seconds(9)).isEmpty)
        // The first line after the interval starts the next one and brings the summary first.
        let next = limit.admit("a", level: .warning, now: start + .seconds(10))
        #expect(next.write && next.ended == LogRateLimit.Summary(cause: "a", level: .warning, suppressed: 2))
        // "b" had nothing held back: its interval ends without a summary.
        #expect(limit.endIntervals(now: start + .seconds(11)).isEmpty)
        for _ in 0..<4 { _ = limit.admit("a", level: .warning, now: start + .seconds(12)) }
        #expect(limit.endIntervals(now: start + .seconds(20)) == [LogRateLimit.Summary(cause: "a", level: .warning, suppressed: 2)])
        #expect(limit.endIntervals(now: start + .seconds(40)).isEmpty)
    }

    /// 1,000 HELLOs with an expired token in one interval: 10 lines, and at the end of the
    /// interval one line for the 990 others. Another cause (a bad signature) has its own 10.
    @Test func aFloodOfRefusedTokensWritesTheBurstAndOneSummary() async throws {
        let auth = try await AuthFixture.make()
        let lines = Lines()
        let harness = HubHarness(auth: auth, logger: lines.logger)
        let expired = try await auth.token(["board:*=read"], expiresIn: -10)
        for _ in 0..<1_000 {
            let (session, answer) = harness.hello(expired)
            #expect(answer.map(\.errorCode) == [.unauthorized])
            harness.hub.end(session, reason: "test")
        }
        for _ in 0..<20 { _ = harness.hello(Array("e30.e30.AAAA".utf8)) }
        #expect(harness.hub.stats.authRefused == 1_020)
        let refused = lines.all.filter { $0.contains("token refused") }
        #expect(refused.count == 20, "\(refused)")

        harness.hub.endLogIntervals(now: harness.later(.seconds(5)))
        #expect(lines.all.filter { $0.contains("not logged") }.isEmpty)
        harness.hub.endLogIntervals(now: harness.later(.seconds(10)))
        let summaries = lines.all.filter { $0.contains("not logged") }
        #expect(summaries.count == 2, "\(summaries)")
        #expect(summaries.contains("info: token refused (HELLO): expired: 990 more lines not logged in 10 s (at most 10 per cause)"))
        #expect(lines.all.filter { $0.contains("token refused") }.count == 22)
    }

    /// Protocol errors are warnings limited per error code.
    @Test func protocolErrorsAreLimitedPerCode() {
        let lines = Lines()
        let harness = HubHarness(logger: lines.logger)
        for _ in 0..<100 {
            let session = harness.connect()
            harness.send(frame: [0x00, 0x00, 0x00, 0x01, 0x7F], from: session)  // no such message type
        }
        #expect(harness.hub.stats.protocolErrors == 100)
        #expect(lines.all.filter { $0.hasPrefix("warning: protocol error, closing") }.count == 10)
        harness.hub.endLogIntervals(now: harness.later(.seconds(10)))
        #expect(lines.all.last?.hasPrefix("warning: protocol error (") == true && lines.all.last?.contains(": 90 more lines not logged") == true)
    }
}
