import Testing
import SnapSyncTestThreads
@testable import SnapSyncServer

// When the served TLS certificate's notAfter is a warning, and how the log writes it.

@Suite(.unitTests) struct CertificateExpiryTests {
    /// 2026-12-01T09:00:00Z.
    let notAfter = 1_796_115_600

    @Test func notAfterIsWrittenInUTC() {
        #expect(CertificateExpiry(notAfter: notAfter).timestamp == "2026-12-01T09:00:00Z")
        #expect(CertificateExpiry(notAfter: 0).timestamp == "1970-01-01T00:00:00Z")
        // Leap days, the end of a century and of a year, before the epoch.
        #expect(CertificateExpiry(notAfter: 951_782_400).timestamp == "2000-02-29T00:00:00Z")
        #expect(CertificateExpiry(notAfter: 4_107_542_399).timestamp == "2100-02-28T23:59:59Z")
        #expect(CertificateExpiry(notAfter: 1_798_761_599).timestamp == "2026-12-31T23:59:59Z")
        #expect(CertificateExpiry(notAfter: -1).timestamp == "1969-12-31T23:59:59Z")
    }

    @Test func onlyTheLastFourteenDaysAndAfterAreWarnedOf() {
        let expiry = CertificateExpiry(notAfter: notAfter)
        let day = 86_400
        #expect(expiry.state(now: notAfter - 15 * day) == .valid)
        #expect(expiry.warning(now: notAfter - 15 * day) == nil)
        #expect(expiry.state(now: notAfter - 14 * day - 1) == .valid)
        #expect(expiry.state(now: notAfter - 14 * day) == .expiresSoon(seconds: 14 * day))
        #expect(expiry.warning(now: notAfter - 3 * day) == "the TLS certificate expires at 2026-12-01T09:00:00Z, in 3 days: renew it and send SIGHUP")
        #expect(expiry.warning(now: notAfter - 2 * 3_600)?.contains("in 2 hours") == true)
        #expect(expiry.warning(now: notAfter - 60)?.contains("in 1 minute:") == true)
        #expect(expiry.state(now: notAfter) == .expired)
        #expect(expiry.warning(now: notAfter + 1)?.hasPrefix("the TLS certificate expired at 2026-12-01T09:00:00Z") == true)
    }
}
