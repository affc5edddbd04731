public import Foundation
import JWTKit

/// The keys of one key file, ready to verify tokens synchronously (`TokenVerifier`) and to
/// mint them (`mint`). Immutable: a reload builds a new set and swaps it in whole
/// (`AuthKeyStore`).
///
/// Why loading is async and verifying is not: jwt-kit 5 binds a key to its algorithm in
/// internal types (`ECDSASigner`, `EdDSASigner`, `HMACSigner`), reachable only through the
/// actor `JWTKeyCollection` (`add(ecdsa:kid:)`, then `await getKey(for:alg:)`). What that
/// returns is a public `any JWTAlgorithm`, whose `verify(_:signs:)` is synchronous. So each
/// key crosses the actor once, here, and every later verification is a plain call.
public struct AuthKeySet: Sendable {
    /// One key, bound to the one algorithm it is for.
    struct Key: Sendable {
        let keyID: String
        let algorithm: SigningAlgorithm
        /// jwt-kit's signer for this key alone: `verify(_:signs:)` is synchronous.
        let verifier: any JWTAlgorithm
        /// Whether the file gave the private part (always for HS256).
        let canSign: Bool
    }

    let keys: [String: Key]
    /// The same keys, for `mint` (jwt-kit's serializer is async and reached through the actor).
    private let collection: JWTKeyCollection
    /// Where the keys came from, for messages.
    public let source: String

    /// The key ids in the set, sorted.
    public var keyIDs: [String] { keys.keys.sorted() }

    /// The algorithm the key `keyID` is for, or nil if there is no such key.
    public func algorithm(ofKey keyID: String) -> SigningAlgorithm? { keys[keyID]?.algorithm }

    /// Reads and checks a key file (docs/auth.md, "Key file"). Every key must be valid: a file
    /// with one bad key is refused whole, so that a reload never half-applies.
    public static func load(contentsOf path: String) async throws(AuthKeyFileError) -> AuthKeySet {
        let data: Data
        do {
            data = try KeyFileReader.contents(of: path)
        } catch {
            throw AuthKeyFileError(path: path, reason: "cannot be read (\(error))")
        }
        return try await load(jwks: data, source: path)
    }

    /// Checks a key set given as the bytes of a key file; `source` names it in errors.
    public static func load(jwks data: Data, source: String = "<memory>") async throws(AuthKeyFileError) -> AuthKeySet {
        let set: JSONWebKeySet
        do {
            set = try JSONDecoder().decode(JSONWebKeySet.self, from: data)
        } catch {
            throw AuthKeyFileError(path: source, reason: describeDecodingError(error, root: "the file"))
        }
        return try await load(set, source: source)
    }

    /// Checks a key set already decoded.
    public static func load(_ set: JSONWebKeySet, source: String = "<memory>") async throws(AuthKeyFileError) -> AuthKeySet {
        try await load(set, source: source, refusingPublishedKeys: true)
    }

    /// `load(_:source:)`; only tests pass `refusingPublishedKeys: false`, to check the published
    /// example token of Protocol/AUTH.md against this verifier.
    static func load(_ set: JSONWebKeySet, source: String, refusingPublishedKeys: Bool) async throws(AuthKeyFileError) -> AuthKeySet {
        guard !set.keys.isEmpty else { throw AuthKeyFileError(path: source, reason: "keys is empty") }
        let collection = JWTKeyCollection()
        var keys: [String: Key] = [:]
        for (index, jwk) in set.keys.enumerated() {
            func refuse(_ reason: String) -> AuthKeyFileError {
                AuthKeyFileError(path: source, reason: "keys[\(index)] (kid \(quote(jwk.kid))): \(reason)")
            }
            guard !jwk.kid.isEmpty else { throw refuse("kid is empty") }
            guard keys[jwk.kid] == nil else { throw refuse("kid is used by an earlier key") }
            let algorithm: SigningAlgorithm
            do {
                algorithm = try await add(jwk, to: collection, refusingPublishedKeys: refusingPublishedKeys)
            } catch {
                throw refuse(error.description)
            }
            let verifier: any JWTAlgorithm
            do {
                verifier = try await collection.getKey(for: JWKIdentifier(string: jwk.kid), alg: algorithm.rawValue)
            } catch {
                throw refuse("jwt-kit refused the key (\(error))")
            }
            keys[jwk.kid] = Key(keyID: jwk.kid, algorithm: algorithm, verifier: verifier, canSign: algorithm == .hs256 || jwk.d != nil)
        }
        return AuthKeySet(keys: keys, collection: collection, source: source)
    }

    private init(keys: [String: Key], collection: JWTKeyCollection, source: String) {
        self.keys = keys
        self.collection = collection
        self.source = source
    }

    /// Checks one key against its `kty`, `crv` and `alg`, and adds it to `collection` under its kid.
    private static func add(_ jwk: JSONWebKey, to collection: JWTKeyCollection, refusingPublishedKeys: Bool) async throws(KeyError) -> SigningAlgorithm {
        guard let algorithm = SigningAlgorithm(rawValue: jwk.alg) else {
            throw KeyError("alg \(quote(jwk.alg)) is not supported (HS256, ES256, EdDSA)")
        }
        guard jwk.kty == algorithm.keyType else {
            throw KeyError("kty \(quote(jwk.kty)) does not fit alg \(algorithm.rawValue) (kty \(algorithm.keyType))")
        }
        guard jwk.crv == algorithm.curve else {
            throw KeyError(
                "crv \(jwk.crv.map { quote($0) } ?? "missing") does not fit alg \(algorithm.rawValue)" + (algorithm.curve.map { " (crv \($0))" } ?? " (no crv)")
            )
        }
        if let use = jwk.use, use != "sig" { throw KeyError("use \(quote(use)) is not sig") }
        let kid = JWKIdentifier(string: jwk.kid)
        switch algorithm {
        case .hs256:
            guard jwk.x == nil, jwk.y == nil, jwk.d == nil else { throw KeyError("an oct key has only k") }
            let secret = try bytes(jwk.k, "k")
            // RFC 7518 §3.2: a key at least as long as the hash; jwt-kit asserts it.
            guard secret.count >= 32 else { throw KeyError("k is \(secret.count) bytes; HS256 needs at least 32") }
            guard !refusingPublishedKeys || !PublishedKeys.secrets.contains(secret) else { throw KeyError("k: \(PublishedKeys.refusal)") }
            await collection.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256, kid: kid)
        case .es256:
            guard jwk.k == nil else { throw KeyError("an EC key has no k") }
            let x = try bytes(jwk.x, "x", count: 32)
            let y = try bytes(jwk.y, "y", count: 32)
            guard !refusingPublishedKeys || !PublishedKeys.publicKeys.contains(x) else { throw KeyError("x: \(PublishedKeys.refusal)") }
            do {
                let publicKey = try ES256PublicKey(parameters: (Base64URL.encode(x), Base64URL.encode(y)))
                if let d = jwk.d {
                    _ = try bytes(d, "d", count: 32)
                    let privateKey = try ES256PrivateKey(key: d)
                    guard privateKey.publicKey == publicKey else { throw KeyError("d does not belong to x and y") }
                    await collection.add(ecdsa: privateKey, kid: kid)
                } else {
                    await collection.add(ecdsa: publicKey, kid: kid)
                }
            } catch let error as KeyError {
                throw error
            } catch {
                throw KeyError("x, y or d is not a P-256 key (\(error))")
            }
        case .edDSA:
            guard jwk.k == nil, jwk.y == nil else { throw KeyError("an OKP key has only x and d") }
            let x = try bytes(jwk.x, "x", count: 32)
            guard !refusingPublishedKeys || !PublishedKeys.publicKeys.contains(x) else { throw KeyError("x: \(PublishedKeys.refusal)") }
            do {
                let publicKey = try EdDSA.PublicKey(x: Base64URL.encode(x), curve: .ed25519)
                if let d = jwk.d {
                    _ = try bytes(d, "d", count: 32)
                    let privateKey = try EdDSA.PrivateKey(d: d, curve: .ed25519)
                    guard privateKey.publicKey == publicKey else { throw KeyError("d does not belong to x") }
                    await collection.add(eddsa: privateKey, kid: kid)
                } else {
                    await collection.add(eddsa: publicKey, kid: kid)
                }
            } catch let error as KeyError {
                throw error
            } catch {
                throw KeyError("x or d is not an Ed25519 key (\(error))")
            }
        }
        return algorithm
    }

    private static func bytes(_ member: String?, _ name: String, count: Int? = nil) throws(KeyError) -> [UInt8] {
        guard let member else { throw KeyError("\(name) is missing") }
        guard let bytes = Base64URL.decode(member) else { throw KeyError("\(name) is not unpadded base64url") }
        if let count, bytes.count != count { throw KeyError("\(name) is \(bytes.count) bytes, not \(count)") }
        return bytes
    }

    /// Signs `claims` with the key `keyID`, which must have its private part.
    public func mint(_ claims: TokenClaims, keyID: String) async throws(MintError) -> String {
        guard let key = keys[keyID] else { throw MintError("no key \(quote(keyID)) in \(source)") }
        guard key.canSign else {
            throw MintError("key \(quote(keyID)) in \(source) has no private part (d); it can verify, not sign")
        }
        do {
            return try await collection.sign(ClaimsEnvelope(claims), kid: JWKIdentifier(string: keyID))
        } catch {
            throw MintError("signing with key \(quote(keyID)) failed: \(error)")
        }
    }
}

/// What is wrong with one key of a key file.
struct KeyError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Why a token could not be minted: no such key, no private part, a signing failure.
public struct MintError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
