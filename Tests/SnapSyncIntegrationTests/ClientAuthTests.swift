// Foundation for the key files' directory; the tokens come from the real `snapsyncd keygen` and
// `snapsyncd token`, and the daemon verifies them (--auth-keys).
#if canImport(Foundation)
    import Foundation
    @_spi(Testing) import SnapSync
    import SnapSyncClientTestSupport
    import Testing

    /// A signing key made by `snapsyncd keygen`, and tokens minted with it by `snapsyncd token`.
    private struct MintingKey: Sendable {
        let directory: String
        let kid: String

        var privateFile: String { directory + "/\(kid).private.json" }
        var publicFile: String { directory + "/\(kid).public.json" }

        init(kid: String) throws {
            directory = NSTemporaryDirectory() + "snapsync-client-auth-\(UInt32.random(in: 0 ... .max))"
            self.kid = kid
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let (status, output) = try DaemonProcess.run(arguments: [
                "keygen", "--alg", "ES256", "--kid", kid, "--out", privateFile, "--public-out", publicFile,
            ])
            guard status == 0 else { throw DaemonError("snapsyncd keygen failed (\(status)): \(output)") }
        }

        /// A token for `alice` with `grants` (`MATCH=RIGHTS`), valid for `ttl`.
        func token(ttl: String, grants: [String] = ["board:*=read,write"]) throws -> String {
            let (status, output) = try DaemonProcess.run(
                arguments: ["token", "--keys", privateFile, "--kid", kid, "--sub", "alice", "--ttl", ttl]
                    + grants.flatMap { ["--room", $0] })
            guard status == 0, let token = output.split(separator: "\n").last.map(String.init), token.split(separator: ".").count == 3 else {
                throw DaemonError("snapsyncd token failed (\(status)): \(output)")
            }
            return token
        }

        func remove() {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Counts its calls; answers with `answer(call)` (calls from 1).
    private final class CountingProvider: @unchecked Sendable {
        // @unchecked: `calls` is guarded by `lock`.
        private let lock = NSLock()
        private var count = 0
        private let answer: @Sendable (Int) throws -> String?

        init(_ answer: @escaping @Sendable (Int) throws -> String?) {
            self.answer = answer
        }

        var calls: Int { lock.withLock { count } }

        var provider: SnapSyncClient.CredentialsProvider {
            { [self] in
                let call = lock.withLock {
                    count += 1
                    return count
                }
                return try answer(call)
            }
        }
    }

    private func authClient(_ daemon: DaemonProcess, _ provider: CountingProvider) -> SnapSyncClient {
        SnapSyncClient(
            configuration: .init(
                host: daemon.host, port: daemon.port, clientName: "client-auth", connectTimeout: .seconds(20),
                requestTimeout: .seconds(30),
                reconnect: .init(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200)),
                credentials: provider.provider))
    }

    @Suite("Client tokens against the real daemon", .serialized)
    struct ClientAuthTests {
        @Test(
            "a daemon without authentication ignores the HELLO token and acknowledges each refresh (AUTH)",
            .timeLimit(.minutes(1)))
        func refreshWithoutAuthentication() async throws {
            let key = try MintingKey(kid: "k1")
            defer { key.remove() }
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let provider = CountingProvider { _ in try key.token(ttl: "2s") }
            let client = authClient(daemon, provider)
            let events = EventLog.start(client)
            try await client.connect()
            let session = await client.session?.id
            // Two refreshes answered: the second is asked for only after the first one's ACK.
            try await eventually("two refreshes", timeout: .seconds(30)) { provider.calls >= 3 }
            try await client.mutate("plain", [.appendSections(["s"])])
            #expect(await events.disconnections.isEmpty)
            #expect(await client.session?.id == session)
            await client.close()
        }

        @Test("drop(_:) without the admin right throws .forbidden naming admin; with it, the room ends", .timeLimit(.minutes(1)))
        func dropNeedsAdmin() async throws {
            let key = try MintingKey(kid: "k1")
            defer { key.remove() }
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", key.publicFile])
            defer { daemon.stop() }
            let writer = try key.token(ttl: "1h")
            let admin = try key.token(ttl: "1h", grants: ["board:*=read,write,admin"])
            let client = authClient(daemon, CountingProvider { _ in writer })
            try await client.connect()
            try await client.mutate("board:1", [.appendSections(["s"])])
            do {
                try await client.drop("board:1")
                Issue.record("a DROP without admin was accepted")
            } catch {
                guard case .forbidden(let room, let right, _) = error else {
                    Issue.record("expected .forbidden, got \(error)")
                    return
                }
                #expect(room == "board:1" && right == "admin")
            }
            await client.close()
            let owner = authClient(daemon, CountingProvider { _ in admin })
            try await owner.connect()
            try await owner.drop("board:1")
            let replica = try await owner.join("board:1")
            #expect(replica.position.version == 0, "a dropped room starts over")
            await owner.close()
        }

        @Test(
            "the provider's token opens the session; refreshed with AUTH before exp, the session outlives its first tokens",
            .timeLimit(.minutes(1)))
        func refreshKeepsTheSession() async throws {
            let key = try MintingKey(kid: "k1")
            defer { key.remove() }
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", key.publicFile, "--auth-leeway", "10s"])
            defer { daemon.stop() }
            // Tokens minted up front (so that a slow `snapsyncd token` cannot delay a refresh),
            // the first valid for 6 s, each next one 6 s longer, all issued now: each is refreshed
            // 10% of its lifetime before its exp. Without the refreshes the daemon would end the
            // session with token_expired about 10 s (its leeway) after the first exp, 16 s in,
            // before the fourth refresh (21.6 s). The leeway is the slack the connection and each
            // refresh have on a loaded machine: the whole suite runs at once, and other tests
            // have kept this process from running for over 10 s (the first token, at 2 s and a
            // 3 s leeway, had expired before connect() sent it).
            // The longest first, so that the first one loses the least to minting.
            var minted: [String] = []
            for k in (1...5).reversed() { minted.insert(try key.token(ttl: "\(6 * k)s"), at: 0) }
            let tokens = minted
            let provider = CountingProvider { call in tokens[min(call, tokens.count) - 1] }
            let client = authClient(daemon, provider)
            let events = EventLog.start(client)
            try await client.connect()
            let session = await client.session?.id
            let board = ChangeLog.start(try await client.join("board:1"))
            try await client.mutate("board:1", [.appendSections(["s"])])
            // The fourth refresh comes 10% of 24 s before the fourth token's exp: past the first
            // token's exp and the leeway.
            try await eventually("four refreshes", timeout: .seconds(45)) { provider.calls >= 5 }
            try await client.mutate("board:1", [.appendItems(["x"], toSection: "s")])
            _ = try await board.wait(for: "both writes") { $0.last?.position.version == 2 }
            let log = await events.events
            #expect(await events.disconnections.isEmpty, "\(log)\n\(daemon.log)")
            #expect(await client.session?.id == session)
            await client.close()
        }

        @Test(
            "a token the daemon refuses: connect() throws .unauthorized with its reason; refused on refresh, the client reconnects only with another token",
            .timeLimit(.minutes(1)))
        func refusedTokenStops() async throws {
            let key = try MintingKey(kid: "k1")
            defer { key.remove() }
            // The same kid in another key file: a token the daemon's key cannot verify.
            let stranger = try MintingKey(kid: "k1")
            defer { stranger.remove() }
            // A 10 s leeway: the good token must not expire before its refresh is refused. Had the
            // session ended with token_expired first, the refresh's provider call would have been
            // one more (seen once, when other tests kept this process from running for seconds).
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", key.publicFile, "--auth-leeway", "10s"])
            defer { daemon.stop() }

            let forged = try stranger.token(ttl: "1h")
            let refusedAtOnce = authClient(daemon, CountingProvider { _ in forged })
            do {
                try await refusedAtOnce.connect()
                Issue.record("a token signed with another key was accepted")
            } catch {
                guard case .unauthorized(let reason) = error else {
                    Issue.record("expected .unauthorized, got \(error)")
                    return
                }
                #expect(!reason.isEmpty && !reason.contains(forged), "\(reason)")
            }
            await refusedAtOnce.close()

            // A good short token, then the forged one: the refresh is refused (ERROR, close),
            // and the reconnect's provider call returns the forged token again, so it stops.
            // The good one is minted when the HELLO asks for it, and lives 10 s: the JOIN must
            // come before its refresh (at 9 s), and other tests can keep this process from
            // running for seconds on a loaded machine (a 2 s one minted up front once expired
            // before the HELLO).
            let provider = CountingProvider { call in call == 1 ? try key.token(ttl: "10s") : forged }
            let client = authClient(daemon, provider)
            let events = EventLog.start(client)
            try await client.connect()
            _ = try await client.join("board:7")
            try await eventually("the client to stop", timeout: .seconds(30)) {
                await events.events.contains { if case .stopped = $0 { true } else { false } }
            }
            #expect(provider.calls == 3, "HELLO, the refresh, and the reconnect that stopped")
            #expect(client.state == .disconnected)
            let log = await events.events
            let refusals = log.compactMap { if case .credentialsRefused(let reason) = $0 { reason } else { nil } }
            #expect(refusals.count == 1, "\(log)")
            let stops = log.compactMap { if case .stopped(let why) = $0 { why } else { nil } }
            #expect(stops == refusals.map { .unauthorized(reason: $0) })
            await #expect(throws: SnapSyncError.self) { try await client.mutate("board:7", []) }
            await client.close()
        }

        @Test(
            "a provider that fails to refresh: the daemon ends the session with token_expired and the client reconnects with a fresh token",
            .timeLimit(.minutes(1)))
        func expiryReconnects() async throws {
            let key = try MintingKey(kid: "k1")
            defer { key.remove() }
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", key.publicFile, "--auth-leeway", "1s"])
            defer { daemon.stop() }
            struct Unavailable: Error {}
            // HELLO, then four failed refresh tries, then a token for the reconnect. The HELLO's
            // token is minted when asked for and lives 10 s, so that the JOIN comes before the
            // session ends even when other tests keep this process from running for seconds.
            let provider = CountingProvider { call in
                switch call {
                case 1: return try key.token(ttl: "10s")
                case 2...5: throw Unavailable()
                default: return try key.token(ttl: "1h")
                }
            }
            let client = authClient(daemon, provider)
            let events = EventLog.start(client)
            try await client.connect()
            let replica = try await client.join("board:3")
            try await eventually("the reconnect", timeout: .seconds(30)) {
                await events.events.contains { if case .connected(_, _, true) = $0 { true } else { false } }
            }
            let log = await events.events
            #expect(await events.disconnections.map(\.code) == [.tokenExpired], "\(log)")
            #expect(provider.calls == 6)
            try await client.mutate("board:3", [.appendSections(["after"])])
            try await eventually("the write in the rejoined replica") { replica.snapshot.numberOfSections == 1 }
            await client.close()
        }
    }
#endif
