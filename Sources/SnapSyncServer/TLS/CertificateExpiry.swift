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

    /// `notAfter` in ISO 8601, UTC (`2026-12-01T09:00:00Z`), for the log. The date from the
    /// day count by Hinnant's `civil_from_days` (proleptic Gregorian), without the C library's
    /// `struct tm`.
    var timestamp: String {
        let days = notAfter >= 0 ? notAfter / 86_400 : (notAfter - 86_399) / 86_400
        let second = notAfter - days * 86_400
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(second / 3_600, 2)):\(pad(second / 60 % 60, 2)):\(pad(second % 60, 2))Z"
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
