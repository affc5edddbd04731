import Foundation
import Logging
import Testing
import SnapSyncAuth
import SnapSyncWire
@testable import SnapSyncHub

// A hub that authenticates: one ES256 key (kid `k1`) in a temporary key file, tokens minted
// with it, and the hub's wall clock fixed at `AuthFixture.now` so that expiry is driven by the
// test (`Hub.expireSessions(now:)`), never by waiting.

struct AuthFixture {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// The key with its private part, for minting.
    let signing: AuthKeySet
    /// What the hub verifies with (the public part, from a file).
    let store: AuthKeyStore

    /// A fresh key; the hub allows `leeway` of clock skew (none by default, so deadlines are exact).
    static func make(leeway: Duration = .zero) async throws -> AuthFixture {
        let key = KeyGenerator.generate(.es256, keyID: "k1")
        let path = NSTemporaryDirectory() + "snapsync-hub-keys-\(UUID().uuidString).json"
        try KeyFileWriter.render([key.verificationOnly]).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let store = try await AuthKeyStore(path: path, leeway: leeway)
        return AuthFixture(signing: try await AuthKeySet.load(JSONWebKeySet(keys: [key])), store: store)
    }

    /// A token for `subject` with `grants` (`MATCH=RIGHT,...`), expiring `expiresIn` seconds after `now`.
    func token(_ grants: [String], expiresIn: Double = 3600) async throws -> [UInt8] {
        try await token("alice", grants, expiresIn: expiresIn)
    }

    func token(_ subject: String, _ grants: [String], expiresIn: Double = 3600) async throws -> [UInt8] {
        let claims = TokenClaims(
            subject: subject, expiresAt: Self.now.addingTimeInterval(expiresIn), issuedAt: Self.now,
            grants: try grants.map { try RoomGrant(spec: $0) })
        return Array(try await signing.mint(claims, keyID: "k1").utf8)
    }
}

extension HubHarness {
    /// A hub that verifies tokens with `auth`'s key, its clock at `AuthFixture.now`.
    init(auth: AuthFixture, logger: Logger? = nil, _ configure: (inout ServerConfiguration) -> Void = { _ in }) {
        self.init(logger: logger) { configuration in
            configure(&configuration)
            configuration.authKeys = auth.store
        }
        hub.wallClock = { AuthFixture.now }
    }

    /// Opens a session and sends HELLO with `token`; returns what the hub answered.
    func hello(_ token: [UInt8]) -> (Session, [Message]) {
        let session = hub.openSession()
        send(.hello(versions: [ProtocolVersion.current], clientName: "test", credentials: token), from: session)
        return (session, drain(session))
    }

    /// A session authenticated with `token`, its WELCOME read.
    func connect(token: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> Session {
        let (session, answer) = hello(token)
        #expect(
            answer.count == 1 && answer.first.map { if case .welcome = $0 { true } else { false } } == true,
            "expected WELCOME, got \(answer)", sourceLocation: sourceLocation)
        return session
    }
}

extension Message {
    /// The text of an ERROR, REJECT or LEFT; nil for anything else.
    var text: String? {
        switch self {
        case .error(_, let text), .reject(_, _, _, _, let text), .left(_, _, let text): text
        default: nil
        }
    }
}
