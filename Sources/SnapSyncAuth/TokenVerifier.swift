public import Foundation
import JWTKit

/// Checks a token against a key set, an optional audience and a clock leeway, synchronously:
/// the daemon calls it from its event loop. Cost: a few copies of the token (at most
/// `maxTokenBytes`), one JSON parse of header and payload, and one signature check (HS256 an
/// HMAC; ES256 and EdDSA a public-key verification, the bulk of it); no lock, no actor.
public struct TokenVerifier: Sendable {
    public let keys: AuthKeySet
    /// When set, the token's `aud` must name it; when nil, a token with an `aud` is refused
    /// (RFC 7519 §4.1.3: a token for some audience is not for a server that is none).
    public let audience: String?
    /// Allowed clock skew for `exp`, `nbf` and `iat`.
    public let leeway: Duration

    /// Longer tokens are refused before any parsing.
    public static let maxTokenBytes = 8192
    public static let defaultLeeway: Duration = .seconds(30)
    /// jwt-kit's parser, with its JSON decoder (safe to share across threads), made once.
    private static let parser = DefaultJWTParser()

    public init(keys: AuthKeySet, audience: String? = nil, leeway: Duration = defaultLeeway) {
        self.keys = keys
        self.audience = audience
        self.leeway = leeway
    }

    /// The principal `token` stands for at `now`, or why it stands for none.
    ///
    /// Order of checks: presence and size; the compact encoding and header (jwt-kit's parser);
    /// `alg` none; `kid`; `alg` against the key's algorithm; the signature (jwt-kit's signer
    /// for that key); the claims; `exp`, `nbf`, `iat` with the leeway; `aud`.
    public func verify(_ token: String, now: Date = Date()) throws(TokenRefusal) -> Principal {
        let bytes = Array(token.utf8)
        guard !bytes.isEmpty else { throw .missing }
        guard bytes.count <= Self.maxTokenBytes else {
            throw .malformed(part: .encoding, reason: "longer than \(Self.maxTokenBytes) bytes")
        }
        let parser = Self.parser
        let header: JWTHeader
        let envelope: ClaimsEnvelope
        let signature: Data
        let signingInput: [UInt8]
        do {
            (header, envelope, signature) = try parser.parse(bytes, as: ClaimsEnvelope.self)
            let parts = try parser.getTokenParts(bytes)
            signingInput = Array(parts.header) + [UInt8(ascii: ".")] + Array(parts.payload)
        } catch {
            throw Self.diagnose(bytes)
        }

        guard let algorithm = header.alg else {
            throw .malformed(part: .header, reason: header.fields["alg"] == nil ? "alg is missing" : "alg is not a string")
        }
        if algorithm.lowercased() == "none" { throw .algorithmNone }
        // RFC 7515 §4.1.11: extensions a recipient does not understand make the token invalid.
        guard header.fields["crit"] == nil else { throw .malformed(part: .header, reason: "crit is not supported") }
        guard let keyID = header.kid else {
            throw .malformed(part: .header, reason: header.fields["kid"] == nil ? "kid is missing" : "kid is not a string")
        }
        guard let key = keys.keys[keyID] else { throw .unknownKeyID(keyID) }
        guard algorithm == key.algorithm.rawValue else {
            throw .algorithmNotAllowed(algorithm: algorithm, keyID: keyID, keyAlgorithm: key.algorithm)
        }
        // jwt-kit's ECDSA check throws on a signature of the wrong length: that is a bad one too.
        guard (try? key.verifier.verify(signature, signs: signingInput)) == true else { throw .badSignature(keyID: keyID) }

        let claims: TokenClaims
        switch envelope.claims {
        case .success(let decoded): claims = decoded
        case .failure(let error): throw .malformed(part: .claims, reason: error.description)
        }
        let leeway = Double(leeway.components.seconds) + Double(leeway.components.attoseconds) / 1e18
        // RFC 7519 §4.1.4: expired "on or after" exp.
        guard now.timeIntervalSince(claims.expiresAt) < leeway else { throw .expired(at: claims.expiresAt) }
        if let notBefore = claims.notBefore, notBefore.timeIntervalSince(now) > leeway { throw .notYetValid(until: notBefore) }
        if let issuedAt = claims.issuedAt, issuedAt.timeIntervalSince(now) > leeway { throw .issuedInTheFuture(at: issuedAt) }
        if let audience {
            guard claims.audience.contains(audience) else { throw .wrongAudience(expected: audience, found: claims.audience) }
        } else if !claims.audience.isEmpty {
            throw .wrongAudience(expected: nil, found: claims.audience)
        }
        return Principal(keyID: keyID, claims: claims)
    }

    /// Names the part of a token jwt-kit could not parse. Only reached on failure.
    private static func diagnose(_ bytes: [UInt8]) -> TokenRefusal {
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            return .malformed(part: .encoding, reason: "not three parts separated by dots (\(parts.count) parts)")
        }
        let text = parts.map { String(decoding: $0, as: UTF8.self) }
        func isJSONObject(_ part: String) -> Bool {
            guard let json = Base64URL.decode(part) else { return false }
            return (try? JSONSerialization.jsonObject(with: Data(json))) is [String: Any]
        }
        if Base64URL.decode(text[0]) == nil { return .malformed(part: .header, reason: "not base64url") }
        if !isJSONObject(text[0]) { return .malformed(part: .header, reason: "not a JSON object with string alg and kid") }
        if Base64URL.decode(text[1]) == nil { return .malformed(part: .claims, reason: "not base64url") }
        if Base64URL.decode(text[2]) == nil { return .malformed(part: .signature, reason: "not base64url") }
        return .malformed(part: .claims, reason: "not JSON")
    }
}
