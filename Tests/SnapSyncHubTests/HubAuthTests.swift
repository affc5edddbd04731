import Foundation
import Logging
import Testing
import SnapSyncAuth
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub

// Authentication in the hub, in-process (docs/auth.md): HELLO's token, the right each request
// needs and the order of the checks, AUTH replacing grants (LEFT before ACK), and expiry on an
// injected clock.

@Suite struct HubAuthTests {
    // MARK: HELLO

    @Test func helloWithoutATokenIsRefusedAndNothingElseIsServed() async throws {
        let harness = HubHarness(auth: try await AuthFixture.make())
        let (session, answer) = harness.hello([])
        #expect(answer.map(\.errorCode) == [.unauthorized])
        #expect(answer.first?.text == "token refused: no token")
        #expect(session.state == .closing && session.principal == nil)
        #expect(harness.hub.stats.authRefused == 1)
        // Whatever it sends next is dropped: no room is created, nothing is answered.
        harness.send(.join(requestID: 1, room: "board:1", resume: nil), from: session)
        #expect(harness.drain(session).isEmpty && harness.hub.rooms.isEmpty)
    }

    @Test func aRefusedTokenIsNamedButNeverEchoed() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let expired = try await auth.token(["board:*=read"], expiresIn: -10)
        let (session, answer) = harness.hello(expired)
        #expect(answer.map(\.errorCode) == [.unauthorized])
        let text = try #require(answer.first?.text)
        #expect(text.hasPrefix("token refused: expired at "))
        #expect(!text.contains(String(decoding: expired, as: UTF8.self)))
        #expect(session.state == .closing)
        let notUTF8 = harness.hello([0x65, 0xFF, 0x2E]).1
        #expect(notUTF8.first?.text == "token refused: malformed token (encoding): not UTF-8")
    }

    @Test func aValidTokenGivesThePrincipalAndItsDeadline() async throws {
        let auth = try await AuthFixture.make(leeway: .seconds(30))
        let harness = HubHarness(auth: auth)
        let session = harness.connect(token: try await auth.token("bob", ["board:*=read"], expiresIn: 60))
        #expect(session.principal?.subject == "bob")
        #expect(session.authDeadline == AuthFixture.now.addingTimeInterval(90))
        #expect(session.logMetadata["sub"] == "bob")
    }

    // MARK: Rights

    @Test func joinNeedsReadAndADeniedJoinLeavesNoTrace() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let session = harness.connect(token: try await auth.token(["board:1=read,write"]))
        let denied = harness.join(session, "board:2", requestID: 4)
        #expect(denied.map(\.errorCode) == [.forbidden] && denied.first?.requestID == 4)
        #expect(denied.first?.text == "token of alice grants no read on room board:2")
        #expect(harness.hub.rooms["board:2"] == nil && session.memberships.isEmpty)
        #expect(harness.hub.stats.forbidden == 1)
        let allowed = harness.join(session, "board:1", requestID: 5)
        guard case .snapshot(5, "board:1", _, 0, .initial, _, _, _) = allowed.first else {
            Issue.record("expected SNAPSHOT, got \(allowed)")
            return
        }
        #expect(session.memberships["board:1"] != nil)
    }

    @Test func aPrefixGrantCoversItsPrefixOnly() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let session = harness.connect(token: try await auth.token(["board:*=read"]))
        #expect(harness.join(session, "board:9").first?.errorCode == nil)
        #expect(harness.join(session, "board:").first?.errorCode == nil)
        #expect(harness.join(session, "boardx").map(\.errorCode) == [.forbidden])
        #expect(harness.join(session, "chat:1").map(\.errorCode) == [.forbidden])
    }

    /// Room names are compared byte for byte (PROTOCOL.md §2), as grants are: a name spelled
    /// with a combining accent is another room than the precomposed one, so a grant that
    /// matches the one spelling never reaches the other's data.
    @Test func canonicallyEquivalentNamesAreDifferentRoomsSoGrantsCannotBeSidestepped() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let owner = harness.connect(token: try await auth.token(["doc:\u{E1}=read,write"]))
        harness.join(owner, "doc:\u{E1}")
        harness.mutate(owner, "doc:\u{E1}", addItem("secret", first: true))
        _ = harness.drain(owner)
        let mallory = harness.connect(token: try await auth.token("mallory", ["doc:a*=read,write"]))
        #expect(harness.join(mallory, "doc:\u{E1}").map(\.errorCode) == [.forbidden])
        // "doc:a" + U+0301 is `==` to "doc:\u{E1}" as a Swift String, but not in bytes.
        let other = harness.join(mallory, "doc:a\u{301}")
        guard case .snapshot(_, _, _, let version, _, _, let snapshot, _) = other.first else {
            Issue.record("expected a SNAPSHOT, got \(other)")
            return
        }
        #expect(version == 0 && snapshot.numberOfItems == 0)
        harness.mutate(mallory, "doc:a\u{301}", addItem("x", first: true))
        #expect(harness.drain(owner).isEmpty)
        #expect(harness.hub.rooms.count == 2 && harness.hub.rooms[RoomName("doc:\u{E1}")]?.version == 1)
    }

    /// The subject of an AUTH must be the session's in bytes, not only as a Swift String.
    @Test func authWithACanonicallyEquivalentSubjectIsAnotherSubject() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let session = harness.connect(token: try await auth.token("jos\u{E9}", ["board:*=read"]))
        harness.send(.auth(requestID: 2, credentials: try await auth.token("jose\u{301}", ["*=read,write,admin"])), from: session)
        #expect(harness.drain(session).map(\.errorCode) == [.unauthorized])
        #expect(session.state == .closing)
    }

    @Test func writesNeedWriteAndAForbiddenWriteChangesAndSendsNothing() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let writer = harness.connect(token: try await auth.token("writer", ["board:*=read,write"]))
        let reader = harness.connect(token: try await auth.token("reader", ["board:*=read"]))
        harness.join(writer, "board:1")
        harness.join(reader, "board:1")
        harness.mutate(writer, "board:1", addItem("a", first: true))
        #expect(harness.drain(writer).map(\.ackVersion) == [nil, 1])
        #expect(harness.drain(reader).map(\.diffVersion) == [1])

        harness.mutate(reader, "board:1", addItem("b"), requestID: 8)
        let mutate = harness.drain(reader)
        #expect(mutate.map(\.errorCode) == [.forbidden] && mutate.first?.requestID == 8)
        #expect(mutate.first?.text == "token of reader grants no write on room board:1")
        harness.send(.replace(requestID: 9, room: "board:1", expectedVersion: nil, writeID: [], snapshot: RoomSnapshot()), from: reader)
        #expect(harness.drain(reader).map(\.errorCode) == [.forbidden])
        #expect(harness.hub.rooms["board:1"]?.version == 1)
        #expect(harness.drain(writer).isEmpty)
        #expect(harness.hub.stats.forbidden == 2 && harness.hub.stats.writesApplied == 1)
    }

    @Test func theRoomNameIsCheckedFirstThenTheRightThenEverythingElse() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth) {
            $0.maxRooms = 1
            $0.wire.maxRoomsPerConnection = 1
        }
        let session = harness.connect(token: try await auth.token(["board:1=read,write"]))
        // An invalid name is invalid_room_name, whatever the grants.
        #expect(harness.join(session, "").map(\.errorCode) == [.invalidRoomName])
        harness.mutate(session, "", addItem("a", first: true))
        #expect(harness.drain(session).map(\.errorCode) == [.invalidRoomName])
        // The right before the connection's room limit, the server's room limit, the store.
        harness.join(session, "board:1")
        #expect(harness.join(session, "board:2").map(\.errorCode) == [.forbidden])
        harness.mutate(session, "board:2", addItem("a", first: true))
        #expect(harness.drain(session).map(\.errorCode) == [.forbidden])
        #expect(harness.hub.rooms.keys.map(\.string).sorted() == ["board:1"])
        // With the right, the limits answer as before.
        let other = harness.connect(token: try await auth.token("bob", ["*=read,write"]))
        harness.mutate(other, "board:3", addItem("a", first: true))
        #expect(harness.drain(other).map(\.errorCode) == [.tooManyRooms])
    }

    @Test func statsNeedsAdminOnEveryRoom() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let boardAdmin = harness.connect(token: try await auth.token(["board:*=read,write,admin"]))
        harness.send(.stats(requestID: 3), from: boardAdmin)
        let refused = harness.drain(boardAdmin)
        #expect(refused.map(\.errorCode) == [.forbidden] && refused.first?.requestID == 3)
        let admin = harness.connect(token: try await auth.token("ops", ["*=admin"]))
        harness.send(.stats(requestID: 4), from: admin)
        guard case .statsReply(4, let stats) = harness.drain(admin).first else {
            Issue.record("expected STATS_REPLY")
            return
        }
        let values = Dictionary(stats.map { ($0.name, $0.value) }, uniquingKeysWith: { $1 })
        #expect(values["forbidden"] == 1 && values["auth_refused"] == 0 && values["tokens_expired"] == 0)
    }

    // MARK: AUTH

    @Test func authReplacesGrantsAndLeavesUnreadableRoomsBeforeItsAck() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let session = harness.connect(token: try await auth.token(["board:*=read,write"]))
        for room in ["board:3", "board:1", "board:2"] { harness.join(session, room) }
        harness.send(.auth(requestID: 12, credentials: try await auth.token(["board:1=read"], expiresIn: 7200)), from: session)
        let answer = harness.drain(session)
        guard answer.count == 3, case .left("board:2", let code2, let text2) = answer[0], case .left("board:3", let code3, _) = answer[1],
            case .ack(12, 0, 0) = answer[2]
        else {
            Issue.record("expected LEFT board:2, LEFT board:3, ACK; got \(answer)")
            return
        }
        #expect(code2 == ErrorCode.forbidden.rawValue && code3 == ErrorCode.forbidden.rawValue)
        #expect(text2 == "token of alice grants no read on room board:2")
        #expect(session.memberships.names == ["board:1"])
        #expect(harness.hub.rooms["board:2"]?.members.count == 0)
        #expect(session.authDeadline == AuthFixture.now.addingTimeInterval(7200))
        // The old token's write right is gone too.
        harness.mutate(session, "board:1", addItem("a", first: true))
        #expect(harness.drain(session).map(\.errorCode) == [.forbidden])
        // No DIFF of a room left reaches the session.
        let writer = harness.connect(token: try await auth.token("w", ["*=write"]))
        harness.mutate(writer, "board:2", addItem("x", first: true))
        #expect(harness.drain(session).isEmpty)
    }

    @Test("AUTH with the token the session holds is answered without a signature check, however often it comes")
    func authWithTheHeldTokenIsNotVerifiedAgain() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let token = try await auth.token(["board:*=read"], expiresIn: 60)
        let session = harness.connect(token: token)
        harness.join(session, "board:1")
        // Past the token's exp for the verifier (the session's own deadline is the timer's to
        // enforce): a check of the token would now refuse it, so an ACK proves there was none.
        harness.hub.wallClock = { AuthFixture.now.addingTimeInterval(120) }
        for id in 1...1000 { harness.send(.auth(requestID: UInt64(id), credentials: token), from: session) }
        let answers = harness.drain(session)
        #expect(answers.count == 1000)
        #expect(answers.allSatisfy { if case .ack(_, 0, 0) = $0 { true } else { false } }, "\(answers.prefix(3))")
        #expect(session.state == .ready && session.memberships.names == ["board:1"])
    }

    @Test("a connection has at most 4 new tokens verified per 4 seconds; REJECT busy beyond, the session unchanged")
    func newTokensAreVerifiedAtMostABurstPerWindow() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let session = harness.connect(token: try await auth.token(["board:*=read"]))
        var tokens: [[UInt8]] = []
        for n in 1...5 { tokens.append(try await auth.token(["board:*=read"], expiresIn: 7000 + Double(n))) }
        for (n, token) in tokens.enumerated() { harness.send(.auth(requestID: UInt64(n + 1), credentials: token), from: session) }
        harness.send(.auth(requestID: 6, credentials: tokens[3]), from: session)  // the held token: no check, no bound
        let answers = harness.drain(session)
        guard answers.count == 6, case .reject(5, let code, _, _, let text) = answers[4] else {
            Issue.record("expected the fifth AUTH refused; got \(answers)")
            return
        }
        #expect(answers.enumerated().allSatisfy { n, answer in n == 4 || { if case .ack(UInt64(n + 1), 0, 0) = answer { true } else { false } }() })
        #expect(code == ErrorCode.busy.rawValue && text.contains("4 new tokens verified in the last 4"), "\(text)")
        #expect(session.authDeadline == AuthFixture.now.addingTimeInterval(7004), "the refused token changed nothing")
        harness.clock.advance(by: Hub.authVerifyWindow)
        harness.send(.auth(requestID: 7, credentials: tokens[4]), from: session)
        #expect(harness.drain(session).map { if case .ack(7, 0, 0) = $0 { true } else { false } } == [true])
        #expect(session.authDeadline == AuthFixture.now.addingTimeInterval(7005))
    }

    @Test func authForAnotherSubjectOrWithABadTokenEndsTheSession() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let session = harness.connect(token: try await auth.token(["board:*=read"]))
        harness.join(session, "board:1")
        harness.send(.auth(requestID: 2, credentials: try await auth.token("mallory", ["*=read,write,admin"])), from: session)
        let answer = harness.drain(session)
        #expect(answer.map(\.errorCode) == [.unauthorized])
        #expect(answer.first?.text?.contains("\"mallory\"") == true)
        #expect(session.state == .closing && session.memberships.isEmpty)
        #expect(session.principal?.subject == "alice")

        let other = harness.connect(token: try await auth.token(["board:*=read"]))
        harness.send(.auth(requestID: 3, credentials: Array("a.b".utf8)), from: other)
        #expect(harness.drain(other).map(\.errorCode) == [.unauthorized])
        #expect(other.state == .closing && harness.hub.stats.authRefused == 2)
    }

    @Test func withoutAuthenticationAuthIsAcknowledgedUnread() {
        let harness = HubHarness()
        let session = harness.connect()
        harness.send(.auth(requestID: 5, credentials: Array("not a token".utf8)), from: session)
        guard case .ack(5, 0, 0) = harness.drain(session).first else {
            Issue.record("expected ACK")
            return
        }
        #expect(session.principal == nil && harness.hub.tokenDeadlines.count == 0)
    }

    // MARK: Expiry

    @Test func aTokenThatRunsOutEndsTheSessionWithTokenExpired() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let session = harness.connect(token: try await auth.token(["board:*=read"], expiresIn: 10))
        harness.join(session, "board:1")
        harness.hub.expireSessions(now: AuthFixture.now.addingTimeInterval(9.9))
        #expect(session.state == .ready && harness.drain(session).isEmpty)
        harness.hub.expireSessions(now: AuthFixture.now.addingTimeInterval(10))
        let answer = harness.drain(session)
        #expect(answer.map(\.errorCode) == [.tokenExpired])
        #expect(answer.first?.text?.hasPrefix("the token of alice expired at ") == true)
        #expect(session.state == .closing && session.memberships.isEmpty)
        #expect(harness.hub.stats.tokensExpired == 1 && harness.hub.tokenDeadlines.count == 0)
    }

    @Test func anAuthBeforeTheDeadlineKeepsTheSession() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let session = harness.connect(token: try await auth.token(["board:*=read"], expiresIn: 10))
        harness.send(.auth(requestID: 1, credentials: try await auth.token(["board:*=read"], expiresIn: 100)), from: session)
        #expect(harness.drain(session).first?.ackVersion == 0)
        // The first token's entry is stale now and skipped.
        harness.hub.expireSessions(now: AuthFixture.now.addingTimeInterval(50))
        #expect(session.state == .ready && harness.drain(session).isEmpty && harness.hub.stats.tokensExpired == 0)
        harness.hub.expireSessions(now: AuthFixture.now.addingTimeInterval(100))
        #expect(harness.drain(session).map(\.errorCode) == [.tokenExpired])
    }

    @Test func sessionsThatEndedLeaveNoDeadlineBehindThatMatters() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let gone = harness.connect(token: try await auth.token(["board:*=read"], expiresIn: 5))
        harness.hub.end(gone, reason: "test")
        let staying = harness.connect(token: try await auth.token("bob", ["board:*=read"], expiresIn: 50))
        harness.hub.expireSessions(now: AuthFixture.now.addingTimeInterval(10))
        #expect(staying.state == .ready && harness.hub.stats.tokensExpired == 0)
    }

    @Test func repeatedAuthsDoNotGrowTheDeadlineHeapWithoutBound() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let session = harness.connect(token: try await auth.token(["board:*=read"], expiresIn: 10))
        for index in 1...300 {
            harness.clock.advance(by: .seconds(1))  // within the bound: each new token is verified
            harness.send(.auth(requestID: UInt64(index), credentials: try await auth.token(["board:*=read"], expiresIn: 10 + Double(index))), from: session)
        }
        #expect(harness.drain(session).count == 300)
        #expect(harness.hub.tokenDeadlines.count <= 2 * harness.hub.sessions.count + 64)
        harness.hub.expireSessions(now: AuthFixture.now.addingTimeInterval(309))
        #expect(session.state == .ready)
        harness.hub.expireSessions(now: AuthFixture.now.addingTimeInterval(310))
        #expect(session.state == .closing)
    }
}
