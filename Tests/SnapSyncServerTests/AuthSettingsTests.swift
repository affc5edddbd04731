import Testing
import SnapSyncTestThreads
@testable import SnapSyncServer
import SnapSyncHub

// The start-up rules of the authentication flags: secure by default (docs/auth.md).

@Suite(.unitTests) struct AuthSettingsTests {
    private func mode(_ settings: AuthSettings, host: String) -> Result<AuthMode, ConfigurationError> {
        Result { () throws(ConfigurationError) in try settings.check(listeningOn: host) }
    }

    @Test func theModeFollowsTheKeyFileUnlessGiven() throws {
        #expect(AuthSettings().effectiveMode == .off)
        #expect(AuthSettings(keyFile: "keys.json").effectiveMode == .required)
        #expect(AuthSettings(keyFile: "keys.json", mode: .off).effectiveMode == .off)
        #expect(try mode(AuthSettings(keyFile: "keys.json"), host: "0.0.0.0").get() == .required)
    }

    @Test func requiredNeedsAKeyFile() {
        guard case .failure(let error) = mode(AuthSettings(mode: .required), host: "127.0.0.1") else {
            Issue.record("--auth required without --auth-keys was accepted")
            return
        }
        #expect(error.message.contains("--auth required needs --auth-keys"))
    }

    @Test func offIsForLoopbackOnlyUnlessInsecureIsSaid() throws {
        for host in ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"] {
            #expect(try mode(AuthSettings(), host: host).get() == .off, "\(host)")
        }
        for host in ["0.0.0.0", "::", "10.1.2.3", "::ffff:10.0.0.1"] {
            guard case .failure(let error) = mode(AuthSettings(), host: host) else {
                Issue.record("--auth off on \(host) was accepted")
                continue
            }
            #expect(error.message.contains("not a loopback address") && error.message.contains("--insecure-no-auth"))
            #expect(try mode(AuthSettings(insecureNoAuth: true), host: host).get() == .off)
        }
    }

    @Test func insecureNoAuthIsRefusedWhenTheDaemonAuthenticates() {
        guard case .failure(let error) = mode(AuthSettings(keyFile: "k.json", insecureNoAuth: true), host: "0.0.0.0") else {
            Issue.record("--insecure-no-auth with --auth-keys was accepted")
            return
        }
        #expect(error.message.contains("--insecure-no-auth goes with --auth off only"))
    }
}
