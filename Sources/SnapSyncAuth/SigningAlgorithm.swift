/// The JWS algorithms a key may be for (docs/auth.md). Each key in the key file is for exactly
/// one of them, and verifies only tokens whose header names that one.
public enum SigningAlgorithm: String, Sendable, Hashable, CaseIterable, Codable {
    /// HMAC with SHA-256, a shared secret (JWK `kty` `oct`).
    case hs256 = "HS256"
    /// ECDSA with P-256 and SHA-256 (JWK `kty` `EC`, `crv` `P-256`).
    case es256 = "ES256"
    /// Ed25519 (JWK `kty` `OKP`, `crv` `Ed25519`).
    case edDSA = "EdDSA"

    /// The JWK `kty` of a key for this algorithm.
    public var keyType: String {
        switch self {
        case .hs256: "oct"
        case .es256: "EC"
        case .edDSA: "OKP"
        }
    }

    /// The JWK `crv` of a key for this algorithm; nil for HS256, which has none.
    public var curve: String? {
        switch self {
        case .hs256: nil
        case .es256: "P-256"
        case .edDSA: "Ed25519"
        }
    }
}
