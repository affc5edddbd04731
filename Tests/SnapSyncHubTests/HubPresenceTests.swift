import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub

// Presence in-process (PROTOCOL.md §9 "Presence", §11.24–§11.28): the watch, the changes and
// why members left, coalescing per interval, the view and its pages, the bounds, and the
// room's invariants (presence included) after every step.

@Suite(.unitTests) struct HubPresenceTests {
    /// A harness whose presence interval is 50 ms, and a helper to pass it.
    func harness(_ configure: @escaping (inout ServerConfiguration) -> Void = { _ in }) -> HubHarness {
        HubHarness { configuration in
            configuration.presenceInterval = .milliseconds(50)
            configure(&configuration)
        }
    }

    /// Lets an interval pass and fires the presence timer, as the daemon's would.
    func tick(_ harness: HubHarness, _ duration: Duration = .milliseconds(50)) {
        harness.clock.advance(by: duration)
        _ = harness.hub.flushPresence(now: harness.clock.now)
    }

    func watch(_ harness: HubHarness, _ session: Session, _ room: String, requestID: UInt64 = 9) -> [Message] {
        harness.send(.presenceWatch(requestID: requestID, room: room, watch: true), from: session)
        return harness.drain(session)
    }

    /// The changes of the PRESENCE_DIFF frames among `messages`, with each frame's count.
    func diffs(_ messages: [Message]) -> [(count: UInt64, changes: [PresenceChange])] {
        messages.compactMap {
            if case .presenceDiff(_, let count, let changes) = $0 { (count, changes) } else { nil }
        }
    }

    @Test func aWatcherSeesMembersJoinSetTheirStateAndLeaveWithWhy() {
        let harness = harness()
        let alice = harness.connect(), bob = harness.connect(), carol = harness.connect()
        harness.join(alice, "board")
        let first = watch(harness, alice, "board")
        guard case .presence(9, "board", 1, let members, 0) = first.first, first.count == 1 else {
            Issue.record("expected PRESENCE of alice alone, got \(first)")
            return
        }
        #expect(members.map(\.memberID) == [alice.id] && members[0].principal == "test" && members[0].state.isEmpty)

        harness.join(bob, "board")
        #expect(harness.drain(alice).isEmpty, "nothing before the interval")
        tick(harness)
        var seen = diffs(harness.drain(alice))
        guard seen.count == 1, seen[0].count == 2, case .joined(let joined) = seen[0].changes.first else {
            Issue.record("expected bob joined, got \(seen)")
            return
        }
        #expect(joined.memberID == bob.id && seen[0].changes.count == 1)

        harness.send(.setPresence(requestID: 3, room: "board", state: Array("card 7".utf8)), from: bob)
        #expect(harness.drain(bob).map(\.ackVersion) == [0])
        tick(harness)
        seen = diffs(harness.drain(alice))
        #expect(seen.count == 1 && seen.first?.changes == [.state(memberID: bob.id, state: Array("card 7".utf8))])

        harness.join(carol, "board")
        tick(harness)
        _ = harness.drain(alice)
        harness.send(.leave(requestID: 4, room: "board"), from: bob)
        harness.hub.end(carol, reason: "test")
        tick(harness)
        seen = diffs(harness.drain(alice))
        #expect(seen.count == 1 && seen.first?.count == 1)
        #expect(
            Set(seen.first?.changes ?? [])
                == [
                    .left(memberID: bob.id, reason: PresenceDeparture.left.rawValue),
                    .left(memberID: carol.id, reason: PresenceDeparture.disconnected.rawValue),
                ])
        harness.checkInvariants("board")
    }

    @Test func theIdleTimeoutAndASlowReaderAreTimedOutAndRevokedReadIsRemoved() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth) { $0.presenceInterval = .milliseconds(50) }
        let watcher = harness.connect(token: try await auth.token("w", ["*=read,write"]))
        let idle = harness.connect(token: try await auth.token("idle", ["*=read,write"]))
        let revoked = harness.connect(token: try await auth.token("r", ["*=read,write"]))
        for session in [watcher, idle, revoked] { harness.join(session, "room") }
        let view = watch(harness, watcher, "room")
        guard case .presence(_, _, 3, let members, _) = view.first else {
            Issue.record("expected 3 members, got \(view)")
            return
        }
        #expect(members.map(\.principal) == ["w", "idle", "r"], "principals are the tokens' subs")
        harness.hub.close(idle, error: .timeout, "no frame for 60 s")
        harness.send(.auth(requestID: 2, credentials: try await auth.token("r", ["other=read"])), from: revoked)
        tick(harness)
        let seen = diffs(harness.drain(watcher))
        #expect(
            Set(seen.first?.changes ?? [])
                == [
                    .left(memberID: idle.id, reason: PresenceDeparture.timedOut.rawValue),
                    .left(memberID: revoked.id, reason: PresenceDeparture.removed.rawValue),
                ])
        #expect(seen.first?.count == 1)
        harness.checkInvariants("room")
    }

    @Test func oneFramePerIntervalHoldsTheNetEffect() {
        let harness = harness()
        let watcher = harness.connect()
        harness.join(watcher, "r")
        _ = watch(harness, watcher, "r")
        let crowd = (0..<50).map { _ in harness.connect() }
        for member in crowd { harness.join(member, "r") }
        for _ in 0..<3 {
            for (n, member) in crowd.prefix(5).enumerated() {
                harness.send(.setPresence(requestID: 1, room: "r", state: [UInt8(n)]), from: member)
            }
        }
        harness.send(.setPresence(requestID: 1, room: "r", state: [99]), from: crowd[0])
        let passer = harness.connect()
        harness.join(passer, "r")
        harness.send(.leave(requestID: 2, room: "r"), from: passer)
        // Half an interval: nothing yet; the timer says when to fire again.
        harness.clock.advance(by: .milliseconds(10))
        #expect(harness.drain(watcher).isEmpty)
        tick(harness, .milliseconds(40))
        let seen = diffs(harness.drain(watcher))
        #expect(seen.count == 1, "a burst is one frame")
        let changes = seen.first?.changes ?? []
        #expect(seen.first?.count == 51 && changes.count == 50)
        #expect(!changes.contains { $0.memberID == passer.id }, "a member that joined and left between two frames is not mentioned")
        #expect(changes.contains(.joined(PresenceMember(memberID: crowd[0].id, principal: "test", joinedAt: 0, state: [99]))) == false)
        if case .joined(let member)? = changes.first(where: { $0.memberID == crowd[0].id }) {
            #expect(member.state == [99], "the last state, once")
        } else {
            Issue.record("crowd[0] not joined in \(changes)")
        }
        // A second frame waits for the next interval.
        harness.send(.setPresence(requestID: 1, room: "r", state: [7]), from: crowd[1])
        #expect(harness.hub.flushPresence(now: harness.clock.now) == .milliseconds(50))
        #expect(harness.drain(watcher).isEmpty)
        tick(harness)
        #expect(diffs(harness.drain(watcher)).first?.changes == [.state(memberID: crowd[1].id, state: [7])])
        harness.checkInvariants("r")
    }

    @Test func bigRoomsShowAViewAndListTheRestAPageAtATime() {
        let harness = harness { $0.wire.presenceView = 3 }
        // Connected first, joined last: the smallest member id joins after the others.
        let early = harness.connect()
        let members = (0..<6).map { _ in harness.connect() }
        for member in members { harness.join(member, "big") }
        let watcher = members[5]
        let view = watch(harness, watcher, "big")
        guard case .presence(_, _, 6, let shown, let next) = view.first else {
            Issue.record("expected the view of 6 members, got \(view)")
            return
        }
        #expect(shown.map(\.memberID) == members.prefix(3).map(\.id) && next == members[2].id)
        harness.send(.presenceList(requestID: 5, room: "big", after: next, limit: 0), from: watcher)
        guard case .presence(5, _, 6, let page, 0) = harness.drain(watcher).first else {
            Issue.record("expected the second and last page")
            return
        }
        #expect(page.map(\.memberID) == members.suffix(3).map(\.id))
        harness.send(.presenceList(requestID: 6, room: "big", after: 0, limit: 2), from: watcher)
        guard case .presence(6, _, 6, let two, let cursor) = harness.drain(watcher).first else {
            Issue.record("expected a page of 2")
            return
        }
        #expect(two.count == 2 && cursor == members[1].id)

        // A member outside the view changes: counted, nothing to show.
        harness.send(.setPresence(requestID: 1, room: "big", state: [1]), from: members[4])
        tick(harness)
        #expect(diffs(harness.drain(watcher)).isEmpty, "the count did not change and the view did not either")
        // The smallest id joins: it is shown, the view's last is hidden.
        harness.join(early, "big")
        tick(harness)
        var seen = diffs(harness.drain(watcher))
        #expect(seen.first?.count == 7)
        #expect(Set(seen.first?.changes.map(\.kind) ?? []) == [0, 4])
        #expect(seen.first?.changes.contains(.hidden(memberID: members[2].id)) == true)
        // A member of the view leaves: the next one is shown, with its state.
        harness.send(.leave(requestID: 2, room: "big"), from: members[0])
        tick(harness)
        seen = diffs(harness.drain(watcher))
        #expect(seen.first?.changes.contains(.left(memberID: members[0].id, reason: 0)) == true)
        #expect(seen.first?.changes.contains { if case .shown(let m) = $0 { m.memberID == members[2].id } else { false } } == true)
        harness.checkInvariants("big")
    }

    @Test func presenceIsBoundedAndForMembersOnly() {
        let harness = harness {
            $0.wire.maxPresenceBytes = 8
            $0.presenceUpdatesPerSecond = 2
        }
        let member = harness.connect(), stranger = harness.connect()
        harness.join(member, "r")
        harness.send(.setPresence(requestID: 1, room: "r", state: Array(repeating: 1, count: 9)), from: member)
        #expect(harness.drain(member).map(\.errorCode) == [.payloadTooLarge])
        for request in [UInt64(2), 3, 4] {
            harness.send(.setPresence(requestID: request, room: "r", state: [UInt8(request)]), from: member)
        }
        #expect(harness.drain(member).map(\.errorCode) == [nil, nil, .busy])
        #expect(harness.hub.rooms["r"]?.presence.live(member.id)?.state == [3], "a refused state is not set")
        harness.clock.advance(by: .seconds(1))
        harness.send(.setPresence(requestID: 5, room: "r", state: []), from: member)
        #expect(harness.drain(member).map(\.ackVersion) == [0])
        #expect(harness.hub.stats.presenceUpdatesRefused == 1 && harness.hub.stats.presenceUpdates == 3)
        for message in [
            Message.presenceWatch(requestID: 6, room: "r", watch: true), .presenceList(requestID: 6, room: "r", after: 0, limit: 0),
            .setPresence(requestID: 6, room: "r", state: []),
        ] {
            harness.send(message, from: stranger)
            #expect(harness.drain(stranger).map(\.errorCode) == [.notJoined])
        }
        // A version 3 connection has no presence messages: the frame is not one of its version.
        let old = harness.connect(versions: [3])
        harness.join(old, "r")
        harness.send(.presenceWatch(requestID: 7, room: "r", watch: true), from: old)
        #expect(harness.drain(old).map(\.errorCode) == [.unknownMessageType])
        harness.checkInvariants("r")
    }

    @Test func unwatchingStopsTheFramesAndLeavingEndsTheWatch() {
        let harness = harness()
        let watcher = harness.connect(), other = harness.connect()
        harness.join(watcher, "r")
        _ = watch(harness, watcher, "r")
        harness.send(.presenceWatch(requestID: 2, room: "r", watch: false), from: watcher)
        #expect(harness.drain(watcher).map(\.ackVersion) == [0])
        harness.join(other, "r")
        tick(harness)
        #expect(harness.drain(watcher).isEmpty)
        _ = watch(harness, watcher, "r")
        harness.send(.leave(requestID: 3, room: "r"), from: watcher)
        _ = harness.drain(watcher)
        harness.send(.setPresence(requestID: 1, room: "r", state: [1]), from: other)
        tick(harness)
        #expect(harness.drain(watcher).isEmpty, "no presence after the LEAVE's ACK")
        #expect(harness.hub.rooms["r"]?.presenceWatchers.isEmpty == true)
        // A DROP ends every membership: no presence frame follows the LEFT.
        harness.join(watcher, "r")
        _ = watch(harness, watcher, "r")
        harness.send(.drop(requestID: 4, room: "r"), from: other)
        tick(harness)
        let last = harness.drain(watcher)
        #expect(last.map(\.type) == [.left])
        #expect(harness.hub.presenceQueue.isEmpty)
    }

    /// Joins to a room nobody watches wait for the interval too (one merge of the ids for the
    /// whole storm), and a watch of it describes it as of now.
    @Test func aStormOfJoinsIsPublishedOnceAndAWatchSeesItAtOnce() {
        let harness = harness()
        let crowd = (0..<300).map { _ in harness.connect() }
        for member in crowd { harness.join(member, "storm") }
        let room = harness.hub.rooms["storm"]!
        #expect(room.presence.count == 0 && room.presence.pending.count == 300 && harness.hub.presenceQueue.count == 1)
        tick(harness)
        #expect(room.presence.count == 300 && !room.presence.hasPending)
        harness.send(.leave(requestID: 2, room: "storm"), from: crowd[0])
        _ = harness.drain(crowd[0])
        let view = watch(harness, crowd[1], "storm")
        guard case .presence(_, _, 299, let members, _) = view.first else {
            Issue.record("expected 299 members now, got \(view)")
            return
        }
        #expect(members.first?.memberID == crowd[1].id)
        harness.checkInvariants("storm")
    }

    /// A frame for more watchers than a turn's budget reaches them over several turns (the
    /// timer asks to fire again at once); the room's next frame waits for it, and a watcher
    /// that started meanwhile is not sent the frame its PRESENCE already holds.
    @Test func aLargeRoomsFrameReachesItsWatchersOverSeveralTurns() {
        let harness = harness()
        let budget = Hub.presenceDeliveriesPerPass
        let watchers = (0..<(budget + budget / 2)).map { _ in harness.connect() }
        for watcher in watchers {
            harness.join(watcher, "big")
            _ = watch(harness, watcher, "big")
        }
        tick(harness)  // the joins among the watchers: two turns
        #expect(harness.hub.flushPresence(now: harness.clock.now) != .zero)
        for watcher in watchers { #expect(diffs(harness.drain(watcher)).count == 1) }
        let late = harness.connect()
        harness.join(late, "big")
        harness.clock.advance(by: .seconds(1))
        #expect(harness.hub.flushPresence(now: harness.clock.now) == .zero, "deliveries remain: fire again at once")
        let first = watchers.map { diffs(harness.drain($0)).count }
        #expect(first.reduce(0, +) == budget)
        // A watcher starting now holds the change in its PRESENCE, and is not sent the frame.
        let view = watch(harness, late, "big")
        guard case .presence(_, _, let count, _, _) = view.first else {
            Issue.record("expected PRESENCE, got \(view)")
            return
        }
        #expect(count == UInt64(watchers.count + 1))
        harness.send(.setPresence(requestID: 1, room: "big", state: [1]), from: watchers[0])
        // The rest of the frame goes out; the state waits for the room's interval.
        #expect(harness.hub.flushPresence(now: harness.clock.now) == harness.hub.presenceInterval(watchers: watchers.count + 1))
        let second = watchers.map { diffs(harness.drain($0)) }
        #expect(second.map(\.count).reduce(0, +) == budget / 2, "the rest of the first frame, not the next")
        #expect(zip(first, second).allSatisfy { $0 + $1.count == 1 }, "each watcher gets the frame once")
        #expect(harness.drain(late).isEmpty)
        // The next frame, once the first reached everyone.
        harness.clock.advance(by: .seconds(1))
        _ = harness.hub.flushPresence(now: harness.clock.now)
        _ = harness.hub.flushPresence(now: harness.clock.now)
        #expect(diffs(harness.drain(late)).first?.changes == [.state(memberID: watchers[0].id, state: [1])])
        #expect(watchers.allSatisfy { diffs(harness.drain($0)).count == 1 })
        harness.checkInvariants("big")
    }

    @Test func theIntervalGrowsWithTheWatchers() {
        let harness = harness()
        #expect(harness.hub.presenceInterval(watchers: 1) == .milliseconds(50))
        #expect(harness.hub.presenceInterval(watchers: 1_000) == .milliseconds(50))
        #expect(harness.hub.presenceInterval(watchers: 2_500) == .milliseconds(150))
        #expect(harness.hub.presenceInterval(watchers: 100_000) == .seconds(1))
    }

    /// The law of the coalescing: a watcher that starts from a PRESENCE and applies every
    /// PRESENCE_DIFF (§11.28) holds exactly the published view and count, whatever happens in
    /// between; seeded, with the structure's invariants after every step.
    @Test(arguments: [1, 2, 3, 7, 42]) func aWatcherThatAppliesEveryFrameHoldsTheView(seed: UInt64) throws {
        var random = SplitMix(seed: seed)
        let viewSize = 4
        var presence = RoomPresence()
        var watcher: [UInt64: PresenceMember] = [:]
        var count = 0
        var clock: UInt64 = 1
        for _ in 0..<300 {
            for _ in 0..<Int(random.next() % 6) {
                let id = random.next() % 12 + 1
                clock += 1
                switch random.next() % 3 {
                case 0: presence.upsert(PresenceMember(memberID: id, principal: "p\(id)", joinedAt: clock))
                case 1: presence.setState(id, [UInt8(truncatingIfNeeded: random.next())])
                default: presence.remove(id, reason: .left)
                }
                try presence.checkInvariants()
            }
            if let (newCount, changes) = presence.flush(view: viewSize) {
                #expect(Set(changes.map(\.memberID)).count == changes.count, "one change per member")
                for change in changes {
                    switch change {
                    case .joined(let member), .shown(let member): watcher[member.memberID] = member
                    case .left(let id, _), .hidden(let id): watcher[id] = nil
                    case .state(let id, let state): watcher[id]?.state = state
                    }
                }
                count = newCount
            }
            try presence.checkInvariants()
            let expected = presence.order.prefix(viewSize).map { presence.published[$0]! }
            #expect(watcher.values.sorted { $0.memberID < $1.memberID } == expected)
            #expect(count == presence.count)
        }
    }
}

/// A tiny seeded generator (SplitMix64), so a failing seed can be run again.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E4B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
