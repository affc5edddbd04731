import Foundation
import Testing
@testable import SnapSyncAuth

/// Protocol/AUTH.md §6, read from the document itself: its token verifies with its key and
/// grants what the document says. The daemon refuses that key in a key file (`PublishedKeys`),
/// so this is where the example is checked against our verifier (scripts/tests checks it with
/// Python's HMAC, and that the daemon refuses the key).
@Suite struct PublishedExampleTests {
    /// The example block of Protocol/AUTH.md: the key's JSON and the token.
    private static func example() throws -> (key: JSONWebKey, token: String) {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Protocol/AUTH.md").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let block = try #require(text.components(separatedBy: "<!-- BEGIN token example -->").dropFirst().first)
        let keyJSON = try #require(block.components(separatedBy: "```json\n").dropFirst().first?.components(separatedBy: "\n```").first)
        let key = try JSONDecoder().decode(JSONWebKey.self, from: Data(keyJSON.utf8))
        let afterToken = try #require(block.components(separatedBy: "as `credentials` carries it:\n\n```\n").dropFirst().first)
        let token = try #require(afterToken.components(separatedBy: "\n```").first)
        return (key, token)
    }

    @Test func theExampleTokenVerifiesAndGrantsWhatTheDocumentSays() async throws {
        let (key, token) = try Self.example()
        #expect(token.utf8.count == 290)
        let keys = try await AuthKeySet.load(JSONWebKeySet(keys: [key]), source: "AUTH.md", refusingPublishedKeys: false)
        let principal = try TokenVerifier(keys: keys).verify(token, now: Date(timeIntervalSince1970: 1_767_225_600))
        #expect(principal.subject == "alice" && principal.keyID == "example")
        #expect(principal.allows(.read, room: "board:7") && principal.allows(.write, room: "board:7"))
        #expect(principal.allows(.read, room: "todo") && !principal.allows(.write, room: "todo"))
        #expect(!principal.allows(.read, room: "other") && !principal.allows(.admin, room: "board:7"))
    }

    @Test func aKeyFileWithTheExampleKeyIsRefused() async throws {
        let (key, _) = try Self.example()
        do {
            _ = try await AuthKeySet.load(JSONWebKeySet(keys: [key]))
            Issue.record("the published example key was loaded")
        } catch {
            #expect(error.reason.hasPrefix(#"keys[0] (kid "example"): k: it is a published example key"#), "\(error.reason)")
        }
    }
}
