/// A NATS server URL as logs and errors show it: `nats://user:secret@host:4222` has its user
/// information (a user and password, or a token) replaced by `***`, so that `--cluster`'s
/// credentials never reach the journal, the metrics of a log collector, or an error a client
/// could see. A URL without user information is shown as it is.
package enum NATSURLRedaction {
    /// `url` with everything between the scheme's `://` and the last `@` of the authority
    /// replaced by `***`. O(length of the URL).
    package static func redacted(_ url: String) -> String {
        let start = url.firstRange(of: "://")?.upperBound ?? url.startIndex
        let authorityEnd = url[start...].firstIndex(of: "/") ?? url.endIndex
        guard let at = url[start..<authorityEnd].lastIndex(of: "@") else { return url }
        return String(url[..<start]) + "***" + String(url[at...])
    }

    /// Each of `urls` redacted, joined by commas as `--cluster` takes them.
    package static func redacted(_ urls: [String]) -> String {
        urls.map(redacted).joined(separator: ",")
    }
}
