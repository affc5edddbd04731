#if canImport(Foundation)
    import Foundation
#endif

/// When a token expires and when to refresh it, read from its payload's `exp` and `iat`.
///
/// The client does not verify tokens (the server does): it only decodes the payload, the middle
/// base64url part of the compact form, as JSON. A token that is not a JWT, or has no numeric
/// `exp`, has no lifetime and is never refreshed.
struct TokenLifetime: Hashable, Sendable {
    /// `exp`, in seconds since 1970.
    var expiresAt: Double
    /// `iat` if the token has one before `exp`, else when the client got it.
    var issuedAt: Double

    /// The margin before `exp` at which the client refreshes: 10% of the lifetime, at most this.
    static let maximumMargin = 30.0
    /// Failed refreshes tried again (halfway to `exp` each time) before waiting for the server's
    /// `token_expired`.
    static let refreshRetries = 3

    /// `nil` when `token` has no readable `exp`. `now` is the wall clock, in seconds since 1970.
    init?(token: String, now: Double) {
        guard let claims = Self.claims(of: token), let exp = claims.exp, exp.isFinite else { return nil }
        expiresAt = exp
        if let iat = claims.iat, iat.isFinite, iat < exp {
            issuedAt = iat
        } else {
            issuedAt = min(now, exp)
        }
    }

    init(expiresAt: Double, issuedAt: Double) {
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
    }

    /// When to send the first refresh: `exp` minus min(10% of the lifetime, 30 s).
    var refreshAt: Double {
        expiresAt - min(Self.maximumMargin, (expiresAt - issuedAt) / 10)
    }

    /// When to try again after a refresh failed at `now`: halfway to `exp` (at once past it).
    func retryAt(now: Double) -> Double {
        now + max(0, (expiresAt - now) / 2)
    }

    private struct Claims: Decodable {
        var exp: Double?
        var iat: Double?
    }

    private static func claims(of token: String) -> Claims? {
        #if canImport(Foundation)
            let parts = token.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3 else { return nil }
            var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
            guard let payload = Data(base64Encoded: base64) else { return nil }
            // A non-numeric exp or iat makes the whole payload unreadable: no refresh, as without exp.
            return try? JSONDecoder().decode(Claims.self, from: payload)
        #else
            // Without Foundation there is no JSON decoder: tokens are sent, never refreshed.
            return nil
        #endif
    }
}
