package import SnapSyncHub

/// Whether the daemon authenticates (`--auth required|off`).
package enum AuthMode: String, Sendable, CaseIterable {
    /// Every HELLO must carry a valid token; every request is checked against its grants.
    case required
    /// No token is looked at: every client reads and writes every room.
    case off
}

/// The authentication flags as given, and the start-up rules they must follow (docs/auth.md,
/// "Running the daemon"): secure by default.
///
/// - The mode defaults to `required` when `--auth-keys` is given, else `off`.
/// - `required` needs `--auth-keys`.
/// - `off` is allowed only on a loopback listen address, unless `--insecure-no-auth` is given
///   (and the daemon then logs a warning once).
/// - `--insecure-no-auth` means nothing when the daemon authenticates, so it is refused there
///   rather than silently ignored.
package struct AuthSettings: Sendable {
    package var keyFile: String?
    package var mode: AuthMode?
    package var audience: String?
    package var insecureNoAuth = false

    package init(keyFile: String? = nil, mode: AuthMode? = nil, audience: String? = nil, insecureNoAuth: Bool = false) {
        self.keyFile = keyFile
        self.mode = mode
        self.audience = audience
        self.insecureNoAuth = insecureNoAuth
    }

    /// The mode in force: the one given, else `required` with a key file and `off` without.
    package var effectiveMode: AuthMode { mode ?? (keyFile == nil ? .off : .required) }

    /// Checks the rules above for a daemon listening on `host`.
    /// - Returns: the mode in force.
    /// - Throws: the rule broken, naming the flags to change.
    package func check(listeningOn host: String) throws(ConfigurationError) -> AuthMode {
        func fail(_ text: String) -> ConfigurationError { ConfigurationError(message: text) }
        if let keyFile, keyFile.isEmpty { throw fail("--auth-keys must name a file") }
        if let audience, audience.isEmpty { throw fail("--auth-audience must not be empty") }
        switch effectiveMode {
        case .required:
            guard keyFile != nil else {
                throw fail("--auth required needs --auth-keys FILE, the key file tokens are verified with (docs/auth.md)")
            }
            guard !insecureNoAuth else {
                throw fail("--insecure-no-auth goes with --auth off only; this daemon authenticates (--auth-keys is given)")
            }
        case .off:
            guard !insecureNoAuth else { return .off }
            let address: SocketAddress
            do {
                address = try SocketAddress(host: host, port: 0)
            } catch {
                throw fail(error.description)
            }
            guard address.isLoopback else {
                throw fail(
                    "refusing to listen on \(host) (\(address.host), not a loopback address) without authentication: anyone who can reach the port could read and write every room. Give --auth-keys FILE (docs/auth.md), or --insecure-no-auth to serve without it anyway"
                )
            }
        }
        return effectiveMode
    }
}
