import Foundation
import Testing
@testable import SnapSyncAuth

/// Claims checked after the signature: times with the leeway, the audience, and the shape of
/// the claims (sub, exp, rooms and their grants).
@Suite struct TokenClaimsTests {
    private func verify(
        _ claims: TokenClaims, audience: String? = nil, leeway: Duration = TokenVerifier.defaultLeeway
    ) async throws -> Result<Principal, TokenRefusal> {
        let keys = try await AuthFixtures.keys()
        let token = try await keys.mint(claims, keyID: "ed")
        let verifier = TokenVerifier(keys: keys, audience: audience, leeway: leeway)
        return Result { () throws(TokenRefusal) in try verifier.verify(token, now: AuthFixtures.now) }
    }

    private func refusal(payload edit: (inout [String: Any]) -> Void) async throws -> TokenRefusal? {
        let keys = try await AuthFixtures.keys()
        var payload = try AuthFixtures.payload(AuthFixtures.claims())
        edit(&payload)
        let token = try AuthFixtures.signedToken(header: ["alg": "ES256", "kid": "es"], payload: payload, keyID: "es", keys: keys)
        do {
            _ = try TokenVerifier(keys: keys).verify(token, now: AuthFixtures.now)
            return nil
        } catch {
            return error
        }
    }

    @Test func expiredWithinAndBeyondTheLeeway() async throws {
        // Expired "on or after" exp plus the leeway (30 s by default).
        #expect(try await verify(AuthFixtures.claims(expiresIn: -29)).isSuccess)
        #expect(try await verify(AuthFixtures.claims(expiresIn: -29.5)).isSuccess)
        let atEdge = AuthFixtures.now.addingTimeInterval(-30)
        #expect(try await verify(AuthFixtures.claims(expiresIn: -30)).refusal == .expired(at: atEdge))
        #expect(try await verify(AuthFixtures.claims(expiresIn: -1), leeway: .zero).refusal == .expired(at: AuthFixtures.now.addingTimeInterval(-1)))
        #expect(try await verify(AuthFixtures.claims(expiresIn: 0), leeway: .zero).refusal == .expired(at: AuthFixtures.now))
        #expect(try await verify(AuthFixtures.claims(expiresIn: -100), leeway: .seconds(101)).isSuccess)
        #expect(TokenRefusal.expired(at: atEdge).description == "expired at 2027-01-15T07:59:30Z")
    }

    @Test func notYetValidWithinAndBeyondTheLeeway() async throws {
        #expect(try await verify(AuthFixtures.claims(notBefore: 30)).isSuccess)
        let beyond = AuthFixtures.now.addingTimeInterval(31)
        #expect(try await verify(AuthFixtures.claims(notBefore: 31)).refusal == .notYetValid(until: beyond))
        #expect(try await verify(AuthFixtures.claims(notBefore: 1), leeway: .zero).refusal == .notYetValid(until: AuthFixtures.now.addingTimeInterval(1)))
        #expect(try await verify(AuthFixtures.claims(notBefore: 0), leeway: .zero).isSuccess)
        #expect(TokenRefusal.notYetValid(until: beyond).description == "not valid before 2027-01-15T08:00:31Z")
    }

    @Test func issuedInTheFutureBeyondTheLeeway() async throws {
        #expect(try await verify(AuthFixtures.claims(issuedAt: 30)).isSuccess)
        #expect(try await verify(AuthFixtures.claims(issuedAt: 31)).refusal == .issuedInTheFuture(at: AuthFixtures.now.addingTimeInterval(31)))
        #expect(try await verify(AuthFixtures.claims(issuedAt: nil)).isSuccess)
    }

    @Test func audience() async throws {
        #expect(try await verify(AuthFixtures.claims(audience: ["snapsync-prod"]), audience: "snapsync-prod").isSuccess)
        #expect(try await verify(AuthFixtures.claims(audience: ["web", "snapsync-prod"]), audience: "snapsync-prod").isSuccess)
        #expect(
            try await verify(AuthFixtures.claims(audience: ["snapsync-dev"]), audience: "snapsync-prod").refusal
                == .wrongAudience(expected: "snapsync-prod", found: ["snapsync-dev"]))
        // A server with an audience refuses tokens for none; one without refuses tokens for one.
        #expect(try await verify(AuthFixtures.claims(), audience: "snapsync-prod").refusal == .wrongAudience(expected: "snapsync-prod", found: []))
        #expect(try await verify(AuthFixtures.claims(audience: ["snapsync-dev"])).refusal == .wrongAudience(expected: nil, found: ["snapsync-dev"]))
        #expect(
            TokenRefusal.wrongAudience(expected: "b", found: ["a"]).description == #"wrong audience: the token is for "a", this server is "b""#)
    }

    @Test func requiredClaimsAndTheirTypes() async throws {
        #expect(try await refusal { $0["sub"] = nil } == .malformed(part: .claims, reason: "sub is missing"))
        #expect(try await refusal { $0["sub"] = "" } == .malformed(part: .claims, reason: "sub is empty"))
        #expect(try await refusal { $0["sub"] = 7 } == .malformed(part: .claims, reason: "sub is not a string"))
        #expect(try await refusal { $0["exp"] = nil } == .malformed(part: .claims, reason: "exp is missing"))
        #expect(try await refusal { $0["exp"] = "tomorrow" } == .malformed(part: .claims, reason: "exp is not a number"))
        #expect(
            try await refusal { $0["exp"] = -5 }
                == .malformed(part: .claims, reason: "exp is not a NumericDate from 0 through 253402300799"))
        #expect(try await refusal { $0["nbf"] = [1] } == .malformed(part: .claims, reason: "nbf is not a number"))
        #expect(try await refusal { $0["aud"] = 3 } == .malformed(part: .claims, reason: "aud is neither a string nor an array of strings"))
        #expect(try await refusal { $0["aud"] = [String]() } == .malformed(part: .claims, reason: "aud is an empty array"))
        #expect(try await refusal { $0["rooms"] = nil } == .malformed(part: .claims, reason: "rooms is missing"))
        #expect(try await refusal { $0["rooms"] = "board:1" } == .malformed(part: .claims, reason: "rooms is not an array"))
        #expect(
            try await refusal {
                $0["iss"] = "someone"; $0["jti"] = "x"
            } == nil)
    }

    @Test func malformedGrants() async throws {
        func rooms(_ value: Any) async throws -> TokenRefusal? { try await refusal { $0["rooms"] = value } }
        #expect(
            try await rooms([["match": "board:1", "rights": ["read", "delete"]]])
                == .malformed(part: .claims, reason: #"rooms[0]: rights of "board:1": unknown right "delete" (read, write, admin)"#))
        #expect(
            try await rooms([["match": "a", "rights": ["read"]], ["match": "b", "rights": ["Read"]]])
                == .malformed(part: .claims, reason: #"rooms[1]: rights of "b": unknown right "Read" (read, write, admin)"#))
        #expect(
            try await rooms([["match": "board:1", "rights": [String]()]])
                == .malformed(part: .claims, reason: #"rooms[0]: rights of "board:1" are empty"#))
        #expect(try await rooms([["match": "", "rights": ["read"]]]) == .malformed(part: .claims, reason: "rooms[0]: match is empty"))
        #expect(
            try await rooms([["match": "board:*:x", "rights": ["read"]]])
                == .malformed(part: .claims, reason: #"rooms[0]: match "board:*:x" has a * before its end (only a trailing * is allowed)"#))
        #expect(
            try await rooms([["match": "**", "rights": ["read"]]])
                == .malformed(part: .claims, reason: #"rooms[0]: match "**" has a * before its end (only a trailing * is allowed)"#))
        #expect(try await rooms([["rights": ["read"]]]) == .malformed(part: .claims, reason: "rooms[0].match is missing"))
        #expect(try await rooms([["match": "a", "rights": "read"]]) == .malformed(part: .claims, reason: "rooms[0].rights is not an array"))
        #expect(try await rooms(["board:1"]) == .malformed(part: .claims, reason: "rooms[0] is not a JSON object"))
        #expect(try await rooms([Any]()) == nil)
    }

    @Test func malformedClaimsAreReportedOnlyAfterTheSignature() async throws {
        let keys = try await AuthFixtures.keys()
        var payload = try AuthFixtures.payload(AuthFixtures.claims())
        payload["exp"] = "soon"
        let token = try AuthFixtures.signedToken(header: ["alg": "ES256", "kid": "es"], payload: payload, keyID: "es", keys: keys)
        let parts = token.split(separator: ".")
        let other = try await keys.mint(AuthFixtures.claims(), keyID: "es").split(separator: ".")[2]
        #expect(throws: TokenRefusal.badSignature(keyID: "es")) {
            try TokenVerifier(keys: keys).verify("\(parts[0]).\(parts[1]).\(other)", now: AuthFixtures.now)
        }
    }
}

extension Result where Failure == TokenRefusal {
    var isSuccess: Bool { if case .success = self { true } else { false } }
    var refusal: TokenRefusal? { if case .failure(let error) = self { error } else { nil } }
}
