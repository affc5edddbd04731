/// One member of the key file's `keys` array (RFC 7517), restricted to what SnapSync reads
/// (docs/auth.md, "Key file"). Base64url members are kept as written; `AuthKeySet` decodes
/// and checks them.
public struct JSONWebKey: Sendable, Equatable, Codable {
    /// `oct`, `EC` or `OKP`.
    public var kty: String
    public var kid: String
    /// `HS256`, `ES256` or `EdDSA`: required, and must fit `kty` and `crv`.
    public var alg: String
    /// If present, `sig`.
    public var use: String?
    /// `P-256` for EC, `Ed25519` for OKP.
    public var crv: String?
    /// The public key: EC x coordinate, or the Ed25519 public key.
    public var x: String?
    /// EC y coordinate.
    public var y: String?
    /// The private key (EC scalar, Ed25519 seed): needed to mint, not to verify.
    public var d: String?
    /// The HS256 secret, at least 32 bytes: needed to mint and to verify.
    public var k: String?

    public init(
        kty: String, kid: String, alg: String, use: String? = "sig", crv: String? = nil, x: String? = nil, y: String? = nil,
        d: String? = nil, k: String? = nil
    ) {
        self.kty = kty
        self.kid = kid
        self.alg = alg
        self.use = use
        self.crv = crv
        self.x = x
        self.y = y
        self.d = d
        self.k = k
    }

    /// This key without its private member `d`: what a daemon that only verifies needs of an
    /// ES256 or EdDSA key. An HS256 key is one secret, used for both, so it is returned whole.
    public var verificationOnly: JSONWebKey {
        var key = self
        if key.kty != SigningAlgorithm.hs256.keyType { key.d = nil }
        return key
    }
}

/// A key file: `{"keys": [JSONWebKey, ...]}`.
public struct JSONWebKeySet: Sendable, Equatable, Codable {
    public var keys: [JSONWebKey]
    public init(keys: [JSONWebKey]) { self.keys = keys }
}
