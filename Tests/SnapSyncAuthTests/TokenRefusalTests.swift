import Foundation
import Testing
@testable import SnapSyncAuth

/// Every way a token is refused before its claims are looked at, and what the refusal says.
@Suite struct TokenRefusalTests {
    private func refusal(_ token: String, keys: AuthKeySet) -> TokenRefusal? {
        do {
            _ = try TokenVerifier(keys: keys).verify(token, now: AuthFixtures.now)
            return nil
        } catch {
            // The reason goes to the client and the log: never the token nor its signature.
            #expect(!error.description.contains(token))
            if let signature = token.split(separator: ".", omittingEmptySubsequences: false).last, signature.count > 8 {
                #expect(!error.description.contains(signature))
            }
            return error
        }
    }

    @Test func missingToken() async throws {
        #expect(refusal("", keys: try await AuthFixtures.keys()) == .missing)
    }

    @Test func garbageIsMalformedEncoding() async throws {
        let keys = try await AuthFixtures.keys()
        #expect(refusal("not a token", keys: keys) == .malformed(part: .encoding, reason: "not three parts separated by dots (1 parts)"))
        #expect(refusal("a.b.c.d", keys: keys) == .malformed(part: .encoding, reason: "not three parts separated by dots (4 parts)"))
        let long = String(repeating: "a", count: TokenVerifier.maxTokenBytes + 1)
        #expect(refusal(long, keys: keys) == .malformed(part: .encoding, reason: "longer than 8192 bytes"))
    }

    @Test func eachBrokenPartIsNamed() async throws {
        let keys = try await AuthFixtures.keys()
        let good = try await keys.mint(AuthFixtures.claims(), keyID: "es")
        let parts = good.split(separator: ".").map(String.init)
        #expect(refusal("!!.\(parts[1]).\(parts[2])", keys: keys)?.part == .header)
        let notJSON = Base64URL.encode(Array("{alg".utf8))
        #expect(refusal("\(notJSON).\(parts[1]).\(parts[2])", keys: keys)?.part == .header)
        #expect(refusal("\(parts[0]).!!.\(parts[2])", keys: keys)?.part == .claims)
        #expect(refusal("\(parts[0]).\(notJSON).\(parts[2])", keys: keys)?.part == .claims)
        #expect(refusal("\(parts[0]).\(parts[1]).!!", keys: keys)?.part == .signature)
    }

    @Test func headerWithoutKidOrAlgIsMalformed() async throws {
        let keys = try await AuthFixtures.keys()
        let payload = try AuthFixtures.payload(AuthFixtures.claims())
        let noKid = try AuthFixtures.signedToken(header: ["alg": "ES256"], payload: payload, keyID: "es", keys: keys)
        #expect(refusal(noKid, keys: keys) == .malformed(part: .header, reason: "kid is missing"))
        let noAlg = try AuthFixtures.signedToken(header: ["kid": "es"], payload: payload, keyID: "es", keys: keys)
        #expect(refusal(noAlg, keys: keys) == .malformed(part: .header, reason: "alg is missing"))
        let crit = try AuthFixtures.signedToken(
            header: ["alg": "ES256", "kid": "es", "crit": ["exp"]], payload: payload, keyID: "es", keys: keys)
        #expect(refusal(crit, keys: keys) == .malformed(part: .header, reason: "crit is not supported"))
    }

    @Test func algNoneIsRefusedWhateverTheKid() async throws {
        let keys = try await AuthFixtures.keys()
        let payload = try AuthFixtures.base64URL(json: AuthFixtures.payload(AuthFixtures.claims()))
        for (alg, kid) in [("none", "hs"), ("None", "es"), ("NONE", "unknown")] {
            let header = try AuthFixtures.base64URL(json: ["alg": alg, "kid": kid])
            #expect(refusal("\(header).\(payload).", keys: keys) == .algorithmNone)
            // With a signature copied from a real token, too.
            let real = try await keys.mint(AuthFixtures.claims(), keyID: "hs").split(separator: ".")[2]
            #expect(refusal("\(header).\(payload).\(real)", keys: keys) == .algorithmNone)
        }
        #expect(TokenRefusal.algorithmNone.description.contains("alg none"))
    }

    /// The classic confusion: an HS256 token whose HMAC secret is the ES256 key's public point,
    /// which anyone has. It must be refused for its algorithm, before any signature check.
    @Test func hs256TokenAgainstAnES256KeyIsRefused() async throws {
        let keys = try await AuthFixtures.keys()
        let es = AuthFixtures.keyFile.keys.first { $0.kid == "es" }!
        let point = [0x04] + Base64URL.decode(es.x!)! + Base64URL.decode(es.y!)!
        let forger = try await AuthKeySet.load(
            JSONWebKeySet(keys: [JSONWebKey(kty: "oct", kid: "es", alg: "HS256", k: Base64URL.encode(point))]))
        let forged = try await forger.mint(AuthFixtures.claims(grants: ["*=read,write,admin"]), keyID: "es")
        #expect(refusal(forged, keys: keys) == .algorithmNotAllowed(algorithm: "HS256", keyID: "es", keyAlgorithm: .es256))
        #expect(
            TokenRefusal.algorithmNotAllowed(algorithm: "HS256", keyID: "es", keyAlgorithm: .es256).description
                == "algorithm \"HS256\" not allowed for key \"es\", which is for ES256 only")
    }

    @Test func eachKeyVerifiesOnlyItsAlgorithm() async throws {
        let keys = try await AuthFixtures.keys()
        let payload = try AuthFixtures.payload(AuthFixtures.claims())
        // A token signed by the EdDSA key but claiming to be ES256 for kid ed, and the reverse.
        let edAsES = try AuthFixtures.signedToken(header: ["alg": "ES256", "kid": "ed"], payload: payload, keyID: "ed", keys: keys)
        #expect(refusal(edAsES, keys: keys) == .algorithmNotAllowed(algorithm: "ES256", keyID: "ed", keyAlgorithm: .edDSA))
        let esAsEd = try AuthFixtures.signedToken(header: ["alg": "EdDSA", "kid": "es"], payload: payload, keyID: "es", keys: keys)
        #expect(refusal(esAsEd, keys: keys) == .algorithmNotAllowed(algorithm: "EdDSA", keyID: "es", keyAlgorithm: .es256))
        for alg in ["RS256", "HS512", "ES384", "hs256"] {
            let token = try AuthFixtures.signedToken(header: ["alg": alg, "kid": "hs"], payload: payload, keyID: "hs", keys: keys)
            #expect(refusal(token, keys: keys) == .algorithmNotAllowed(algorithm: alg, keyID: "hs", keyAlgorithm: .hs256))
        }
    }

    @Test func unknownKid() async throws {
        let keys = try await AuthFixtures.keys()
        let other = try await AuthKeySet.load(JSONWebKeySet(keys: [KeyGenerator.generate(.es256, keyID: "gone")]))
        let token = try await other.mint(AuthFixtures.claims(), keyID: "gone")
        #expect(refusal(token, keys: keys) == .unknownKeyID("gone"))
        #expect(TokenRefusal.unknownKeyID("a\nb").description == #"unknown key id (kid) "a\nb""#)
    }

    @Test(arguments: [SigningAlgorithm.hs256, .es256, .edDSA])
    func badSignature(algorithm: SigningAlgorithm) async throws {
        let keys = try await AuthFixtures.keys()
        let keyID = ["HS256": "hs", "ES256": "es", "EdDSA": "ed"][algorithm.rawValue]!
        // Another key of the same algorithm under the same kid.
        let impostor = try await AuthKeySet.load(JSONWebKeySet(keys: [KeyGenerator.generate(algorithm, keyID: keyID)]))
        let token = try await impostor.mint(AuthFixtures.claims(), keyID: keyID)
        #expect(refusal(token, keys: keys) == .badSignature(keyID: keyID))
        // A real token with its payload changed (all rights everywhere), signature kept.
        let real = try await keys.mint(AuthFixtures.claims(), keyID: keyID).split(separator: ".").map(String.init)
        let escalated = try AuthFixtures.base64URL(json: AuthFixtures.payload(AuthFixtures.claims(grants: ["*=read,write,admin"])))
        #expect(refusal("\(real[0]).\(escalated).\(real[2])", keys: keys) == .badSignature(keyID: keyID))
        // A signature cut short, and none at all.
        #expect(refusal("\(real[0]).\(real[1]).\(real[2].dropLast(4))", keys: keys) == .badSignature(keyID: keyID))
        #expect(refusal("\(real[0]).\(real[1]).", keys: keys) == .badSignature(keyID: keyID))
    }
}

extension TokenRefusal {
    var part: TokenPart? {
        if case .malformed(let part, _) = self { part } else { nil }
    }
}
