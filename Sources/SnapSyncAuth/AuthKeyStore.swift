public import Foundation

/// The verifier in use, reloadable from its key file while tokens are being verified.
///
/// `verify` is synchronous and takes a lock only to read the current verifier (a reference
/// copy), so the daemon's event loop never waits on a reload. `reload` builds a whole new key
/// set from the file off the loop (from a SIGHUP handler: `Task { await store.reload() }`)
/// and swaps it in at once; if the file is bad, the keys in use stay and the error says why.
/// Sessions already verified are not affected either way: a reload changes what later tokens
/// are checked against.
public final class AuthKeyStore: @unchecked Sendable {
    public let path: String
    public let audience: String?
    public let leeway: Duration
    // Guards `verifier` and `reloadsStarted`; held only to read or replace them.
    private let lock = NSLock()
    private var verifier: TokenVerifier
    /// Reloads begun so far: a reload installs its keys only if no later one has begun, so
    /// that two SIGHUPs in a row end with the file as the later one read it, never with the
    /// earlier read finishing last (the key an operator just removed would come back).
    private var reloadsStarted: UInt64 = 0

    /// Loads `path`; throws if it is not a valid key file (docs/auth.md).
    public init(path: String, audience: String? = nil, leeway: Duration = TokenVerifier.defaultLeeway) async throws(AuthKeyFileError) {
        self.path = path
        self.audience = audience
        self.leeway = leeway
        verifier = TokenVerifier(keys: try await AuthKeySet.load(contentsOf: path), audience: audience, leeway: leeway)
    }

    /// The verifier in use now.
    public var current: TokenVerifier { lock.withLock { verifier } }

    /// `current.verify(token, now: now)`.
    public func verify(_ token: String, now: Date = Date()) throws(TokenRefusal) -> Principal {
        try current.verify(token, now: now)
    }

    /// Reads the file again and, if it is valid, verifies with its keys from now on.
    /// - Returns: the key ids now in use, or nil when a reload begun after this one has
    ///   superseded it (its keys were not installed).
    /// - Throws: why the file was refused; the keys in use are then unchanged.
    @discardableResult
    public func reload() async throws(AuthKeyFileError) -> [String]? {
        let generation = lock.withLock {
            reloadsStarted += 1
            return reloadsStarted
        }
        let keys = try await AuthKeySet.load(contentsOf: path)
        let next = TokenVerifier(keys: keys, audience: audience, leeway: leeway)
        let installed = lock.withLock {
            guard generation == reloadsStarted else { return false }
            verifier = next
            return true
        }
        return installed ? keys.keyIDs : nil
    }
}
