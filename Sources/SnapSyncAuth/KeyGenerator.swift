import Crypto
import JWTKit

/// Fresh keys for `snapsyncd keygen` and tests, as key-file entries with their private parts.
///
/// What to keep private (docs/auth.md, "Keys"): `d` of an ES256 or EdDSA key signs tokens, so
/// only the minting side needs it; the daemon verifies with `verificationOnly` (x, y). An
/// HS256 key is one secret `k` that both signs and verifies: every holder, the daemon
/// included, can mint tokens with it.
public enum KeyGenerator {
    public static func generate(_ algorithm: SigningAlgorithm, keyID: String) -> JSONWebKey {
        switch algorithm {
        case .hs256:
            var generator = SystemRandomNumberGenerator()
            let secret = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            return JSONWebKey(kty: algorithm.keyType, kid: keyID, alg: algorithm.rawValue, k: Base64URL.encode(secret))
        case .es256:
            // swift-crypto directly: jwt-kit's ES256PrivateKey does not expose the scalar.
            let key = P256.Signing.PrivateKey()
            let point = key.publicKey.x963Representation  // 0x04 || x || y
            return JSONWebKey(
                kty: algorithm.keyType, kid: keyID, alg: algorithm.rawValue, crv: algorithm.curve,
                x: Base64URL.encode(point[1..<33]), y: Base64URL.encode(point[33..<65]), d: Base64URL.encode(key.rawRepresentation))
        case .edDSA:
            // Cannot throw for Ed25519, the one curve jwt-kit has.
            let key = try! EdDSA.PrivateKey(curve: .ed25519)
            return JSONWebKey(
                kty: algorithm.keyType, kid: keyID, alg: algorithm.rawValue, crv: algorithm.curve,
                x: Base64URL.encode(key.publicKey.rawRepresentation), d: Base64URL.encode(key.rawRepresentation))
        }
    }
}
