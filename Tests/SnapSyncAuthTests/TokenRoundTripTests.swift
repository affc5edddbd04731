import Foundation
import Testing
@testable import SnapSyncAuth

/// Minting and verifying with each algorithm, through jwt-kit both ways.
@Suite struct TokenRoundTripTests {
    @Test(arguments: ["hs", "es", "ed"])
    func mintedTokenVerifies(keyID: String) async throws {
        let keys = try await AuthFixtures.keys()
        let claims = try AuthFixtures.claims(grants: ["board:*=read,write", "admin:1=admin"])
        let token = try await keys.mint(claims, keyID: keyID)
        let header = try #require(Base64URL.decode(token.split(separator: ".")[0]))
        let fields = try #require(try JSONSerialization.jsonObject(with: Data(header)) as? [String: String])
        #expect(fields["alg"] == keys.algorithm(ofKey: keyID)?.rawValue)
        #expect(fields["kid"] == keyID)

        let principal = try TokenVerifier(keys: keys).verify(token, now: AuthFixtures.now)
        #expect(principal.subject == "alice")
        #expect(principal.keyID == keyID)
        #expect(principal.expiresAt == claims.expiresAt)
        #expect(principal.grants == claims.grants)
        #expect(principal.allows(.write, room: "board:42"))
        #expect(principal.allows(.admin, room: "admin:1"))
        #expect(!principal.allows(.admin, room: "board:42"))
        #expect(!principal.allows(.read, room: "admin:1"))
    }

    @Test func verificationOnlyKeysVerifyButDoNotMint() async throws {
        let full = try await AuthFixtures.keys()
        let verifying = try await AuthKeySet.load(JSONWebKeySet(keys: AuthFixtures.keyFile.keys.map(\.verificationOnly)))
        for keyID in ["es", "ed"] {
            let token = try await full.mint(AuthFixtures.claims(), keyID: keyID)
            #expect(try TokenVerifier(keys: verifying).verify(token, now: AuthFixtures.now).subject == "alice")
            await #expect(throws: MintError.self) { try await verifying.mint(AuthFixtures.claims(), keyID: keyID) }
        }
        #expect(AuthFixtures.keyFile.keys.first { $0.kid == "hs" }!.verificationOnly.k != nil)
    }

    @Test func mintingWithAnUnknownKeyIsRefused() async throws {
        let keys = try await AuthFixtures.keys()
        await #expect(throws: MintError.self) { try await keys.mint(AuthFixtures.claims(), keyID: "nope") }
    }
}
