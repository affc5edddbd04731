import Foundation
import Testing
import SnapSyncAuth
import SnapSyncWire
@testable import SnapSyncHub

// A verified client certificate standing in for a token (`--tls-client-grant`, docs/auth.md
// "Client certificates"), in-process: the transport's part (reading the certificate) is
// scripts/tests/test_daemon_tls.py's; here the session is handed the certificate as the
// connection hands it over, and the hub's rules are checked: sub, grants, expiry at notAfter,
// and nothing without the flag.

@Suite struct HubClientCertificateTests {
    static let subject = #"CN=carol,O=Example\, Inc.,C=FR"#

    /// A hub that authenticates, with `grants` for certificate sessions (nil: no flag).
    func harness(_ auth: AuthFixture, grants: [String]?) throws -> HubHarness {
        let parsed = try grants?.map { try RoomGrant(spec: $0) }
        return HubHarness(auth: auth) { configuration in
            var tls = TLSSettings(host: "127.0.0.1", port: 0, certificatePath: "cert.pem", keyPath: "key.pem")
            tls.clientCAPath = "ca.pem"
            tls.clientCertificateGrants = parsed
            configuration.tls = tls
        }
    }

    /// A session whose transport verified a certificate valid `validFor` seconds from `now`, and
    /// what the hub answered its HELLO with `credentials`.
    func hello(_ harness: HubHarness, validFor: Int = 60, credentials: [UInt8] = []) -> (Session, [Message]) {
        let session = harness.hub.openSession()
        session.clientCertificate = ClientCertificate(
            subject: Self.subject, notAfterSeconds: Int(AuthFixture.now.timeIntervalSince1970) + validFor)
        harness.send(.hello(versions: [ProtocolVersion.current], clientName: "test", credentials: credentials), from: session)
        return (session, harness.drain(session))
    }

    @Test func aCertificateAloneGetsTheGrantsUnderItsSubjectUntilItsNotAfter() async throws {
        let auth = try await AuthFixture.make()
        let harness = try harness(auth, grants: ["board:*=read"])
        let (session, answers) = hello(harness, validFor: 60)
        guard case .welcome = answers.first else {
            Issue.record("expected WELCOME, got \(answers)")
            return
        }
        #expect(session.principal?.subject == Self.subject && session.isAuthenticatedByCertificate)
        harness.join(session, "board:1")
        harness.send(.stats(requestID: 9), from: session)
        #expect(harness.drain(session).first?.text == "certificate of \(Self.subject) grants no admin on every room (*), which STATS needs")
        harness.hub.expireSessions(now: AuthFixture.now.addingTimeInterval(59))
        #expect(session.state == .ready)
        harness.hub.expireSessions(now: AuthFixture.now.addingTimeInterval(60))
        let expired = harness.drain(session)
        #expect(expired.map(\.errorCode) == [.tokenExpired])
        #expect(expired.first?.text?.hasPrefix("the certificate of \(Self.subject) expired at ") == true)
    }

    @Test func aTokenWinsAndARefusedOneIsNotRescued() async throws {
        let auth = try await AuthFixture.make()
        let harness = try harness(auth, grants: ["board:*=read"])
        let (session, answers) = hello(harness, credentials: try await auth.token("bob", ["notes=read"]))
        guard case .welcome = answers.first else {
            Issue.record("expected WELCOME, got \(answers)")
            return
        }
        #expect(session.principal?.subject == "bob" && !session.isAuthenticatedByCertificate)
        let (_, refused) = hello(harness, credentials: Array("not-a-token".utf8))
        #expect(refused.map(\.errorCode) == [.unauthorized])
    }

    @Test func withoutTheGrantFlagACertificateAloneIsRefused() async throws {
        let auth = try await AuthFixture.make()
        let (session, answers) = hello(try harness(auth, grants: nil))
        #expect(answers.map(\.errorCode) == [.unauthorized])
        #expect(session.principal == nil)
    }
}
