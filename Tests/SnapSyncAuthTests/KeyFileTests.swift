import Foundation
import Testing
@testable import SnapSyncAuth

/// The key file: what is accepted, what is refused and why, and reloading.
@Suite struct KeyFileTests {
    private func refusal(_ keys: [JSONWebKey]) async -> String? {
        do {
            _ = try await AuthKeySet.load(JSONWebKeySet(keys: keys))
            return nil
        } catch {
            return error.reason
        }
    }

    private func refusal(json: String) async -> String? {
        do {
            _ = try await AuthKeySet.load(jwks: Data(json.utf8))
            return nil
        } catch {
            return error.reason
        }
    }

    private static let es = KeyGenerator.generate(.es256, keyID: "es")
    private static let ed = KeyGenerator.generate(.edDSA, keyID: "ed")
    private static let hs = KeyGenerator.generate(.hs256, keyID: "hs")

    @Test func generatedKeysLoad() async throws {
        let keys = try await AuthKeySet.load(JSONWebKeySet(keys: [Self.es, Self.ed, Self.hs]))
        #expect(keys.keyIDs == ["ed", "es", "hs"])
        #expect(keys.algorithm(ofKey: "es") == .es256)
        #expect(keys.algorithm(ofKey: "ed") == .edDSA)
        #expect(keys.algorithm(ofKey: "hs") == .hs256)
        #expect(Self.es.d != nil && Self.es.x != nil && Self.es.y != nil && Self.es.crv == "P-256" && Self.es.kty == "EC")
        #expect(Self.ed.d != nil && Self.ed.x != nil && Self.ed.y == nil && Self.ed.crv == "Ed25519" && Self.ed.kty == "OKP")
        #expect(Base64URL.decode(Self.hs.k!)?.count == 32)
    }

    /// docs/auth.md's example key file, verbatim: every key in it has its private half in print
    /// (our docs, RFC 7515 A.3, RFC 8037 A), so each is refused by itself, and so is the
    /// example secret of Protocol/AUTH.md.
    @Test func theDocumentedExampleKeysAreRefused() async throws {
        let json = """
            {"keys": [
              {"kty": "oct", "kid": "hs-2026", "alg": "HS256", "use": "sig",
               "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYnl0ZXM"},
              {"kty": "EC", "crv": "P-256", "kid": "es-2026", "alg": "ES256", "use": "sig",
               "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
               "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
              {"kty": "OKP", "crv": "Ed25519", "kid": "ed-2026", "alg": "EdDSA", "use": "sig",
               "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
            ]}
            """
        let file = try JSONDecoder().decode(JSONWebKeySet.self, from: Data(json.utf8))
        let fields = ["k", "x", "x"]
        for (index, key) in file.keys.enumerated() {
            let reason = await refusal([key])
            #expect(reason?.hasPrefix(#"keys[0] (kid "\#(key.kid)"): \#(fields[index]): it is a published example key"#) == true, "\(reason ?? "loaded")")
        }
        var protocolExample = Self.hs
        protocolExample.k = "ZXhhbXBsZSBzZWNyZXQ6IG5ldmVyIHVzZSBpdCEhISE"
        #expect(await refusal([Self.es, protocolExample])?.hasPrefix(#"keys[1] (kid "hs"): k: it is a published example key"#) == true)
        // The same file with keys of one's own loads.
        let keys = try await AuthKeySet.load(JSONWebKeySet(keys: [Self.hs, Self.es, Self.ed]))
        #expect(keys.keyIDs == ["ed", "es", "hs"])
    }

    /// Unused trailing bits that are not zero: no encoder writes that, so it is refused rather
    /// than read as the same key as its canonical spelling.
    @Test func nonCanonicalBase64URLIsRefused() async {
        let canonical = Self.hs.k!
        #expect(canonical.utf8.count == 43, "32 bytes: 2 unused bits in the last character")
        let last = canonical.last!
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let value = alphabet.firstIndex(of: last)!
        #expect(value & 3 == 0, "a canonical encoding's unused bits are zero")
        var key = Self.hs
        for bits in 1...3 {
            key.k = String(canonical.dropLast()) + String(alphabet[value | bits])
            #expect(await refusal([key]) == #"keys[0] (kid "hs"): k is not unpadded base64url"#)
        }
        #expect(Base64URL.decode("AB") == nil && Base64URL.decode("AA") == [0])
        #expect(Base64URL.decode("AAB") == nil && Base64URL.decode("AAE") == [0, 1])
    }

    @Test func refusedKeys() async {
        var noAlg = Self.es
        noAlg.alg = "RS256"
        #expect(await refusal([noAlg]) == #"keys[0] (kid "es"): alg "RS256" is not supported (HS256, ES256, EdDSA)"#)
        var wrongType = Self.es
        wrongType.kty = "OKP"
        #expect(await refusal([wrongType]) == #"keys[0] (kid "es"): kty "OKP" does not fit alg ES256 (kty EC)"#)
        var wrongCurve = Self.ed
        wrongCurve.crv = "X25519"
        #expect(await refusal([wrongCurve]) == #"keys[0] (kid "ed"): crv "X25519" does not fit alg EdDSA (crv Ed25519)"#)
        var encryption = Self.ed
        encryption.use = "enc"
        #expect(await refusal([encryption]) == #"keys[0] (kid "ed"): use "enc" is not sig"#)
        var short = Self.hs
        short.k = Base64URL.encode([UInt8](repeating: 7, count: 31))
        #expect(await refusal([short]) == #"keys[0] (kid "hs"): k is 31 bytes; HS256 needs at least 32"#)
        var padded = Self.hs
        padded.k = padded.k! + "="
        #expect(await refusal([padded]) == #"keys[0] (kid "hs"): k is not unpadded base64url"#)
        var noX = Self.es
        noX.x = nil
        #expect(await refusal([noX]) == #"keys[0] (kid "es"): x is missing"#)
        var strangers = Self.es
        strangers.d = KeyGenerator.generate(.es256, keyID: "other").d
        #expect(await refusal([strangers]) == #"keys[0] (kid "es"): d does not belong to x and y"#)
        var edStrangers = Self.ed
        edStrangers.d = KeyGenerator.generate(.edDSA, keyID: "other").d
        #expect(await refusal([edStrangers]) == #"keys[0] (kid "ed"): d does not belong to x"#)
        var offCurve = Self.es
        offCurve.y = offCurve.x
        #expect(await refusal([offCurve])?.hasPrefix(#"keys[0] (kid "es"): x, y or d is not a P-256 key"#) == true)
        var duplicate = Self.hs
        duplicate.kid = "es"
        #expect(await refusal([Self.es, duplicate]) == #"keys[1] (kid "es"): kid is used by an earlier key"#)
        #expect(await refusal([]) == "keys is empty")
    }

    @Test func refusedFiles() async {
        #expect(await refusal(json: "") == "the file is not JSON")
        #expect(await refusal(json: "[]") == "the file is not a JSON object")
        #expect(await refusal(json: #"{"keys": {}}"#) == "keys is not an array")
        #expect(await refusal(json: #"{"keys": [{"kty": "RSA", "kid": "r", "n": "AQAB", "e": "AQAB"}]}"#) == "keys[0].alg is missing")
        #expect(await refusal(json: #"{"keys": [{"kty": "RSA", "kid": "r", "alg": "RS256"}]}"#)?.contains("not supported") == true)
        do {
            _ = try await AuthKeySet.load(contentsOf: "/nonexistent/keys.json")
            Issue.record("a missing file loaded")
        } catch {
            #expect(error.description == "auth key file /nonexistent/keys.json: cannot be read (No such file or directory)")
        }
    }

    @Test func reloadSwapsInANewFileAndKeepsTheKeysOnABadOne() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("snapsync-auth-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("keys.json").path
        let first = KeyGenerator.generate(.es256, keyID: "k1")
        let second = KeyGenerator.generate(.edDSA, keyID: "k2")
        try KeyFileWriter.render([first]).write(to: URL(fileURLWithPath: path))
        let minter = try await AuthKeySet.load(JSONWebKeySet(keys: [first, second]))
        let oldToken = try await minter.mint(AuthFixtures.claims(), keyID: "k1")
        let newToken = try await minter.mint(AuthFixtures.claims(), keyID: "k2")

        let store = try await AuthKeyStore(path: path)
        #expect(try store.verify(oldToken, now: AuthFixtures.now).keyID == "k1")
        #expect(throws: TokenRefusal.unknownKeyID("k2")) { try store.verify(newToken, now: AuthFixtures.now) }

        // A broken file, then a file with one bad key among good ones: both refused whole.
        for broken in [Data("{\"keys\": [".utf8), try KeyFileWriter.render([second, JSONWebKey(kty: "oct", kid: "x", alg: "HS256", k: "c2hvcnQ")])] {
            try broken.write(to: URL(fileURLWithPath: path))
            await #expect(throws: AuthKeyFileError.self) { try await store.reload() }
            #expect(try store.verify(oldToken, now: AuthFixtures.now).keyID == "k1")
            #expect(throws: TokenRefusal.unknownKeyID("k2")) { try store.verify(newToken, now: AuthFixtures.now) }
        }

        try KeyFileWriter.render([second]).write(to: URL(fileURLWithPath: path))
        #expect(try await store.reload() == ["k2"])
        #expect(try store.verify(newToken, now: AuthFixtures.now).keyID == "k2")
        #expect(throws: TokenRefusal.unknownKeyID("k1")) { try store.verify(oldToken, now: AuthFixtures.now) }
    }

    @Test func appendingKeepsTheFileValidAndPrivate() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("snapsync-auth-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("keys.json").path
        try await KeyFileWriter.append(Self.es, to: path)
        try await KeyFileWriter.append(Self.hs, to: path)
        await #expect(throws: AuthKeyFileError(path: path, reason: #"already has a key with kid "es""#)) {
            try await KeyFileWriter.append(Self.es, to: path)
        }
        #expect(try await AuthKeySet.load(contentsOf: path).keyIDs == ["es", "hs"])
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try Data("not json".utf8).write(to: URL(fileURLWithPath: path))
        await #expect(throws: AuthKeyFileError.self) { try await KeyFileWriter.append(Self.ed, to: path) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "not json")
    }
}
