// Foundation for the key files' directory; the tokens come from the real `snapsyncd keygen` and
// `snapsyncd token`, and the daemon verifies them (--auth-keys).
//
// The client plans its refreshes by a `ManualWallClock` (`Configuration.clock`): a refresh
// happens when the test moves that clock to it, so tokens live an hour and the daemon never sees
// one expire by accident on a slow machine. Where the daemon must see a token expire (it ends
// the session with token_expired), that token is short and real, and the test adapts: when the
// machine was too slow for it (the token ran out before its HELLO or its refresh), it tries
// again with a token twice as long. Waits are for events, with a hang bound only.
#if canImport(Foundation)
    import Foundation
    @_spi(Testing) @testable import SnapSync
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

    private func authClient(
        _ daemon: DaemonProcess, _ provider: CountingProvider, clock: ManualWallClock,
        reconnect: SnapSyncClient.ReconnectPolicy = .init(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200))
    ) -> SnapSyncClient {
        // Hang bounds for the handshake and the calls, and no PING of the client's own (an idle
        // daemon PINGs it): no timer of the client can end a session because the test process
        // was kept from running.
        var configuration = SnapSyncClient.Configuration(
            host: daemon.host, port: daemon.port, clientName: "client-auth", connectTimeout: hangBound,
            requestTimeout: hangBound, pingInterval: .seconds(3600), pingTimeout: .seconds(3600),
            reconnect: reconnect, credentials: provider.provider)
        configuration.clock = clock
        return SnapSyncClient(configuration: configuration)
    }

    /// A client clock at the real time: `snapsyncd token` writes real `iat` and `exp`.
    private func clockAtRealTime() -> ManualWallClock {
        ManualWallClock(now: Date().timeIntervalSince1970)
    }

    /// Whether an attempt with a short-lived token proved its point, or the machine was too slow
    /// for the token (it ran out before the step that needed it), so a longer one is needed.
    private enum Attempt {
        case done
        case tooSlow(String)
    }

    /// Runs `attempt` with a first token of 4 s, then twice as long each time it was too slow,
    /// up to 64 s; records an issue if even that was too short.
    private func withShortToken(_ attempt: (_ seconds: Int) async throws -> Attempt) async throws {
        var seconds = 4
        var tooSlow: [String] = []
        while seconds <= 64 {
            switch try await attempt(seconds) {
            case .done: return
            case .tooSlow(let why): tooSlow.append("\(seconds) s: \(why)")
            }
            seconds *= 2
        }
        Issue.record("every token was too short for this machine: \(tooSlow)")
    }

    /// Whether `token` is `client`'s (an AUTH of it was acknowledged), or the session ended.
    private func acknowledged(_ token: String, by client: SnapSyncClient, or events: EventLog) async -> Bool {
        if await client.token?.bytes == Array(token.utf8) { return true }
        return await !events.disconnections.isEmpty
    }

    /// Whether `error` is the daemon's refusal of a token that has expired.
    private func isExpiredRefusal(_ error: any Error) -> Bool {
        if let error = error as? SnapSyncError, error.kind == .unauthorized { return error.serverMessage!.contains("expired") }
        return false
    }

    @Suite("Client tokens against the real daemon", .serialized)
    struct ClientAuthTests {
        @Test(
            "a daemon without authentication ignores the HELLO token and acknowledges each refresh (AUTH)",
            .timeLimit(.minutes(5)))
        func refreshWithoutAuthentication() async throws {
            let key = try MintingKey(kid: "k1")
            defer { key.remove() }
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            // An hour each, a minute longer at each call: each token's refresh (30 s before its
            // exp) comes after the one before.
            let provider = CountingProvider { call in try key.token(ttl: "\(3600 + 60 * call)s") }
            let clock = clockAtRealTime()
            let client = authClient(daemon, provider, clock: clock)
            let events = EventLog.start(client)
            try await client.connect()
            let session = await client.session?.id
            // Two refreshes answered: the second is planned only once the first one's ACK made
            // its token the connection's.
            for refresh in 1...2 {
                let at = try await clock.nextSleeper()
                #expect(provider.calls == refresh, "no refresh before the clock reaches it")
                clock.advance(to: at)
            }
            let third = try await clock.nextSleeper()
            #expect(provider.calls == 3)
            #expect(clock.deadlines == clock.deadlines.sorted() && Set(clock.deadlines).count == 3, "\(clock.deadlines)")
            #expect(third == clock.deadlines.last)
            try await client.mutate("plain", [.appendSections(["s"])])
            #expect(await events.disconnections.isEmpty)
            #expect(await client.session?.id == session)
            await client.close()
        }

        @Test("drop(_:) without the admin right throws .forbidden naming admin; with it, the room ends", .timeLimit(.minutes(5)))
        func dropNeedsAdmin() async throws {
            let key = try MintingKey(kid: "k1")
            defer { key.remove() }
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", key.publicFile])
            defer { daemon.stop() }
            let writer = try key.token(ttl: "1h")
            let admin = try key.token(ttl: "1h", grants: ["board:*=read,write,admin"])
            let client = authClient(daemon, CountingProvider { _ in writer }, clock: clockAtRealTime())
            try await client.connect()
            try await client.mutate("board:1", [.appendSections(["s"])])
            do {
                try await client.drop("board:1")
                Issue.record("a DROP without admin was accepted")
            } catch {
                guard error.kind == .forbidden, let room = error.room, let right = error.right else {
                    Issue.record("expected .forbidden, got \(error)")
                    return
                }
                #expect(room == "board:1" && right == "admin")
            }
            await client.close()
            let owner = authClient(daemon, CountingProvider { _ in admin }, clock: clockAtRealTime())
            try await owner.connect()
            try await owner.drop("board:1")
            let replica = try await owner.join("board:1")
            #expect(replica.position.version == 0, "a dropped room starts over")
            await owner.close()
        }

        @Test(
            "the provider's token opens the session; refreshed with AUTH before exp, the session outlives its first token's expiry and goes on through more refreshes",
            .timeLimit(.minutes(10)))
        func refreshKeepsTheSession() async throws {
            let key = try MintingKey(kid: "k1")
            defer { key.remove() }
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", key.publicFile, "--auth-leeway", "1s"])
            defer { daemon.stop() }
            // The refreshed tokens live an hour, each a minute longer than the one before (so its
            // refresh, 30 s before its exp, comes after the one before), minted up front.
            let refreshed = try (1...4).map { try key.token(ttl: "\(3600 + 60 * $0)s") }
            try await withShortToken { seconds in
                try await sessionOutlivesItsFirstToken(daemon, first: try key.token(ttl: "\(seconds)s"), refreshed: refreshed)
            }
        }

        /// The client's session starts with `first` (short) and is refreshed to `refreshed[0]`
        /// at once. The daemon's expiry of `first` is seen on a witness: a second client whose
        /// session has the same token, never refreshed, ends with token_expired. The daemon ends
        /// every session due in one pass (`Hub.expireSessions`), so a write answered on the
        /// client's session after that proves the AUTH replaced its token; three more refreshes
        /// follow on the same session.
        private func sessionOutlivesItsFirstToken(_ daemon: DaemonProcess, first: String, refreshed: [String]) async throws -> Attempt {
            let tokens = [first] + refreshed
            let provider = CountingProvider { call in tokens[min(call, tokens.count) - 1] }
            let clock = clockAtRealTime()
            let client = authClient(daemon, provider, clock: clock)
            let events = EventLog.start(client)
            // The witness's clock never moves: it never refreshes, and it does not reconnect.
            let witness = authClient(daemon, CountingProvider { _ in first }, clock: clockAtRealTime(), reconnect: .disabled)
            let witnessEvents = EventLog.start(witness)
            func closeBoth() async {
                await client.close()
                await witness.close()
            }
            do {
                try await client.connect()
                try await witness.connect()
            } catch {
                await closeBoth()
                guard isExpiredRefusal(error) else { throw error }
                return .tooSlow("the first token had expired before a HELLO: \(error)")
            }
            let session = await client.session?.id
            // The first refresh: it must reach the daemon before the first token's exp (plus the
            // leeway), or the daemon ends the session first.
            let at = try await clock.nextSleeper()
            clock.advance(to: at)
            try await eventually("the first refresh's ACK, or the end of the session") {
                await acknowledged(refreshed[0], by: client, or: events)
            }
            let early = await events.disconnections
            if !early.isEmpty {
                await closeBoth()
                guard early.map(\.code) == [.tokenExpired] else {
                    Issue.record("the session ended before its refresh was acknowledged: \(early)\n\(daemon.log)")
                    return .done
                }
                return .tooSlow("the first token expired before its refresh reached the daemon")
            }
            try await eventually("the daemon to end the witness's session") { await !witnessEvents.disconnections.isEmpty }
            #expect(await witnessEvents.disconnections.map(\.code) == [.tokenExpired])
            let board = ChangeLog.start(try await client.join("board:1"))
            try await client.mutate("board:1", [.appendSections(["s"])])
            // Three more refreshes, each when the clock reaches it and each acknowledged before
            // the next is planned.
            for token in refreshed.dropFirst() {
                let at = try await clock.nextSleeper()
                clock.advance(to: at)
                try await eventually("a refresh's ACK, or the end of the session") {
                    await acknowledged(token, by: client, or: events)
                }
            }
            try await client.mutate("board:1", [.appendItems(["x"], toSection: "s")])
            _ = try await board.wait(for: "both writes") { $0.last?.position.version == 2 }
            let log = await events.events
            #expect(await events.disconnections.isEmpty, "\(log)\n\(daemon.log)")
            #expect(await client.session?.id == session)
            #expect(provider.calls == 5, "the HELLO and four refreshes")
            await closeBoth()
            return .done
        }

        @Test(
            "a token the daemon refuses: connect() throws .unauthorized with its reason; refused on refresh, the client reconnects only with another token",
            .timeLimit(.minutes(5)))
        func refusedTokenStops() async throws {
            let key = try MintingKey(kid: "k1")
            defer { key.remove() }
            // The same kid in another key file: a token the daemon's key cannot verify.
            let stranger = try MintingKey(kid: "k1")
            defer { stranger.remove() }
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", key.publicFile])
            defer { daemon.stop() }

            let forged = try stranger.token(ttl: "1h")
            let refusedAtOnce = authClient(daemon, CountingProvider { _ in forged }, clock: clockAtRealTime())
            do {
                try await refusedAtOnce.connect()
                Issue.record("a token signed with another key was accepted")
            } catch {
                guard error.kind == .unauthorized, let reason = error.serverMessage else {
                    Issue.record("expected .unauthorized, got \(error)")
                    return
                }
                #expect(!reason.contains("expired"), "\(reason)")
                #expect(!reason.isEmpty && !reason.contains(forged), "\(reason)")
            }
            await refusedAtOnce.close()

            // A good token, then the forged one: the refresh is refused (ERROR, close), and the
            // reconnect's provider call returns the forged token again, so it stops. The good
            // one lives an hour and is refreshed when the test moves the clock, after the JOIN.
            let good = try key.token(ttl: "1h")
            let provider = CountingProvider { call in call == 1 ? good : forged }
            let clock = clockAtRealTime()
            let client = authClient(daemon, provider, clock: clock)
            let events = EventLog.start(client)
            try await client.connect()
            _ = try await client.join("board:7")
            let at = try await clock.nextSleeper()
            clock.advance(to: at)
            try await eventually("the client to stop") {
                await events.events.contains { if case .stopped = $0 { true } else { false } }
            }
            #expect(provider.calls == 3, "HELLO, the refresh, and the reconnect that stopped")
            #expect(client.state == .disconnected)
            let log = await events.events
            let refusals = log.compactMap { if case .credentialsRefused(let reason) = $0 { reason } else { nil } }
            #expect(refusals.count == 1, "\(log)")
            let stops = log.compactMap { if case .stopped(let why) = $0 { why } else { nil } }
            #expect(stops == refusals.map { .unauthorized(reason: $0) })
            #expect(await events.disconnections == refusals.map { .unauthorized(reason: $0) }, "the refresh's refusal ended the session")
            await #expect(throws: SnapSyncError.self) { try await client.mutate("board:7", []) }
            await client.close()
        }

        @Test(
            "a provider that fails to refresh: the daemon ends the session with token_expired and the client reconnects with a fresh token",
            .timeLimit(.minutes(10)))
        func expiryReconnects() async throws {
            let key = try MintingKey(kid: "k1")
            defer { key.remove() }
            let daemon = try DaemonProcess.start(arguments: ["--auth-keys", key.publicFile, "--auth-leeway", "1s"])
            defer { daemon.stop() }
            try await withShortToken { seconds in try await sessionExpiresAndReconnects(daemon, key, first: seconds) }
        }

        /// HELLO with a token of `first` seconds, then four refresh tries that fail (the
        /// provider throws), driven by the clock before that token runs out; the daemon then
        /// ends the session (token_expired), and the reconnect gets an hour-long token and
        /// resumes the room.
        private func sessionExpiresAndReconnects(_ daemon: DaemonProcess, _ key: MintingKey, first: Int) async throws -> Attempt {
            struct Unavailable: Error {}
            let provider = CountingProvider { call in
                switch call {
                case 1: return try key.token(ttl: "\(first)s")
                case 2...5: throw Unavailable()
                default: return try key.token(ttl: "1h")
                }
            }
            let clock = clockAtRealTime()
            let client = authClient(daemon, provider, clock: clock)
            let events = EventLog.start(client)
            let replica: RoomReplica
            do {
                try await client.connect()
                replica = try await client.join("board:3")
            } catch {
                await client.close()
                guard isExpiredRefusal(error) else { throw error }
                return .tooSlow("the token had expired before its HELLO: \(error)")
            }
            // The refresh and its three retries, each when the clock reaches it, all before the
            // daemon ends the session: else the join or a try belongs to the next session.
            for _ in 0..<4 {
                try await eventually("a refresh planned, or the end of the session") {
                    if !clock.waitingDeadlines.isEmpty { return true }
                    return await !events.disconnections.isEmpty
                }
                guard await events.disconnections.isEmpty, let at = clock.waitingDeadlines.first else {
                    await client.close()
                    return .tooSlow("the session ended before the refresh tries: \(await events.disconnections)")
                }
                clock.advance(to: at)
            }
            try await eventually("the fourth try") { provider.calls >= 5 }
            // Now the daemon's expiry, then the reconnect.
            try await eventually("the reconnect") {
                await events.events.contains { if case .connected(_, _, true) = $0 { true } else { false } }
            }
            let log = await events.events
            #expect(await events.disconnections.map(\.code) == [.tokenExpired], "\(log)")
            #expect(provider.calls == 6)
            // Four tries planned, no fifth; then the new token's refresh, planned at the reconnect.
            _ = try await clock.nextSleeper()
            #expect(clock.deadlines.count == 5, "\(clock.deadlines)")
            try await client.mutate("board:3", [.appendSections(["after"])])
            try await eventually("the write in the rejoined replica") { replica.snapshot.numberOfSections == 1 }
            await client.close()
            return .done
        }
    }
#endif
