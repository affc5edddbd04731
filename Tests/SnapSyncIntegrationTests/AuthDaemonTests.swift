#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import Testing
import SnapSyncAuth
import SnapSyncModel
import SnapSyncWire

// Authentication against the real daemon (docs/auth.md): keys from the real `snapsyncd keygen`,
// tokens from `snapsyncd token` or SnapSyncAuth, raw frames over real sockets.

extension ServerIntegration {
    @Suite struct Auth {
        /// Every kind of bad token is refused with ERROR unauthorized naming what was wrong,
        /// never echoing the token, and the connection gets nothing else.
        @Test func eachRefusalSaysWhatWasWrong() async throws {
            let keys = try AuthKeyDirectory()
            let aud = "snapsync-test"
            let good = try await keys.mint(rooms: ["*=read,write,admin"], aud: [aud])
            let parts = good.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            // The signature with one character in its middle changed: still base64url, no longer valid.
            var signature = Array(parts[2])
            signature[signature.count / 2] = signature[signature.count / 2] == "A" ? "B" : "A"
            let payload: [String: Any] = ["sub": "alice", "exp": Date().timeIntervalSince1970 + 3600, "aud": aud, "rooms": [] as [Any]]
            let hmac = try await AuthKeySet.load(JSONWebKeySet(keys: [KeyGenerator.generate(.hs256, keyID: "k1")]))
            let stranger = try await AuthKeySet.load(JSONWebKeySet(keys: [KeyGenerator.generate(.es256, keyID: "k9")]))
            let cases: [(name: String, token: String, reason: String)] = [
                ("missing", "", "token refused: no token"),
                ("malformed", "not-a-token", "token refused: malformed token (encoding)"),
                ("bad signature", "\(parts[0]).\(parts[1]).\(String(signature))", "token refused: bad signature for key \"k1\""),
                ("alg none", try unsignedToken(header: ["alg": "none", "kid": "k1"], payload: payload), "token refused: unsigned token (alg none) refused"),
                (
                    "HS256 for an ES256 key", try await keys.mint(rooms: ["*=read"], aud: [aud], keys: hmac),
                    "token refused: algorithm \"HS256\" not allowed for key \"k1\", which is for ES256 only"
                ),
                ("unknown kid", try await keys.mint(kid: "k9", rooms: ["*=read"], aud: [aud], keys: stranger), "token refused: unknown key id (kid) \"k9\""),
                ("expired", try await keys.mint(rooms: ["*=read"], expiresIn: -120, aud: [aud]), "token refused: expired at "),
                ("not yet valid", try await keys.mint(rooms: ["*=read"], notBefore: 3600, aud: [aud]), "token refused: not valid before "),
                ("wrong audience", try await keys.mint(rooms: ["*=read"], aud: ["elsewhere"]), "token refused: wrong audience"),
                ("no audience", try await keys.mint(rooms: ["*=read"]), "token refused: wrong audience"),
            ]
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", keys.publicFile, "--auth-audience", aud])
            defer { daemon.stop() }
            for (name, token, reason) in cases {
                let client = try RawClient.hello(daemon, token: token)
                // Pipelined with the HELLO: a refused connection must get no room data.
                try client.send(.join(requestID: 1, room: "board:1", resume: nil))
                let (code, text, before) = try client.closingError()
                #expect(code == .unauthorized, "\(name)")
                #expect(text.hasPrefix(reason), "\(name): \(text)")
                #expect(before.isEmpty, "\(name): \(before.map(summary))")
                if !token.isEmpty { #expect(!text.contains(token), "\(name)") }
                #expect(!text.contains(parts[2]), "\(name)")
            }
            let admin = try RawClient.authenticated(daemon, token: good)
            let stats = try admin.stats()
            #expect(stats["auth_refused"] == UInt64(cases.count))
            #expect(stats["rooms"] == 0)
            #expect(daemon.waitForLog("token refused, closing"))
            #expect(!daemon.log.contains(parts[2]))
        }

        /// The README's way: keys from `snapsyncd keygen`, tokens from `snapsyncd token`; rights
        /// per room, exact and prefix grants; REJECT forbidden, nothing applied or sent.
        @Test func grantsDecideWhatEachTokenMayDo() throws {
            let keys = try AuthKeyDirectory()
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", keys.publicFile])
            defer { daemon.stop() }
            let writer = try RawClient.authenticated(daemon, token: try keys.token(sub: "wanda", rooms: ["board:*=read,write"]))
            let reader = try RawClient.authenticated(daemon, token: try keys.token(sub: "rita", rooms: ["board:1=read"]))
            let admin = try RawClient.authenticated(daemon, token: try keys.token(sub: "ops", rooms: ["*=admin"]))

            // A prefix grant: any board.
            _ = try writer.state(of: "board:7")
            try writer.mustMutate("board:7", [.appendSections([.named("s")])])
            #expect(try writer.mutate("chat:1", [.appendSections([.named("s")])]).answer.errorCode == .forbidden)

            // An exact grant: board:1 only, and read only.
            _ = try reader.state(of: "board:1")
            let other = try reader.join("board:2")
            guard case .reject(_, let code, _, _, let message) = other else {
                Issue.record("expected REJECT, got \(summary(other))")
                return
            }
            #expect(ErrorCode(rawValue: code) == .forbidden && message == "token of rita grants no read on room board:2")
            let write = try reader.mutate("board:1", [.appendSections([.named("s")])]).answer
            #expect(write.errorCode == .forbidden)
            if case .reject(_, _, _, _, let text) = write { #expect(text == "token of rita grants no write on room board:1") }

            // A write by the writer reaches the reader; the reader's refused write reached no one.
            try writer.mustMutate("board:1", [.appendSections([.named("t")])])
            let diff = try reader.receive()
            #expect(diff.diffVersion == 1, "\(summary(diff))")
            #expect(writer.isQuiet(for: 0.2))

            #expect(try reader.request { .stats(requestID: $0) }.answer.errorCode == .forbidden)
            let stats = try admin.stats()
            #expect(stats["forbidden"] == 4)
            // board:2 was never created by the denied JOIN; chat:1 not by the denied write.
            #expect(stats["rooms"] == 2)
            // The log names who each connection is.
            #expect(daemon.waitForLog("sub=wanda") && daemon.log.contains("authenticated"))
        }

        /// SIGHUP reloads the key file: a new key works at once, a removed key refuses new
        /// tokens, connections made with it stay, and a bad file keeps the keys in use.
        @Test func sighupRotatesKeysWithoutDroppingConnections() throws {
            let keys = try AuthKeyDirectory()
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", keys.publicFile])
            defer { daemon.stop() }
            let old = try RawClient.authenticated(daemon, token: try keys.token(kid: "k1", rooms: ["board:*=read,write"]))
            _ = try old.state(of: "board:1")

            try keys.keygen(kid: "k2", alg: "EdDSA")
            let refusedBefore = try RawClient.hello(daemon, token: try keys.token(kid: "k2", rooms: ["board:*=read"]))
            #expect(try refusedBefore.closingError().message == "token refused: unknown key id (kid) \"k2\"")
            daemon.signal(SIGHUP)
            #expect(daemon.waitForLog("auth keys reloaded"))
            let new = try RawClient.authenticated(daemon, token: try keys.token(kid: "k2", sub: "bob", rooms: ["board:*=read,write"]))

            // k1 retired: new k1 tokens are refused, the old k1 connection goes on.
            try keys.keepOnly(["k2"])
            daemon.signal(SIGHUP)
            #expect(daemon.waitForLog("kids=k2\n"))
            let retired = try RawClient.hello(daemon, token: try keys.token(kid: "k1", rooms: ["board:*=read"]))
            #expect(try retired.closingError().message == "token refused: unknown key id (kid) \"k1\"")
            try new.mustMutate("board:1", [.appendSections([.named("s")])])
            #expect(try old.receive().diffVersion == 1)
            try old.mustMutate("board:1", [.appendSections([.named("t")])])

            // A broken file: logged, and the keys in use stay.
            try Data("{\"keys\": 7}".utf8).write(to: URL(fileURLWithPath: keys.publicFile))
            daemon.signal(SIGHUP)
            #expect(daemon.waitForLog("auth key reload refused, the keys in use are kept"))
            _ = try RawClient.authenticated(daemon, token: try keys.token(kid: "k2", rooms: ["board:*=read"]))
            #expect(daemon.isRunning)
        }

        /// Both connections start with the same short token (no leeway); the one that sends AUTH
        /// with a fresh token stays, the other gets ERROR token_expired. The second one's expiry
        /// is the proof that the deadline passed: no assertion on time.
        ///
        /// The daemon's clock is real, so the two HELLOs, JOINs and the AUTH must all come before
        /// the short token expires. A process kept from running can miss that; then the daemon
        /// refuses a step, and the test starts again with a token that lives twice as long. So a
        /// slow machine makes the test longer, never wrong; a daemon that refuses a valid token
        /// still fails it, once the token lives far longer than any stall.
        @Test func refreshKeepsTheSessionAndNoRefreshEndsIt() async throws {
            let keys = try AuthKeyDirectory()
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", keys.publicFile, "--auth-leeway", "0s"])
            defer { daemon.stop() }
            let fresh = try await keys.mint(rooms: ["board:*=read,write"], expiresIn: 3600)
            var lifetime = 2.0
            while true {
                let short = try await keys.mint(rooms: ["board:*=read,write"], expiresIn: lifetime)
                let refreshed: RawClient
                let lapsing: RawClient
                do {
                    refreshed = try RawClient.authenticated(daemon, token: short)
                    lapsing = try RawClient.authenticated(daemon, token: short)
                    _ = try refreshed.state(of: "board:1")
                    _ = try lapsing.state(of: "board:1")
                    let (answer, _) = try refreshed.reauthenticate(fresh)
                    guard case .ack(_, 0, 0) = answer else { throw DaemonError("expected ACK to AUTH, got \(summary(answer))") }
                } catch  where lifetime < 600 {
                    lifetime *= 2
                    continue
                }
                let (code, message, _) = try lapsing.closingError(timeout: lifetime + 120)
                #expect(code == .tokenExpired)
                #expect(message.hasPrefix("the token of alice expired at "))
                // The daemon logs before it closes, but its stderr is read by another thread: wait for it.
                #expect(daemon.waitForLog("token expired, closing"))
                // Past the deadline the refreshed session still writes and reads.
                #expect(try refreshed.mustMutate("board:1", [.appendSections([.named("s")])]) == 1)
                return
            }
        }

        /// 1,000 connections with bad tokens, each asking to JOIN and write: every one gets
        /// ERROR unauthorized and nothing else, and an authenticated pair keeps working.
        @Test func aThousandBadTokensAreAllRefusedAndOthersAreUnaffected() async throws {
            let keys = try AuthKeyDirectory()
            let good = try await keys.mint(rooms: ["*=read,write,admin"])
            let parts = good.split(separator: ".").map(String.init)
            let stranger = try await AuthKeySet.load(JSONWebKeySet(keys: [KeyGenerator.generate(.es256, keyID: "k1")]))
            let forged = try await keys.mint(rooms: ["*=read,write"], keys: stranger)
            let expired = try await keys.mint(rooms: ["*=read,write"], expiresIn: -3600)
            let bad = [forged, expired, "\(parts[0]).\(parts[1])", ""]
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", keys.publicFile])
            defer { daemon.stop() }
            let writer = try RawClient.authenticated(daemon, token: good)
            let reader = try RawClient.authenticated(daemon, token: good)
            _ = try reader.state(of: "board:1")

            var version: UInt64 = 0
            for batch in 0..<10 {
                var clients: [RawClient] = []
                for index in 0..<100 {
                    let client = try RawClient.hello(daemon, token: bad[(batch * 100 + index) % bad.count])
                    try client.send(.join(requestID: 1, room: "board:1", resume: nil))
                    try client.send(
                        .mutate(requestID: 2, room: "board:1", expectedVersion: nil, writeID: [], ops: [.appendSections([.named("x\(batch)-\(index)")])]))
                    clients.append(client)
                }
                version = try writer.mustMutate("board:1", [.appendSections([.named("s\(batch)")])])
                for client in clients {
                    let messages = try client.receiveUntilClosed()
                    #expect(messages.map(\.errorCode) == [.unauthorized], "\(messages.map(summary))")
                }
                #expect(try reader.receive().diffVersion == version)
            }
            #expect(version == 10)
            let stats = try writer.stats()
            #expect(stats["auth_refused"] == 1000)
            #expect(stats["writes_applied"] == 10)
            #expect(try waitUntil { try writer.stats()["connections"] == 2 })
        }

        @Test func helpDescribesTheAuthFlags() throws {
            let (status, output) = try DaemonProcess.run(arguments: ["--help"])
            #expect(status == 0)
            for flag in ["--auth-keys", "--auth ", "--auth-leeway", "--auth-audience", "--insecure-no-auth", "SIGHUP"] {
                #expect(output.contains(flag), "--help does not mention \(flag)")
            }
            // --help wraps its lines.
            let words = output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(words.contains("(default: required with --auth-keys, else off)"))
            #expect(words.contains("--auth-leeway <duration>") && words.contains("after its token's exp. (default: 30s)"))
        }

        /// Start-up: secure by default, with clear refusals.
        @Test func startupRefusesInsecureOrIncompleteSettings() throws {
            let data = NSTemporaryDirectory() + "snapsyncd-auth-start-\(getpid())"
            defer { try? FileManager.default.removeItem(atPath: data) }
            let open = try DaemonProcess.run(arguments: ["--host", "0.0.0.0", "--port", "0", "--data-dir", data], timeout: 30)
            #expect(open.status != 0)
            #expect(open.output.contains("not a loopback address") && open.output.contains("--insecure-no-auth"), "\(open.output)")
            let required = try DaemonProcess.run(arguments: ["--auth", "required", "--port", "0", "--data-dir", data])
            #expect(required.status != 0 && required.output.contains("--auth required needs --auth-keys"), "\(required.output)")
            let missing = try DaemonProcess.run(arguments: ["--auth-keys", data + "/no-such-keys.json", "--port", "0", "--data-dir", data])
            #expect(missing.status != 0 && missing.output.contains("cannot start: auth key file"), "\(missing.output)")

            let insecure = try DaemonProcess.start(arguments: ["--host", "0.0.0.0", "--insecure-no-auth"])
            defer { insecure.stop() }
            #expect(insecure.log.components(separatedBy: "authentication is off (--insecure-no-auth)").count == 2)
            let client = try RawClient(host: "127.0.0.1", port: insecure.port)
            try client.handshake()
            _ = try client.state(of: "board:1")
        }
    }
}
