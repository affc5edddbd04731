internal import Glibc

/// The served certificate's `notAfter`, and how near it is: a certificate that expired, or
/// expires within `warningWindow`, is a warning at start and at each reload (SIGHUP), since
/// clients that check dates refuse it from then on and the daemon itself serves it unchanged.
struct CertificateExpiry: Equatable {
    /// Seconds since the epoch.
    let notAfter: Int

    /// How long before `notAfter` the daemon starts warning: time to renew before clients refuse.
    static let warningWindow = 14 * 86_400

    enum State: Equatable {
        case valid
        /// Expires in this many seconds, within `warningWindow`.
        case expiresSoon(seconds: Int)
        case expired
    }

    func state(now: Int) -> State {
        if notAfter <= now { return .expired }
        if notAfter - now <= Self.warningWindow { return .expiresSoon(seconds: notAfter - now) }
        return .valid
    }

    /// `notAfter` in ISO 8601, UTC (`2026-12-01T09:00:00Z`), for the log.
    var timestamp: String {
        var seconds = time_t(notAfter)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "\(notAfter)" }
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))Z"
    }

    /// The warning for `state(now:)`, nil while the certificate is valid beyond the window.
    func warning(now: Int) -> String? {
        switch state(now: now) {
        case .valid:
            nil
        case .expired:
            "the TLS certificate expired at \(timestamp): clients that check it refuse the connection; renew it and send SIGHUP"
        case .expiresSoon(let seconds):
            "the TLS certificate expires at \(timestamp), in \(Self.describe(seconds)): renew it and send SIGHUP"
        }
    }

    /// "3 days", "5 hours", "12 minutes": the largest whole unit, rounded down.
    private static func describe(_ seconds: Int) -> String {
        func plural(_ count: Int, _ unit: String) -> String { "\(count) \(unit)\(count == 1 ? "" : "s")" }
        if seconds >= 86_400 { return plural(seconds / 86_400, "day") }
        if seconds >= 3_600 { return plural(seconds / 3_600, "hour") }
        return plural(max(seconds / 60, 0), "minute")
    }
}
