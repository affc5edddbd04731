import Foundation
import Logging
import Testing
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire
@testable import SnapSyncHub
internal import Glibc

// Rooms that end, in-process (PROTOCOL.md §9, §11.19, §11.20): DROP, SET_TTL and expiry on an
// injected clock (`Hub.expireRooms(now:)`), never by waiting.

@Suite struct HubLifecycleTests {
    /// Members get LEFT room_deleted before the dropper's ACK, which carries the old position;
    /// the name is free and the next JOIN makes a new room with a new epoch.
    @Test func dropEndsTheMembershipsAndFreesTheName() throws {
        let harness = HubHarness()
        let alice = harness.connect()
        let bob = harness.connect()
        harness.join(alice, "todo")
        harness.join(bob, "todo")
        harness.mutate(alice, "todo", addItem("a", first: true))
        _ = harness.drain(alice)
        _ = harness.drain(bob)
        let old = try #require(harness.hub.rooms["todo"])
        harness.send(.drop(requestID: 9, room: "todo"), from: alice)
        let answer = harness.drain(alice)
        #expect(answer == [.left(room: "todo", code: 49, message: "room todo was deleted"), .ack(requestID: 9, epoch: old.epoch, version: 1)])
        #expect(harness.drain(bob) == [.left(room: "todo", code: 49, message: "room todo was deleted")])
        #expect(harness.hub.rooms["todo"] == nil && alice.memberships.isEmpty && bob.memberships.isEmpty)
        #expect(harness.hub.stats.roomsDeleted == 1 && harness.hub.totalItems == 0)
        #expect(harness.hub.roomBudget.total == 0)
        // A write to the old room reaches nobody; the new room starts over.
        harness.mutate(bob, "todo", addItem("b", first: true))
        let fresh = try #require(harness.hub.rooms["todo"])
        #expect(fresh.epoch != old.epoch && fresh.version == 1)
        #expect(harness.drain(alice).isEmpty)
    }

    /// A resume position of a dropped room is answered with SNAPSHOT resync of the new room,
    /// never CATCHUP, even when the new room reaches the same version.
    @Test func anOldResumePositionGetsAResync() throws {
        let harness = HubHarness()
        let session = harness.connect()
        harness.mutate(session, "r", addItem("a", first: true))
        let old = try #require(harness.hub.rooms["r"])
        let position = RoomPosition(epoch: old.epoch, version: old.version)
        harness.send(.drop(requestID: 2, room: "r"), from: session)
        harness.mutate(session, "r", addItem("z", first: true))
        _ = harness.drain(session)
        let answer = harness.join(session, "r", resume: position)
        guard case .snapshot(_, _, let epoch, let version, let reason, _, let snapshot, _) = answer.first else {
            Issue.record("no SNAPSHOT: \(answer)")
            return
        }
        #expect(reason == .resync && epoch != position.epoch && version == 1)
        #expect(snapshot.contains(item: "z") && !snapshot.contains(item: "a"))
    }

    @Test func droppingARoomThatDoesNotExistIsAcknowledgedAndCreatesNothing() {
        let harness = HubHarness()
        let session = harness.connect()
        harness.send(.drop(requestID: 3, room: "nothing"), from: session)
        #expect(harness.drain(session) == [.ack(requestID: 3, epoch: 0, version: 0)])
        #expect(harness.hub.rooms.isEmpty && harness.hub.stats.roomsDeleted == 0)
        harness.send(.drop(requestID: 4, room: ""), from: session)
        #expect(harness.drain(session).map(\.errorCode) == [.invalidRoomName])
    }

    /// DROP needs `admin` on the room: a token with read and write only is refused, and the
    /// room and its members stay.
    @Test func dropNeedsAdmin() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let writer = harness.connect(token: try await auth.token(["board:*=read,write"]))
        let admin = harness.connect(token: try await auth.token(["board:1=admin"]))
        harness.join(writer, "board:1")
        harness.send(.drop(requestID: 5, room: "board:1"), from: writer)
        let refused = harness.drain(writer)
        #expect(refused.map(\.errorCode) == [.forbidden])
        #expect(refused.first?.text == "token of alice grants no admin on room board:1")
        #expect(harness.hub.rooms["board:1"] != nil && writer.memberships.count == 1)
        harness.send(.drop(requestID: 6, room: "board:1"), from: admin)
        #expect(harness.drain(admin).map(\.type) == [.ack])
        #expect(harness.drain(writer).map(\.errorCode) == [.roomDeleted])
    }

    /// Two clients in one pass, one dropping and one joining: the JOIN is answered either from
    /// the old room and then ended by LEFT, or from a new room (new epoch) that stays; never a
    /// membership of a room that no longer exists.
    @Test func aJoinRacingADropGetsAConsistentAnswer() throws {
        for dropFirst in [false, true] {
            let harness = HubHarness()
            let dropper = harness.connect()
            let joiner = harness.connect()
            harness.mutate(dropper, "race", addItem("a", first: true))
            _ = harness.drain(dropper)
            let oldEpoch = try #require(harness.hub.rooms["race"]).epoch
            let drop = Message.drop(requestID: 1, room: "race")
            let join = Message.join(requestID: 2, room: "race", resume: RoomPosition(epoch: oldEpoch, version: 1), chain: .unknown)
            if dropFirst {
                harness.send(drop, from: dropper)
                harness.send(join, from: joiner)
            } else {
                harness.send(join, from: joiner)
                harness.send(drop, from: dropper)
            }
            let seen = harness.drain(joiner)
            let room = harness.hub.rooms["race"]
            if dropFirst {
                guard case .snapshot(_, _, let epoch, 0, .resync, _, _, _) = seen.first else {
                    Issue.record("expected a SNAPSHOT resync of a new room: \(seen)")
                    continue
                }
                #expect(seen.count == 1 && epoch != oldEpoch && room?.epoch == epoch)
                #expect(joiner.memberships.count == 1)
            } else {
                #expect(seen.map(\.type) == [.catchup, .left])
                #expect(seen.last?.errorCode == .roomDeleted)
                #expect(room == nil && joiner.memberships.isEmpty)
            }
        }
    }

    /// A room expires once its TTL passed with no member and no write: a member holds it, and
    /// its idle time starts when the last one leaves.
    /// Rooms expiring together are ended at most `maxExpiriesPerSweep` per sweep, so a mass
    /// expiry is spread over ticks instead of holding the loop.
    @Test func aMassExpiryIsSpreadOverSweeps() {
        let harness = HubHarness { $0.roomTTL = .seconds(10) }
        let writer = harness.connect()
        let count = RoomLifecycle.maxExpiriesPerSweep + 6
        for index in 0..<count { harness.mutate(writer, "r\(index)", addItem("a", first: true), requestID: UInt64(index + 1)) }
        _ = harness.drain(writer)
        #expect(harness.hub.rooms.count == count)
        harness.hub.expireRooms(now: harness.later(.seconds(11)))
        #expect(harness.hub.stats.roomsExpired == UInt64(RoomLifecycle.maxExpiriesPerSweep))
        #expect(harness.hub.rooms.count == 6)
        harness.hub.expireRooms(now: harness.later(.seconds(12)))
        #expect(harness.hub.stats.roomsExpired == UInt64(count) && harness.hub.rooms.isEmpty)
    }

    @Test func aRoomExpiresAfterItsTTLWithNoMemberAndNoWrite() throws {
        let harness = HubHarness()
        let session = harness.connect()
        harness.join(session, "t")
        harness.send(.setTTL(requestID: 2, room: "t", seconds: 60), from: session)
        let room = try #require(harness.hub.rooms["t"])
        #expect(harness.drain(session) == [.ack(requestID: 2, epoch: room.epoch, version: 0)])
        #expect(room.ttlSeconds == 60)
        let start = room.idleSince
        harness.hub.expireRooms(now: start + .seconds(3600))
        #expect(harness.hub.rooms["t"] != nil, "a member holds it")
        harness.send(.leave(requestID: 3, room: "t"), from: session)
        _ = harness.drain(session)
        let left = room.idleSince
        harness.hub.expireRooms(now: left + .seconds(59))
        #expect(harness.hub.rooms["t"] != nil, "not before its TTL")
        harness.hub.expireRooms(now: left + .seconds(60))
        #expect(harness.hub.rooms["t"] == nil && harness.hub.stats.roomsExpired == 1)
        #expect(harness.drain(session).isEmpty)
    }

    /// `--room-ttl` applies to rooms that set none; SET_TTL 0 keeps a room forever; a write
    /// starts the idle time again.
    @Test func theDefaultTTLAndItsExceptions() throws {
        let harness = HubHarness { $0.roomTTL = .seconds(10) }
        let session = harness.connect()
        harness.mutate(session, "default", addItem("a", first: true))
        harness.mutate(session, "forever", addItem("a", first: true))
        harness.send(.setTTL(requestID: 1, room: "forever", seconds: 0), from: session)
        _ = harness.drain(session)
        let written = try #require(harness.hub.rooms["default"]).idleSince
        harness.hub.expireRooms(now: written + .seconds(9))
        #expect(harness.hub.rooms.count == 2)
        harness.clock.advance(by: .seconds(5))
        harness.mutate(session, "default", addItem("b"))
        let rewritten = try #require(harness.hub.rooms["default"]).idleSince
        #expect(rewritten == written + .seconds(5))
        harness.hub.expireRooms(now: rewritten + .seconds(9))
        #expect(harness.hub.rooms.count == 2, "10 s after the first write, 9 s after the second")
        harness.hub.expireRooms(now: rewritten + .seconds(10))
        #expect(harness.hub.rooms["default"] == nil && harness.hub.rooms["forever"] != nil)
        #expect(harness.hub.stats.roomsExpired == 1)
    }

    /// A room the store holds but the hub does not (kept on disk only) is dropped in the store:
    /// its tombstone is logged and the ACK carries its last position.
    @Test func aRoomOnDiskOnlyIsDroppedInTheStore() throws {
        var template = Array("/tmp/snapsync-hub-drop-XXXXXX".utf8CString)
        let made = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) })
        let directory = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let logger = Logger(label: "hub-drop", factory: { _ in SwiftLogNoOpLogHandler() })
        let (store, _) = try DurableStore.open(options: StoreOptions(directory: directory + "/data", backgroundThread: false), logger: logger)
        defer { try? store.close() }
        var frame: [UInt8] = []
        FrameEncoder().encodeDiff(room: "disk", epoch: 42, version: 1, ops: [.appendSections(["s"])], into: &frame)
        store.append(WriteRecord(room: "disk", epoch: 42, version: 1, writeID: [], diffFrame: frame))
        try store.sync()
        let harness = HubHarness(store: store)
        let session = harness.connect()
        harness.send(.drop(requestID: 1, room: "disk"), from: session)
        #expect(harness.drain(session) == [.ack(requestID: 1, epoch: 42, version: 1)])
        #expect(store.position(of: "disk") == nil && store.statistics.roomsDropped == 1)
        #expect(harness.hub.stats.roomsDeleted == 1 && harness.hub.rooms.isEmpty)
    }

    @Test func setTTLNeedsWriteAndCreatesTheRoom() async throws {
        let auth = try await AuthFixture.make()
        let harness = HubHarness(auth: auth)
        let reader = harness.connect(token: try await auth.token(["*=read"]))
        harness.send(.setTTL(requestID: 1, room: "x", seconds: 5), from: reader)
        #expect(harness.drain(reader).map(\.errorCode) == [.forbidden])
        #expect(harness.hub.rooms.isEmpty)
        let writer = harness.connect(token: try await auth.token(["*=write"]))
        harness.send(.setTTL(requestID: 2, room: "x", seconds: 5), from: writer)
        #expect(harness.drain(writer).map(\.type) == [.ack])
        #expect(harness.hub.rooms["x"]?.ttlSeconds == 5)
    }
}
