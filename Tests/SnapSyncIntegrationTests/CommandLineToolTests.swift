import Foundation
import SnapSyncTestThreads
import Testing
@testable import SnapSyncAuth

/// `snapsyncd keygen` and `snapsyncd token`, the real binary, checked with the module. On a thread
/// of its own: each test waits for child processes, which would hold the cooperative pool.
@Suite(.ownThread("tools")) struct CommandLineToolTests {
    private func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("snapsync-auth-cli-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test(arguments: ["ES256", "EdDSA", "HS256"])
    func keygenThenTokenVerifies(alg: String) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = directory.appendingPathComponent("keys.json").path
        let daemonKeys = directory.appendingPathComponent("daemon-keys.json").path

        let keygen = try SnapsyncdTool.run(["keygen", "--alg", alg, "--kid", "k1", "--out", keys, "--public-out", daemonKeys])
        #expect(keygen.status == 0, "\(keygen.stderr)")
        // A second key appended to the same files.
        let second = try SnapsyncdTool.run(["keygen", "--alg", "EdDSA", "--kid", "k2", "--out", keys, "--public-out", daemonKeys])
        #expect(second.status == 0, "\(second.stderr)")
        let written = try JSONDecoder().decode(JSONWebKeySet.self, from: Data(contentsOf: URL(fileURLWithPath: keys)))
        #expect(written.keys.map(\.kid) == ["k1", "k2"])
        #expect(written.keys[0].alg == alg)
        let published = try JSONDecoder().decode(JSONWebKeySet.self, from: Data(contentsOf: URL(fileURLWithPath: daemonKeys)))
        #expect(published.keys == written.keys.map(\.verificationOnly))
        #expect(published.keys[1].d == nil)
        #expect(try FileManager.default.attributesOfItem(atPath: keys)[.posixPermissions] as? Int == 0o600)

        let start = Date()
        let token = try SnapsyncdTool.run([
            "token", "--keys", keys, "--kid", "k1", "--sub", "alice", "--room", "board:*=read,write", "--room", "stats=admin",
            "--ttl", "1h", "--aud", "snapsync-test",
        ])
        let end = Date()
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout.hasSuffix("\n"))
        let printed = token.stdout.trimmingCharacters(in: .newlines)
        #expect(!printed.contains("\n"))
        // iat and exp are whole seconds: JSON integers, which every JWT library reads.
        let payload = try #require(Base64URL.decode(printed.split(separator: ".")[1]))
        let fields = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
        for claim in ["iat", "exp"] {
            let seconds = try #require(fields[claim] as? Double, "\(claim) is not a number")
            #expect(seconds == seconds.rounded(), "\(claim) has a fraction")
        }

        // The daemon's side: the file without private parts.
        let verifier = TokenVerifier(keys: try await AuthKeySet.load(contentsOf: daemonKeys), audience: "snapsync-test")
        let principal = try verifier.verify(printed)
        #expect(principal.subject == "alice")
        #expect(principal.keyID == "k1")
        #expect(principal.allows(.write, room: "board:9"))
        #expect(principal.allows(.admin, room: "stats"))
        #expect(!principal.allows(.admin, room: "board:9"))
        // exp is the tool's clock, in whole seconds, plus --ttl.
        #expect(principal.expiresAt >= start.addingTimeInterval(3600 - 1) && principal.expiresAt <= end.addingTimeInterval(3600))
        #expect(throws: TokenRefusal.wrongAudience(expected: "other", found: ["snapsync-test"])) {
            try TokenVerifier(keys: verifier.keys, audience: "other").verify(printed)
        }
    }

    @Test func keygenWithoutOutPrintsAKeyFile() async throws {
        let run = try SnapsyncdTool.run(["keygen", "--alg", "ES256", "--kid", "printed"])
        #expect(run.status == 0, "\(run.stderr)")
        let keys = try await AuthKeySet.load(jwks: Data(run.stdout.utf8))
        #expect(keys.keyIDs == ["printed"])
    }

    @Test func refusals() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let keys = directory.appendingPathComponent("keys.json").path
        let daemonKeys = directory.appendingPathComponent("daemon-keys.json").path
        #expect(try SnapsyncdTool.run(["keygen", "--alg", "ES256", "--kid", "k1", "--out", keys, "--public-out", daemonKeys]).status == 0)

        let duplicate = try SnapsyncdTool.run(["keygen", "--alg", "HS256", "--kid", "k1", "--out", keys])
        #expect(duplicate.status != 0)
        #expect(duplicate.stderr.contains(#"already has a key with kid "k1""#))
        // k1 is new in the first file but not in the second: neither is written.
        let fresh = directory.appendingPathComponent("fresh.json").path
        let halfDuplicate = try SnapsyncdTool.run(["keygen", "--alg", "ES256", "--kid", "k1", "--out", fresh, "--public-out", daemonKeys])
        #expect(halfDuplicate.status != 0)
        #expect(!FileManager.default.fileExists(atPath: fresh))
        let badAlg = try SnapsyncdTool.run(["keygen", "--alg", "RS256", "--kid", "k9"])
        #expect(badAlg.status != 0)
        #expect(badAlg.stderr.contains("--alg must be one of ES256, EdDSA, HS256"))

        let base = ["token", "--keys", keys, "--kid", "k1", "--sub", "alice"]
        let badRight = try SnapsyncdTool.run(base + ["--room", "board:*=read,delete"])
        #expect(badRight.status != 0)
        #expect(badRight.stderr.contains(#"unknown right "delete""#))
        let unknownKid = try SnapsyncdTool.run(["token", "--keys", keys, "--kid", "nope", "--sub", "alice"])
        #expect(unknownKid.status != 0)
        #expect(unknownKid.stderr.contains(#"no key "nope""#))
        let publicOnly = try SnapsyncdTool.run(["token", "--keys", daemonKeys, "--kid", "k1", "--sub", "alice"])
        #expect(publicOnly.status != 0)
        #expect(publicOnly.stderr.contains("has no private part"))
        #expect(publicOnly.stdout.isEmpty)
    }

    /// Serving is still the command itself: its --help lists the serve flags and the new tools.
    @Test func helpStillDescribesServing() throws {
        let help = try SnapsyncdTool.run(["--help"])
        #expect(help.status == 0)
        let text = help.stdout + help.stderr
        for expected in ["--port", "--data-dir", "--max-frame-bytes", "token", "keygen"] {
            #expect(text.contains(expected), "--help does not mention \(expected)")
        }
    }
}
