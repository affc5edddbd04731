#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import NIOConcurrencyHelpers
@testable import SnapSync
import SnapSyncClientTestSupport
import Testing
import SnapSyncWire

// Tokens in the client: the provider's token in HELLO, its refresh with AUTH before `exp`,
// a refused token that stops reconnecting, `token_expired`, REJECT `forbidden` and LEFT, against
// the scripted peer of ClientScriptedServerTests.swift. The tokens are JWT-shaped but unsigned:
// the client reads the payload's `exp` and `iat`, and never checks a signature. Token time is
// the client's clock (`Configuration.clock`), a `ManualWallClock` here: a refresh happens when
// the test moves the clock to it, so no test waits for real time or races it.

/// A compact JWT with an HS256 header, the given claims, and `tag` in place of a signature.
func unsignedToken(_ tag: String, exp: Double, iat: Double? = nil) -> String {
    var payload = "{\"sub\":\"alice\",\"exp\":\(exp)"
    if let iat { payload += ",\"iat\":\(iat)" }
    payload += ",\"rooms\":[{\"match\":\"*\",\"rights\":[\"read\",\"write\"]}]}"
    return [#"{"alg":"HS256","typ":"JWT"}"#, payload, tag].map(base64URL).joined(separator: ".")
}

/// RFC 4648 §5, without padding, as JWTs use it.
func base64URL(_ text: String) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    let bytes = Array(text.utf8)
    var out = ""
    for start in stride(from: 0, to: bytes.count, by: 3) {
        let chunk = bytes[start..<min(start + 3, bytes.count)]
        let value = chunk.enumerated().reduce(0) { $0 | Int($1.element) << (16 - 8 * $1.offset) }
        for k in 0...chunk.count { out.append(alphabet[(value >> (18 - 6 * k)) & 63]) }
    }
    return out
}

/// A credentials provider answering from a script, one answer per call, the last one repeating.
final class ScriptedProvider: Sendable {
    enum Answer: Sendable {
        case token(String?)
        case failure
    }
    struct Failed: Error, CustomStringConvertible {
        var description: String { "the identity service is unreachable" }
    }

    private let state: NIOLockedValueBox<(answers: [Answer], calls: Int)>

    init(_ answers: [Answer]) {
        state = NIOLockedValueBox((answers, 0))
    }

    var calls: Int { state.withLockedValue { $0.calls } }

    var provider: SnapSyncClient.CredentialsProvider {
        { [self] in
            let answer = state.withLockedValue { state in
                defer { state.calls += 1 }
                return state.answers[min(state.calls, state.answers.count - 1)]
            }
            switch answer {
            case .token(let token): return token
            case .failure: throw Failed()
            }
        }
    }

    /// For the peer's thread: waits until the provider was called `count` times (the hang
    /// bound at most: it ends a hang, it does not ask for speed).
    func waitForCalls(_ count: Int) throws {
        let deadline = ContinuousClock.now + hangBound
        while calls < count {
            guard ContinuousClock.now < deadline else {
                throw ScriptedPeer.Failure(description: "the provider was called \(calls) times, not \(count)")
            }
            usleepForPeer()
        }
    }
}

private func usleepForPeer() {
    var remaining = timespec(tv_sec: 0, tv_nsec: 5_000_000)
    _ = nanosleep(&remaining, nil)
}

@Suite("Client: tokens")
struct ClientCredentialsTests {
    /// Where the test clocks start, in seconds since 1970: the scripted peer checks no token's
    /// time, so any fixed instant does, and the deadlines below are exact.
    static let start = 1_800_000_000.0

    func client(_ peer: ScriptedPeer, _ provider: ScriptedProvider?, clock: ManualWallClock? = nil) -> SnapSyncClient {
        var configuration = peer.configuration(
            reconnect: .init(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(50)), credentials: provider?.provider)
        if let clock { configuration.clock = clock }
        return SnapSyncClient(configuration: configuration)
    }

    @Test("the refresh margin: 10% of the lifetime, at most 30 s; retries halfway to exp; exp and iat read from the payload")
    func lifetime() throws {
        let hour = try #require(TokenLifetime(token: unsignedToken("a", exp: 3600, iat: 0), now: 10))
        #expect(hour == TokenLifetime(expiresAt: 3600, issuedAt: 0))
        #expect(hour.refreshAt == 3570, "30 s, not 360 s")
        let short = try #require(TokenLifetime(token: unsignedToken("bb", exp: 1000, iat: 900), now: 950))
        #expect(short.refreshAt == 990, "10% of 100 s")
        let noIat = try #require(TokenLifetime(token: unsignedToken("ccc", exp: 1000.5), now: 990.5))
        #expect(noIat.issuedAt == 990.5, "without iat, the lifetime counts from when the client got it")
        #expect(noIat.refreshAt == 999.5)
        #expect(short.retryAt(now: 996) == 998)
        #expect(short.retryAt(now: 1002) == 1002, "past exp: at once")
        #expect(TokenLifetime(token: "opaque-token", now: 0) == nil)
        #expect(TokenLifetime(token: "a.b.c", now: 0) == nil, "the payload is not base64url JSON")
        let textExp = [#"{"alg":"HS256"}"#, #"{"exp":"soon"}"#, "s"].map(base64URL).joined(separator: ".")
        #expect(TokenLifetime(token: textExp, now: 0) == nil)
    }

    @Test(
        "the provider's token goes in HELLO; before exp the client sends a new one with AUTH, trying again after failures",
        .timeLimit(.minutes(5)))
    func refresh() async throws {
        let peer = try ScriptedPeer()
        let start = Self.start
        let clock = ManualWallClock(now: start)
        // A 100 s token: refreshed 10 s (10%) before its exp.
        let first = unsignedToken("first", exp: start + 100, iat: start)
        let second = unsignedToken("second", exp: start + 3600, iat: start)
        // The refresh fails three times (the provider throws, then returns the token in use,
        // then nothing) before the fourth try gets a new token.
        let provider = ScriptedProvider([.token(first), .failure, .token(first), .token(nil), .token(second)])
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(credentials: first)
            let message = try peer.request()
            guard case .auth(let requestID, let credentials) = message, credentials == Array(second.utf8) else {
                throw ScriptedPeer.Failure(description: "expected AUTH with the second token, got \(message)")
            }
            peer.send(.ack(requestID: requestID, epoch: 0, version: 0))
            // The session goes on.
            guard case .mutate(let write, "r", nil, _, _) = try peer.request() else {
                throw ScriptedPeer.Failure(description: "expected the MUTATE")
            }
            peer.send(.ack(requestID: write, epoch: 1, version: 1))
        }
        let client = client(peer, provider, clock: clock)
        let events = EventLog.start(client)
        try await client.connect()
        // Planned at exp - 10 s, and after each failure halfway to exp; nothing is asked of
        // the provider before the clock gets there.
        for (k, expected) in [start + 90, start + 95, start + 97.5, start + 98.75].enumerated() {
            let at = try await clock.nextSleeper()
            #expect(at == expected, "try \(k + 1)")
            #expect(provider.calls == 1 + k, "no try before its time")
            clock.advance(to: at)
        }
        // The AUTH's ACK makes the second token the connection's: its refresh is planned 30 s
        // (not 10% of an hour) before its exp.
        #expect(try await clock.nextSleeper() == start + 3570)
        #expect(await client.token?.bytes == Array(second.utf8))
        let position = try await client.mutate("r", [.appendSections(["s"])])
        #expect(position == RoomPosition(epoch: 1, version: 1))
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        #expect(provider.calls == 5, "one HELLO, four refresh tries")
        #expect(clock.deadlines == [start + 90, start + 95, start + 97.5, start + 98.75, start + 3570])
        #expect(await events.disconnections.isEmpty)
        await client.close()
    }

    @Test(
        "a refused token: connect() throws .unauthorized; reconnecting goes on with a new token and stops when the provider gives the refused one again",
        .timeLimit(.minutes(5)))
    func unauthorizedStops() async throws {
        let peer = try ScriptedPeer()
        let provider = ScriptedProvider([.token("A"), .token("B"), .token("C")])
        let script = play(peer) { peer in
            try peer.accept()
            guard try peer.hello() == "A" else { throw ScriptedPeer.Failure(description: "expected HELLO with A") }
            peer.send(.error(code: ErrorCode.unauthorized.rawValue, message: "token expired at 2026-11-23T02:00:00Z"))
            // The app calls connect() again.
            try peer.accept()
            try peer.handshake(credentials: "B")
            _ = try peer.expectJoin("r", resume: nil)
            peer.send(.error(code: ErrorCode.unauthorized.rawValue, message: "unknown kid k9"))
            // The reconnect, with the provider's new token: refused in the handshake.
            try peer.accept()
            guard try peer.hello() == "C" else { throw ScriptedPeer.Failure(description: "expected HELLO with C") }
            peer.send(.error(code: ErrorCode.unauthorized.rawValue, message: "bad signature"))
        }
        let client = client(peer, provider)
        let events = EventLog.start(client)
        await #expect(throws: SnapSyncError.unauthorized(reason: "token expired at 2026-11-23T02:00:00Z")) {
            try await client.connect()
        }
        #expect(client.state == .disconnected)
        try await client.connect()
        let join = Task { try await client.join("r") }
        // The provider's fourth answer is C again: refused before, so no fourth connection.
        let joined = await join.result
        #expect(throws: SnapSyncError.unauthorized(reason: "bad signature")) { try joined.get() }
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        #expect(provider.calls == 4)
        #expect(client.state == .disconnected)
        #expect(!peer.hasPendingConnection, "the refused token was not sent again")
        let log = await events.events
        let refusals = log.compactMap { if case .credentialsRefused(let reason) = $0 { reason } else { nil } }
        #expect(refusals == ["token expired at 2026-11-23T02:00:00Z", "unknown kid k9", "bad signature"])
        let stops = log.compactMap { if case .stopped(let why) = $0 { why } else { nil } }
        #expect(stops == [.unauthorized(reason: "bad signature")])
        #expect(await events.disconnections == [.unauthorized(reason: "unknown kid k9")])
        await client.close()
    }

    @Test(
        "a refresh declined (REJECT busy after AUTH): the session keeps its token and the refresh is tried again, halfway to exp",
        .timeLimit(.minutes(5)))
    func refreshDeclinedIsRetried() async throws {
        let peer = try ScriptedPeer()
        let start = Self.start
        let clock = ManualWallClock(now: start)
        let first = unsignedToken("first", exp: start + 100, iat: start)
        let second = unsignedToken("second", exp: start + 200, iat: start)
        let provider = ScriptedProvider([.token(first), .token(second), .token(second)])
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(credentials: first)
            for answer in ["busy", "ack"] {
                let message = try peer.request()
                guard case .auth(let id, let credentials) = message, credentials == Array(second.utf8) else {
                    throw ScriptedPeer.Failure(description: "expected AUTH with the second token, got \(message)")
                }
                if answer == "busy" {
                    peer.send(.reject(requestID: id, code: ErrorCode.busy.rawValue, opIndex: nil, identifier: nil, message: "retry later"))
                } else {
                    peer.send(.ack(requestID: id, epoch: 0, version: 0))
                }
            }
        }
        let client = client(peer, provider, clock: clock)
        let events = EventLog.start(client)
        try await client.connect()
        let session = await client.session?.id
        let at = try await clock.nextSleeper()
        #expect(at == start + 90)
        clock.advance(to: at)
        // Declined: the retry is planned halfway from now to exp.
        let retry = try await clock.nextSleeper()
        #expect(retry == start + 95)
        clock.advance(to: retry)
        // Acknowledged: the next refresh is the second token's.
        let next = try await clock.nextSleeper()
        #expect(next == start + 180, "10% of its 200 s before its exp")
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        #expect(provider.calls == 3)
        #expect(await events.disconnections.isEmpty)
        #expect(await client.session?.id == session)
        await client.close()
    }

    @Test(
        "a refresh refused (ERROR unauthorized after AUTH): the AUTH's token is the refused one, so the reconnect that gets it again stops",
        .timeLimit(.minutes(5)))
    func refreshRefused() async throws {
        let peer = try ScriptedPeer()
        let start = Self.start
        let clock = ManualWallClock(now: start)
        let first = unsignedToken("first", exp: start + 100, iat: start)
        let provider = ScriptedProvider([.token(first), .token("not-a-jwt")])
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(credentials: first)
            let message = try peer.request()
            guard case .auth(_, let credentials) = message, credentials == Array("not-a-jwt".utf8) else {
                throw ScriptedPeer.Failure(description: "expected AUTH with the provider's second token, got \(message)")
            }
            peer.send(.error(code: ErrorCode.unauthorized.rawValue, message: "malformed token: no header"))
        }
        let client = client(peer, provider, clock: clock)
        let events = EventLog.start(client)
        try await client.connect()
        // The refresh, when the clock reaches it.
        let at = try await clock.nextSleeper()
        #expect(at == start + 90)
        clock.advance(to: at)
        try await eventually("the client to stop") {
            await events.events.contains { if case .stopped = $0 { true } else { false } }
        }
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        #expect(provider.calls == 3, "HELLO, the refresh, and the reconnect's call that returned the refused token")
        #expect(clock.deadlines == [start + 90], "the refused token has no exp: nothing more was planned")
        #expect(!peer.hasPendingConnection)
        #expect(await events.disconnections == [.unauthorized(reason: "malformed token: no header")])
        await #expect(throws: SnapSyncError.connectionLost("not connected: call connect()")) {
            try await client.join("r")
        }
        await client.close()
    }

    @Test(
        "a refresh the provider cannot produce is tried four times; token_expired then reconnects with the provider's next token",
        .timeLimit(.minutes(5)))
    func tokenExpiredReconnects() async throws {
        let peer = try ScriptedPeer()
        let start = Self.start
        let clock = ManualWallClock(now: start)
        let first = unsignedToken("first", exp: start + 100, iat: start)
        let next = unsignedToken("next", exp: start + 3600, iat: start)
        let provider = ScriptedProvider([.token(first), .failure, .failure, .failure, .failure, .token(next)])
        let snapshot = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a")])])
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake(credentials: first)
            let join = try peer.expectJoin("r", resume: nil)
            peer.send(.snapshot(requestID: join, room: "r", epoch: 3, version: 4, reason: .initial, digest: snapshot.digest, snapshot: snapshot))
            // One HELLO and four refresh tries; a fifth would take `next` and send it with AUTH.
            try provider.waitForCalls(5)
            peer.send(.error(code: ErrorCode.tokenExpired.rawValue, message: "token of alice expired"))
            try peer.accept()
            try peer.handshake(credentials: next, sessionID: 2)
            let rejoin = try peer.expectJoin("r", resume: RoomPosition(epoch: 3, version: 4))
            peer.send(.catchup(requestID: rejoin, room: "r", epoch: 3, fromVersion: 4, toVersion: 4))
        }
        let client = client(peer, provider, clock: clock)
        let events = EventLog.start(client)
        try await client.connect()
        _ = try await client.join("r")
        // The refresh and its three retries, each when the clock reaches it; then no more.
        for expected in [start + 90, start + 95, start + 97.5, start + 98.75] {
            let at = try await clock.nextSleeper()
            #expect(at == expected)
            clock.advance(to: at)
        }
        try await eventually("the reconnect") {
            await events.events.contains { if case .connected(2, _, true) = $0 { true } else { false } }
        }
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        #expect(provider.calls == 6)
        // The reconnect's token is refreshed 30 s before its exp; no fifth try came before.
        #expect(try await clock.nextSleeper() == start + 3570)
        #expect(clock.deadlines == [start + 90, start + 95, start + 97.5, start + 98.75, start + 3570])
        #expect(await events.disconnections == [.serverError(.init(rawCode: ErrorCode.tokenExpired.rawValue, message: "token of alice expired"))])
        await client.close()
    }

    @Test(
        "REJECT forbidden fails the join or the write as .forbidden; LEFT drops the replica, its changes end, and roomLost says why",
        .timeLimit(.minutes(5)))
    func forbiddenAndLeft() async throws {
        let peer = try ScriptedPeer()
        let snapshot = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("x")])])
        let readDenied = "token of alice grants no read on room c"
        let writeDenied = "token of alice grants no write on room a"
        let leftMessage = "token of alice grants no read on room a"
        let script = play(peer) { peer in
            try peer.accept()
            try peer.handshake()
            for room in ["a", "b"] {
                let join = try peer.expectJoin(room, resume: nil)
                peer.send(.snapshot(requestID: join, room: room, epoch: 1, version: 1, reason: .initial, digest: snapshot.digest, snapshot: snapshot))
            }
            let denied = try peer.expectJoin("c", resume: nil)
            peer.send(.reject(requestID: denied, code: ErrorCode.forbidden.rawValue, opIndex: nil, identifier: nil, message: readDenied))
            guard case .mutate(let write, "a", nil, _, _) = try peer.request() else {
                throw ScriptedPeer.Failure(description: "expected the MUTATE of a")
            }
            peer.send(.reject(requestID: write, code: ErrorCode.forbidden.rawValue, opIndex: nil, identifier: nil, message: writeDenied))
            peer.send(.left(room: "a", code: ErrorCode.forbidden.rawValue, message: leftMessage))
            // No DIFF follows a LEFT from a correct server; one that does must not reach the dropped replica.
            peer.send(.diff(room: "a", epoch: 1, version: 2, ops: [.deleteItems(["x"])]))
            peer.send(.diff(room: "b", epoch: 1, version: 2, ops: [.deleteItems(["x"])]))
        }
        let client = client(peer, nil)
        let events = EventLog.start(client)
        try await client.connect()
        let a = ChangeLog.start(try await client.join("a"))
        let b = ChangeLog.start(try await client.join("b"))
        await #expect(throws: SnapSyncError.forbidden(room: "c", right: "read", message: readDenied)) {
            try await client.join("c")
        }
        await #expect(throws: SnapSyncError.forbidden(room: "a", right: "write", message: writeDenied)) {
            try await client.mutate("a", [.deleteItems(["x"])])
        }
        _ = try await b.wait(for: "b's DIFF") { $0.count == 2 }
        try await eventually("a's changes to end") { await a.finished }
        #expect(await a.changes.map(\.kind) == [.initial])
        #expect(await client.replica("a") == nil)
        #expect(await client.replica("b") != nil)
        #expect(await client.replica("c") == nil)
        await #expect(throws: SnapSyncError.notJoined(room: "a")) {
            try await client.perform("a") { try $0.deleteItems(["x"]) }
        }
        let lost = await events.events.compactMap { if case .roomLost(let room, let error) = $0 { (room, error) } else { nil } }
        #expect(lost.count == 1)
        #expect(lost.first?.0 == "a")
        #expect(lost.first?.1 == .forbidden(room: "a", right: "read", message: leftMessage))
        #expect(client.state == .connected)
        let failure = await script.value
        #expect(failure == nil, "\(failure ?? "")")
        await client.close()
    }
}
