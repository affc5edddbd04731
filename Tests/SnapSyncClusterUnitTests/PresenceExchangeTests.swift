import SnapSyncTestThreads
import SnapSyncWire
import Testing

@testable import SnapSyncCluster

// The presence exchange's pure parts (Protocol/CLUSTER.md, "Presence"): its messages' bytes,
// and the ledger's answers to what arrives (gaps, snapshots, silent nodes), on instants of the
// test's own. The exchange over real NATS with real daemons: SnapSyncIntegrationTests'
// ClusterPresenceTests.

@Suite(.unitTests) struct PresenceExchangeTests {
    static let a = PresenceNode(tag: 0x0102_0304, incarnation: 0x1122_3344_5566_7788)
    static let b = PresenceNode(tag: 0x7fff_fffe, incarnation: 9)
    static let alice = PresenceMember(memberID: UInt64(0x0102_0304) << 32 | 1, principal: "alice", joinedAt: 1_700_000_000_000, state: [1, 2])
    static let bob = PresenceMember(memberID: UInt64(0x0102_0304) << 32 | 2, principal: "bob", joinedAt: 1_700_000_000_500)

    // MARK: Messages

    @Test func messagesRoundTrip() throws {
        let messages: [PresenceMessage] = [
            .heartbeat(node: Self.a, name: "host-1 pid 42"),
            .changes(
                node: Self.a, room: "lobby.é", sequence: 300, previous: 7,
                updates: [.member(Self.alice), .left(memberID: Self.bob.memberID, reason: .timedOut)]),
            .changes(node: Self.b, room: "r", sequence: 1, previous: 0, updates: []),
            .sync(node: Self.b, room: "lobby"),
            .snapshot(node: Self.a, room: "lobby", position: 12, final: true, members: [Self.alice, Self.bob]),
            .snapshot(node: Self.a, room: "lobby", position: 0, final: false, members: []),
        ]
        for message in messages {
            #expect(try PresenceMessage.decode(message.encode()) == message)
        }
    }

    /// The layout Protocol/CLUSTER.md gives, byte for byte.
    @Test func heartbeatAndSyncBytesAreTheDocumentedOnes() {
        #expect(
            PresenceMessage.heartbeat(node: Self.a, name: "n").encode()
                == [1, 1, 0x01, 0x02, 0x03, 0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 1, UInt8(ascii: "n")])
        #expect(
            PresenceMessage.changes(
                node: PresenceNode(tag: 1, incarnation: 2), room: "r", sequence: 5, previous: 3, updates: [.left(memberID: 9, reason: .nodeLost)]
            )
            .encode() == [1, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1, UInt8(ascii: "r"), 5, 3, 1, 1, 9, 4])
        #expect(
            PresenceMessage.snapshot(
                node: PresenceNode(tag: 1, incarnation: 2), room: "r", position: 200, final: true,
                members: [PresenceMember(memberID: 3, principal: "p", joinedAt: 4, state: [5])]
            ).encode() == [1, 4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1, UInt8(ascii: "r"), 0xc8, 0x01, 1, 1, 3, 1, UInt8(ascii: "p"), 4, 1, 5])
    }

    @Test func otherFormatsKindsAndDamageAreRefused() {
        var bytes = PresenceMessage.sync(node: Self.a, room: "lobby").encode()
        bytes[0] = 2
        #expect(throws: PresenceMessage.DecodingError.unknownFormat(2)) { try PresenceMessage.decode(bytes) }
        bytes[0] = 1
        bytes[1] = 9
        #expect(throws: PresenceMessage.DecodingError.unknownKind(9)) { try PresenceMessage.decode(bytes) }
        let whole = PresenceMessage.snapshot(node: Self.a, room: "lobby", position: 3, final: true, members: [Self.alice]).encode()
        for cut in 0..<whole.count {
            #expect(throws: (any Error).self) { try PresenceMessage.decode(Array(whole.prefix(cut))) }
        }
        #expect(throws: (any Error).self) { try PresenceMessage.decode(whole + [0]) }
    }

    @Test func nodeTagsKeepSessionIDsBelowTwoToTheSixtyThree() {
        for _ in 0..<1000 {
            let node = PresenceNode.random()
            #expect(node.tag >= 1 && node.tag <= 0x7fff_ffff)
            #expect(node.description.count == 8)
        }
        #expect(PresenceNode(tag: 0xab, incarnation: 1).description == "000000ab")
    }

    // MARK: Ledger

    static let t0 = ContinuousClock.now

    /// A ledger following "lobby" that heard node `a` at `t0`.
    static func ledger() -> PresenceLedger {
        var ledger = PresenceLedger()
        ledger.follow(room: "lobby")
        #expect(ledger.heard(a, name: "a", now: t0).0 == .new)
        return ledger
    }

    @Test func contiguousChangesApplyWithoutResync() {
        var ledger = Self.ledger()
        #expect(
            ledger.changes(node: Self.a, room: "lobby", sequence: 4, previous: 0, updates: [.member(Self.alice)]) == [
                .upsert(room: "lobby", member: Self.alice)
            ])
        #expect(
            ledger.changes(node: Self.a, room: "lobby", sequence: 9, previous: 4, updates: [.member(Self.bob)]) == [
                .upsert(room: "lobby", member: Self.bob)
            ])
        #expect(
            ledger.changes(node: Self.a, room: "lobby", sequence: 10, previous: 9, updates: [.left(memberID: Self.bob.memberID, reason: .left)]) == [
                .leave(room: "lobby", memberID: Self.bob.memberID, reason: .left)
            ])
        #expect(ledger.members(room: "lobby", tag: Self.a.tag) == [Self.alice.memberID])
        // Old or repeated messages: nothing.
        #expect(ledger.changes(node: Self.a, room: "lobby", sequence: 9, previous: 4, updates: [.member(Self.bob)]) == [])
        // A room not followed: nothing.
        #expect(ledger.changes(node: Self.a, room: "other", sequence: 11, previous: 0, updates: [.member(Self.bob)]) == [])
    }

    @Test func aGapAppliesAndAsksTheNodeAgain() {
        var ledger = Self.ledger()
        _ = ledger.changes(node: Self.a, room: "lobby", sequence: 4, previous: 0, updates: [.member(Self.alice)])
        // Sequence 6 (previous 5) missed: 7 names 6 as its previous.
        #expect(
            ledger.changes(node: Self.a, room: "lobby", sequence: 7, previous: 6, updates: [.member(Self.bob)]) == [
                .resync(room: "lobby", node: Self.a), .upsert(room: "lobby", member: Self.bob),
            ])
        // A first message that is not the node's first of the room: the start was missed.
        var fresh = Self.ledger()
        #expect(
            fresh.changes(node: Self.a, room: "lobby", sequence: 7, previous: 6, updates: [.member(Self.bob)]) == [
                .resync(room: "lobby", node: Self.a), .upsert(room: "lobby", member: Self.bob),
            ])
        // The snapshot answering it sets the members: alice, whose join was missed, appears;
        // bob, whose leave was missed, leaves.
        var answered = Self.ledger()
        _ = answered.changes(node: Self.a, room: "lobby", sequence: 7, previous: 6, updates: [.member(Self.bob)])
        #expect(
            answered.snapshot(node: Self.a, room: "lobby", position: 8, final: true, members: [Self.alice]) == [
                .leave(room: "lobby", memberID: Self.bob.memberID, reason: .disconnected), .upsert(room: "lobby", member: Self.alice),
            ])
        #expect(answered.members(room: "lobby", tag: Self.a.tag) == [Self.alice.memberID])
    }

    @Test func aRestartedRoomStreamDropsMembersWhoseLeaveWasMissed() {
        var ledger = Self.ledger()
        _ = ledger.changes(node: Self.a, room: "lobby", sequence: 4, previous: 0, updates: [.member(Self.alice)])
        // Alice's leave (5) missed; a new member comes with previous 0: the node had none.
        #expect(
            ledger.changes(node: Self.a, room: "lobby", sequence: 8, previous: 0, updates: [.member(Self.bob)]) == [
                .leave(room: "lobby", memberID: Self.alice.memberID, reason: .disconnected), .upsert(room: "lobby", member: Self.bob),
            ])
    }

    @Test func snapshotsInPartsApplyOnceWholeAndNeverOverNewerChanges() {
        var ledger = Self.ledger()
        #expect(ledger.snapshot(node: Self.a, room: "lobby", position: 5, final: false, members: [Self.alice]) == [])
        #expect(
            ledger.snapshot(node: Self.a, room: "lobby", position: 5, final: true, members: [Self.bob]) == [
                .upsert(room: "lobby", member: Self.alice), .upsert(room: "lobby", member: Self.bob),
            ])
        _ = ledger.changes(node: Self.a, room: "lobby", sequence: 9, previous: 5, updates: [.left(memberID: Self.bob.memberID, reason: .left)])
        // A snapshot older than the change applied: ignored.
        #expect(ledger.snapshot(node: Self.a, room: "lobby", position: 6, final: true, members: [Self.alice, Self.bob]) == [])
        #expect(ledger.members(room: "lobby", tag: Self.a.tag) == [Self.alice.memberID])
        // A node without members answers with its counter: its entries go.
        #expect(
            ledger.snapshot(node: Self.a, room: "lobby", position: 20, final: true, members: []) == [
                .leave(room: "lobby", memberID: Self.alice.memberID, reason: .disconnected)
            ])
        // Its next member comes with previous 0, no resync.
        #expect(
            ledger.changes(node: Self.a, room: "lobby", sequence: 21, previous: 0, updates: [.member(Self.bob)]) == [
                .upsert(room: "lobby", member: Self.bob)
            ])
    }

    @Test func aSilentNodeIsLostOnceWithItsMembersAndResyncedWhenHeardAgain() {
        var ledger = Self.ledger()
        ledger.follow(room: "other")
        _ = ledger.changes(node: Self.a, room: "lobby", sequence: 1, previous: 0, updates: [.member(Self.alice)])
        _ = ledger.changes(node: Self.a, room: "other", sequence: 2, previous: 0, updates: [.member(Self.bob)])
        #expect(ledger.heard(Self.b, name: "b", now: Self.t0 + .seconds(2)).0 == .new)
        let timeout = Duration.seconds(3)
        // Heard at t0: not lost before t0 + 3 s.
        #expect(ledger.expire(now: Self.t0 + .milliseconds(2999), timeout: timeout).lost.isEmpty)
        let (lost, effects) = ledger.expire(now: Self.t0 + .seconds(3), timeout: timeout)
        #expect(lost.map(\.state.node) == [Self.a])
        #expect(lost.map(\.members) == [2])
        #expect(
            Set(effects) == [
                .leave(room: "lobby", memberID: Self.alice.memberID, reason: .nodeLost), .leave(room: "other", memberID: Self.bob.memberID, reason: .nodeLost),
            ])
        #expect(ledger.nodes.keys.sorted() == [Self.b.tag])
        // Once only.
        #expect(ledger.expire(now: Self.t0 + .seconds(4), timeout: timeout).lost.isEmpty)
        // Heard again: asked for its members of every followed room.
        let (heard, resyncs) = ledger.heard(Self.a, now: Self.t0 + .seconds(5))
        #expect(heard == .returned)
        #expect(resyncs == [.resync(room: "lobby", node: Self.a), .resync(room: "other", node: Self.a)])
    }

    @Test func aNewIncarnationOfATagReplacesTheOld() {
        var ledger = Self.ledger()
        _ = ledger.changes(node: Self.a, room: "lobby", sequence: 1, previous: 0, updates: [.member(Self.alice)])
        let next = PresenceNode(tag: Self.a.tag, incarnation: Self.a.incarnation + 1)
        let (heard, effects) = ledger.heard(next, now: Self.t0 + .seconds(1))
        #expect(heard == .new)
        #expect(effects == [.leave(room: "lobby", memberID: Self.alice.memberID, reason: .nodeLost)])
    }

    @Test func unfollowingARoomLeavesItsEntries() {
        var ledger = Self.ledger()
        _ = ledger.changes(node: Self.a, room: "lobby", sequence: 1, previous: 0, updates: [.member(Self.alice), .member(Self.bob)])
        #expect(
            ledger.unfollow(room: "lobby") == [
                .leave(room: "lobby", memberID: Self.alice.memberID, reason: .disconnected),
                .leave(room: "lobby", memberID: Self.bob.memberID, reason: .disconnected),
            ])
        #expect(ledger.followedRooms.isEmpty)
    }
}
