import Foundation
import JWTKit
@testable import SnapSyncAuth

/// Keys, claims and hand-made tokens shared by the tests. One key per algorithm, with kids
/// `hs`, `es` and `ed`, all with their private parts; a fixed clock.
enum AuthFixtures {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static let keyFile = JSONWebKeySet(keys: [
        KeyGenerator.generate(.hs256, keyID: "hs"),
        KeyGenerator.generate(.es256, keyID: "es"),
        KeyGenerator.generate(.edDSA, keyID: "ed"),
    ])

    static func keys() async throws -> AuthKeySet { try await AuthKeySet.load(keyFile) }

    static func claims(
        subject: String = "alice", expiresIn: Double = 3600, notBefore: Double? = nil, issuedAt: Double? = 0,
        audience: [String] = [], grants: [String] = ["board:*=read,write"]
    ) throws -> TokenClaims {
        TokenClaims(
            subject: subject, expiresAt: now.addingTimeInterval(expiresIn), notBefore: notBefore.map(now.addingTimeInterval),
            issuedAt: issuedAt.map(now.addingTimeInterval), audience: audience, grants: try grants.map { try RoomGrant(spec: $0) })
    }

    static func base64URL(json: Any) throws -> String {
        Base64URL.encode(try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys]))
    }

    /// A token with this header and payload (any JSON, even not claims), signed with jwt-kit's
    /// signer for the key `keyID` of `keys`: what a client holding that key could send.
    static func signedToken(header: [String: Any], payload: Any, keyID: String, keys: AuthKeySet) throws -> String {
        let input = "\(try base64URL(json: header)).\(try base64URL(json: payload))"
        let signature = try keys.keys[keyID]!.verifier.sign(Array(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }

    /// The claims payload as JSON, to be edited into malformed variants.
    static func payload(_ claims: TokenClaims) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: JSONEncoder().encode(claims)) as! [String: Any]
    }
}
