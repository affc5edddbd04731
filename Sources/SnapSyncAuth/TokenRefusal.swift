public import Foundation

/// Why a token was not accepted. The description is for the client's ERROR reason and for the
/// log: it says what was wrong and names the key, claim or grant concerned, never the token
/// (nor its signature). Client-chosen strings in it are quoted and cut (`quote`).
public enum TokenRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// No token at all (empty credentials).
    case missing
    /// The token cannot be read; `part` says where.
    case malformed(part: TokenPart, reason: String)
    /// The header says `alg: none` (in any letter case): an unsigned token.
    case algorithmNone
    /// The header's `kid` names no key in the key file.
    case unknownKeyID(String)
    /// The header's `alg` is not the algorithm the key named by `kid` is for.
    case algorithmNotAllowed(algorithm: String, keyID: String, keyAlgorithm: SigningAlgorithm)
    /// The signature does not verify with the key named by `kid`.
    case badSignature(keyID: String)
    /// `exp` plus the leeway is not after now.
    case expired(at: Date)
    /// `nbf` minus the leeway is after now.
    case notYetValid(until: Date)
    /// `iat` minus the leeway is after now: a token from the future.
    case issuedInTheFuture(at: Date)
    /// `aud` does not name the configured audience (or there is one and none is configured).
    case wrongAudience(expected: String?, found: [String])

    public enum TokenPart: String, Sendable {
        /// The compact form: three base64url parts separated by dots, within the size limit.
        case encoding
        /// The JOSE header: a JSON object with a string `alg` and `kid`, no `crit`.
        case header
        /// The payload: a JSON object with the claims of docs/auth.md.
        case claims
        /// The signature part's encoding (a signature that does not verify is `badSignature`).
        case signature
    }

    public var description: String {
        switch self {
        case .missing:
            "no token"
        case .malformed(let part, let reason):
            "malformed token (\(part.rawValue)): \(reason)"
        case .algorithmNone:
            "unsigned token (alg none) refused"
        case .unknownKeyID(let kid):
            "unknown key id (kid) \(quote(kid))"
        case .algorithmNotAllowed(let algorithm, let kid, let keyAlgorithm):
            "algorithm \(quote(algorithm)) not allowed for key \(quote(kid)), which is for \(keyAlgorithm.rawValue) only"
        case .badSignature(let kid):
            "bad signature for key \(quote(kid))"
        case .expired(let at):
            "expired at \(Self.format(at))"
        case .notYetValid(let until):
            "not valid before \(Self.format(until))"
        case .issuedInTheFuture(let at):
            "issued in the future, at \(Self.format(at))"
        case .wrongAudience(let expected, let found):
            "wrong audience: the token is for \(found.isEmpty ? "no audience" : found.map { quote($0) }.joined(separator: ", ")), "
                + (expected.map { "this server is \(quote($0))" } ?? "this server has no audience configured")
        }
    }

    private static func format(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}
