import Foundation
import Logging
import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub
@testable import SnapSyncStore
internal import Glibc

// Sleeping rooms, in-process, with a real durable store in a temporary directory: a
// memberless room idle for --room-idle is evicted to its checkpoint and woken by the next
// request naming it with the same epoch, version, digest, history and write ids; --max-rooms
// bounds resident rooms; a restart leaves checkpointed rooms asleep. Time is passed to the sweep
// (`sleepIdleRooms(now:)`) as instants of the hub's manual clock, never waited for, and an
// eviction batch has no time budget unless a test drives one (so that a slow disk cannot leave
// a due room awake).

/// A hub over a durable store in a fresh temporary directory, rooms sleeping after `idle`.
private struct SleepyHub {
    let directory: String
    var harness: HubHarness
    var store: DurableStore { harness.hub.store as! DurableStore }
    var hub: Hub { harness.hub }

    /// Folds every catch-up worth folding, however small (the rooms here are), when `foldsSmall`.
    let foldsSmall: Bool

    init(idle: Duration? = .seconds(1), maxRooms: Int = 100_000, ttl: Duration? = nil, foldsSmall: Bool = false) throws {
        var template = Array("/tmp/snapsync-sleep-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed: \(errno)")
        directory = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
        self.foldsSmall = foldsSmall
        harness = try Self.open(directory, idle: idle, maxRooms: maxRooms, ttl: ttl, foldsSmall: foldsSmall)
    }

    static func options(_ directory: String) -> StoreOptions {
        StoreOptions(
            directory: directory + "/data", fsync: .always, segmentBytes: 64 << 10, maxDiffFrameBytes: 64 << 10,
            preallocationBytes: 16 << 10, historyLimit: 16, backgroundThread: false, sleepingRooms: true, keepsResumeBases: true)
    }

    static func open(_ directory: String, idle: Duration?, maxRooms: Int, ttl: Duration? = nil, foldsSmall: Bool = false) throws -> HubHarness {
        let logger = Logger(label: "sleep-tests", factory: { _ in SwiftLogNoOpLogHandler() })
        let (store, recovered) = try DurableStore.open(options: options(directory), logger: logger)
        let harness = HubHarness(store: store) {
            $0.roomIdle = idle
            $0.maxRooms = maxRooms
            $0.roomTTL = ttl
            $0.wire.historyCount = 16
            if foldsSmall { $0.foldMinimumReplayBytes = 0 }
        }
        harness.hub.sleepBatchDuration = nil
        try harness.hub.restore(recovered)
        return harness
    }

    /// The sweep as the one-second timer runs it, `after` from the hub's now.
    func sweep(after: Duration = .seconds(2)) {
        hub.sleepIdleRooms(now: harness.later(after))
    }

    /// The store closed cleanly and opened again, in a new hub.
    mutating func restart(idle: Duration? = .seconds(1), maxRooms: Int = 100_000, ttl: Duration? = nil) throws {
        try store.close(checkpointing: hub.roomImages(store.roomsDueAtClose()))
        harness = try Self.open(directory, idle: idle, maxRooms: maxRooms, ttl: ttl, foldsSmall: foldsSmall)
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}

/// The SNAPSHOT in `messages`: (epoch, version, digest, snapshot).
private func snapshotOf(_ messages: [Message]) -> (epoch: UInt64, version: UInt64, digest: SnapshotDigest, snapshot: RoomSnapshot)? {
    for case .snapshot(_, _, let epoch, let version, _, let digest, let snapshot, _) in messages {
        return (epoch, version, digest, snapshot)
    }
    return nil
}

@Suite(.unitTests) struct HubSleepTests {
    /// Three writes with write ids to a room its writer then leaves.
    private func writeThree(_ s: SleepyHub, room: String = "r") -> (Session, [[UInt8]]) {
        let writer = s.harness.connect()
        s.harness.join(writer, room)
        let ids: [[UInt8]] = [[1], [2], [3]]
        for (index, id) in ids.enumerated() {
            s.harness.mutate(writer, room, addItem("i\(index)", first: index == 0), requestID: UInt64(10 + index), writeID: id)
        }
        #expect(s.harness.drain(writer).compactMap(\.ackVersion) == [1, 2, 3])
        s.harness.send(.leave(requestID: 20, room: room), from: writer)
        _ = s.harness.drain(writer)
        return (writer, ids)
    }

    @Test func anIdleRoomSleepsAndWakesWithTheSameEpochVersionAndDigest() throws {
        let s = try SleepyHub()
        defer { s.remove() }
        _ = writeThree(s)
        let before = try #require(s.hub.rooms["r"])
        let (epoch, digest, snapshot) = (before.epoch, before.digest, before.snapshot)
        #expect(s.hub.roomBudget.total > 0 && s.hub.totalItems == 3)

        s.sweep(after: .milliseconds(500))  // not idle long enough
        #expect(s.hub.rooms.count == 1 && s.hub.sleepingRoomCount == 0)
        s.sweep()
        #expect(s.hub.rooms.isEmpty && s.hub.sleepingRoomCount == 1 && s.hub.stats.roomsEvicted == 1)
        #expect(s.store.isAsleep("r") && s.store.sleepingRoomCount == 1)
        // Its memory is no longer counted against --max-room-total-bytes.
        #expect(s.hub.roomBudget.total == 0 && s.hub.totalItems == 0)

        let reader = s.harness.connect()
        let joined = try #require(snapshotOf(s.harness.join(reader, "r")))
        #expect(joined.epoch == epoch && joined.version == 3 && joined.digest == digest && joined.snapshot == snapshot)
        #expect(s.hub.stats.roomsWoken == 1 && s.hub.sleepingRoomCount == 0 && s.hub.rooms.count == 1)
        #expect(!s.store.isAsleep("r") && s.hub.totalItems == 3 && s.hub.roomBudget.total > 0)
        s.harness.checkInvariants("r")
    }

    @Test func catchupWorksAcrossASleepWithTheOriginalDiffs() throws {
        let s = try SleepyHub()
        defer { s.remove() }
        let watcher = s.harness.connect()
        s.harness.join(watcher, "r")
        _ = writeThree(s)
        let diffs = s.harness.drain(watcher)
        #expect(diffs.compactMap(\.diffVersion) == [1, 2, 3])
        let epoch = try #require(s.hub.rooms["r"]).epoch
        s.harness.send(.leave(requestID: 2, room: "r"), from: watcher)
        _ = s.harness.drain(watcher)
        s.sweep()
        #expect(s.hub.sleepingRoomCount == 1)

        let answer = s.harness.join(watcher, "r", resume: RoomPosition(epoch: epoch, version: 1), requestID: 5)
        guard case .catchup(5, "r", epoch, 1, 3, _) = answer.first else {
            Issue.record("no CATCHUP from 1 to 3 after a sleep: \(answer)")
            return
        }
        #expect(Array(answer.dropFirst()) == Array(diffs.dropFirst()))
        #expect(s.hub.stats.roomsWoken == 1)
    }

    /// The room's resume base sleeps in its checkpoint and outlasts a restart: a version 3
    /// replica that left before the room slept resumes with one folded DIFF after the wake, and
    /// again after a clean restart of the store and the hub.
    @Test func aResumeFromBeforeASleepOrARestartIsFolded() throws {
        var s = try SleepyHub(foldsSmall: true)
        defer { s.remove() }
        let writer = s.harness.connect(), reader = s.harness.connect()
        s.harness.mutate(writer, "r", addItem("a", first: true))
        s.harness.mutate(writer, "r", [.appendItems(["b", "c", "d"].map { hubElement($0) }, toSection: "s")])
        guard case .snapshot(_, _, let epoch, let version, _, _, let held, let chain?)? = s.harness.join(reader, "r").first else {
            Issue.record("no SNAPSHOT")
            return
        }
        s.harness.send(.leave(requestID: 2, room: "r"), from: reader)
        for index in 0..<12 {
            s.harness.mutate(writer, "r", [.updateItems([hubElement(["a", "b", "c"][index % 3], "payload \(index)")], .reload)])
        }
        s.harness.mutate(writer, "r", [.moveItem("d", .before("a"))])
        s.harness.send(.leave(requestID: 3, room: "r"), from: writer)
        _ = s.harness.drain(writer)
        _ = s.harness.drain(reader)

        func expectFolded(_ label: String, requestID: UInt64) throws {
            let answer = s.harness.join(reader, "r", resume: RoomPosition(epoch: epoch, version: version), chain: chain, requestID: requestID)
            let room = try #require(s.hub.rooms["r"])
            guard answer.count == 2, case .catchup(requestID, "r", epoch, version, room.version, .folded(let digest)?) = answer[0],
                case .diff("r", epoch, room.version, let ops, _) = answer[1]
            else {
                Issue.record("\(label): expected a folded CATCHUP from \(version), got \(answer.count) messages: \(answer.first.map { "\($0)" } ?? "")")
                return
            }
            var state = held
            try state.apply(ops, limits: room.limits.model)
            #expect(state == room.snapshot && digest == room.snapshot.digest, "\(label)")
            #expect(ops.count <= 4, "\(label): the net change (three payloads, a move): \(ops)")
            s.harness.send(.leave(requestID: requestID + 1, room: "r"), from: reader)
            _ = s.harness.drain(reader)
            s.harness.checkInvariants("r")
        }

        s.sweep()
        #expect(s.hub.sleepingRoomCount == 1 && s.store.isAsleep("r"))
        try expectFolded("after a sleep", requestID: 10)
        #expect(s.hub.stats.roomsWoken == 1 && s.hub.stats.foldedCatchups == 1)

        try s.restart()
        try expectFolded("after a restart", requestID: 20)
        #expect(s.hub.stats.foldedCatchups == 1)
    }

    @Test func aRetriedWriteIDIsStillDeduplicatedAfterASleep() throws {
        let s = try SleepyHub()
        defer { s.remove() }
        let (writer, ids) = writeThree(s)
        s.sweep()
        #expect(s.hub.sleepingRoomCount == 1)
        // The retry of the second write, after the room slept: its original ACK, nothing applied.
        s.harness.mutate(writer, "r", addItem("i1"), requestID: 30, writeID: ids[1])
        let answer = s.harness.drain(writer)
        #expect(answer.count == 1 && answer.first?.ackVersion == 2 && answer.first?.requestID == 30)
        #expect(s.hub.rooms["r"]?.version == 3 && s.hub.stats.roomsWoken == 1 && s.hub.stats.writesApplied == 3)
    }

    @Test func roomsWithMembersOrRecentWritesStayAwake() throws {
        let s = try SleepyHub()
        defer { s.remove() }
        let member = s.harness.connect(), writer = s.harness.connect()
        s.harness.join(member, "joined")
        s.harness.mutate(writer, "joined", addItem("a", first: true))
        s.harness.mutate(writer, "written", addItem("a", first: true))
        _ = s.harness.drain(writer)
        s.sweep()
        // "written" had no member and was idle since its write: it sleeps; "joined" has a member.
        #expect(s.hub.rooms.keys.map(\.string) == ["joined"] && s.store.isAsleep("written"))
        // A write to a memberless room restarts its idle time: the sweep at +0.5 s leaves it.
        s.harness.mutate(writer, "written", addItem("b"))
        #expect(s.harness.drain(writer).first?.ackVersion == 2)
        s.sweep(after: .milliseconds(500))
        #expect(s.hub.rooms.count == 2 && s.hub.sleepingRoomCount == 0)
    }

    /// An eviction batch's time budget (`Hub.sleepBatchDuration`, spent on the store's clock):
    /// once it is spent, the sweep writes no further room to sleep, after at least one; the
    /// rooms left sleep at the next sweeps, longest idle first. The store's clock is the test's,
    /// and a second passes on it at every reading, so the budget is spent by the first file.
    @Test func anEvictionBatchStopsOnceItsTimeIsSpent() throws {
        let s = try SleepyHub()
        defer { s.remove() }
        for room in ["a", "b", "c"] { _ = writeThree(s, room: room) }
        s.hub.sleepBatchDuration = SleepBatch.maxDuration
        var now = ContinuousClock.now
        s.store.batchClock = {
            now += .seconds(1)
            return now
        }
        s.sweep()
        #expect(s.hub.sleepingRoomCount == 1 && s.store.isAsleep("a"), "the longest idle, and no other")
        s.sweep()
        #expect(s.hub.sleepingRoomCount == 2 && s.store.isAsleep("b"))
        s.sweep()
        #expect(s.hub.sleepingRoomCount == 3 && s.hub.rooms.isEmpty && s.hub.stats.roomsEvicted == 3)
    }

    @Test func aRoomNeverWrittenIsDroppedNotPersisted() throws {
        let s = try SleepyHub()
        defer { s.remove() }
        let client = s.harness.connect()
        let first = try #require(snapshotOf(s.harness.join(client, "empty")))
        s.harness.send(.leave(requestID: 2, room: "empty"), from: client)
        _ = s.harness.drain(client)
        s.sweep()
        #expect(s.hub.rooms.isEmpty && s.hub.sleepingRoomCount == 0 && s.hub.stats.roomsEvicted == 1)
        let again = try #require(snapshotOf(s.harness.join(client, "empty")))
        #expect(again.version == 0 && again.epoch != first.epoch && s.hub.stats.roomsWoken == 0)
    }

    @Test func aFullDaemonEvictsTheLongestIdleRoomAndRefusesOnlyWhenNoneCanGo() throws {
        let s = try SleepyHub(idle: .seconds(600), maxRooms: 2)
        defer { s.remove() }
        let writer = s.harness.connect()
        s.harness.mutate(writer, "a", addItem("x", first: true))
        s.harness.mutate(writer, "b", addItem("x", first: true))
        s.harness.mutate(writer, "c", addItem("x", first: true))  // evicts "a", idle the longest
        #expect(s.harness.drain(writer).compactMap(\.ackVersion) == [1, 1, 1])
        #expect(Set(s.hub.rooms.keys.map(\.string)) == ["b", "c"] && s.store.isAsleep("a"))
        #expect(s.hub.stats.roomsEvicted == 1)
        // A write to "b" makes "c" the longest idle; waking "a" evicts it.
        s.harness.mutate(writer, "b", addItem("y"))
        let member = s.harness.connect()
        let woken = try #require(snapshotOf(s.harness.join(member, "a")))
        #expect(woken.version == 1 && woken.snapshot.numberOfItems == 1)
        #expect(Set(s.hub.rooms.keys.map(\.string)) == ["a", "b"] && s.store.isAsleep("c"))
        // Both resident rooms have a member: nothing can be evicted, so a new room is refused.
        s.harness.join(member, "b")
        let refused = s.harness.join(member, "d")
        #expect(refused.first?.errorCode == .tooManyRooms)
        #expect(s.hub.rooms.count == 2 && s.hub.sleepingRoomCount == 1)
    }

    @Test func theMemoryStoreNeverEvicts() {
        let harness = HubHarness {
            $0.roomIdle = .seconds(1); $0.maxRooms = 1
        }
        let writer = harness.connect()
        harness.mutate(writer, "a", addItem("x", first: true))
        harness.hub.sleepIdleRooms(now: harness.later(.seconds(5)))
        #expect(harness.hub.rooms.count == 1 && harness.hub.stats.roomsEvicted == 0)
        harness.mutate(writer, "b", addItem("x", first: true))
        #expect(harness.drain(writer).last?.errorCode == .tooManyRooms)
    }

    @Test func aRestartLeavesCheckpointedRoomsAsleepAndLoadsRoomsWithALogTail() throws {
        var s = try SleepyHub()
        defer { s.remove() }
        _ = writeThree(s, room: "slept")
        let slept = try #require(s.hub.rooms["slept"])
        let (epoch, digest) = (slept.epoch, slept.digest)
        s.sweep()
        // Written after the last checkpoint: its write is in the log only (the log tail is
        // under the 1 MiB that makes a clean shutdown checkpoint).
        let writer = s.harness.connect()
        s.harness.mutate(writer, "fresh", addItem("a", first: true))
        _ = s.harness.drain(writer)
        try s.restart()

        #expect(s.hub.rooms.keys.map(\.string) == ["fresh"] && s.hub.sleepingRoomCount == 1 && s.store.isAsleep("slept"))
        let reader = s.harness.connect()
        let woken = try #require(snapshotOf(s.harness.join(reader, "slept")))
        #expect(woken.epoch == epoch && woken.version == 3 && woken.digest == digest)
        #expect(s.hub.rooms["fresh"]?.version == 1)
    }

    @Test func aRoomWrittenAfterWakingComesBackFromItsCheckpointAndLogAfterACrash() throws {
        var s = try SleepyHub()
        defer { s.remove() }
        let (writer, _) = writeThree(s)
        s.sweep()
        s.harness.mutate(writer, "r", addItem("after"), requestID: 40, writeID: [9])
        #expect(s.harness.drain(writer).first?.ackVersion == 4)
        try s.store.sync()
        let digest = try #require(s.hub.rooms["r"]).digest
        // A crash: the hub and store dropped without close (the log holds version 4, the
        // checkpoint version 3).
        s.harness = HubHarness()
        s.harness = try SleepyHub.open(s.directory, idle: .seconds(1), maxRooms: 100)
        let room = try #require(s.hub.rooms["r"])
        #expect(room.version == 4 && room.digest == digest && s.hub.sleepingRoomCount == 0)
        // And its write id survived too.
        let again = s.harness.connect()
        s.harness.mutate(again, "r", addItem("after"), requestID: 41, writeID: [9])
        #expect(s.harness.drain(again).first?.ackVersion == 4)
    }

    // Rooms that end (LocalRoomEngine+Lifecycle.swift) while asleep.

    /// A DROP of a sleeping room ends it in the store alone: its tombstone is logged, the ACK
    /// carries its position, and neither a restart nor a crash brings it back.
    @Test func aSleepingRoomCanBeDroppedAndStaysDropped() throws {
        var s = try SleepyHub()
        defer { s.remove() }
        _ = writeThree(s)
        let epoch = try #require(s.hub.rooms["r"]).epoch
        s.sweep()
        #expect(s.store.isAsleep("r") && s.hub.sleepingRoomCount == 1)
        let admin = s.harness.connect()
        s.harness.send(.drop(requestID: 7, room: "r"), from: admin)
        let answer = s.harness.drain(admin)
        #expect(answer.count == 1 && answer.first?.ackVersion == 3, "\(answer)")
        if case .ack(_, let acked, _)? = answer.first { #expect(acked == epoch) }
        #expect(!s.store.isAsleep("r") && s.hub.sleepingRoomCount == 0 && s.hub.stats.roomsDeleted == 1)
        #expect(s.store.position(of: "r") == nil && !s.store.roomNames.contains("r"))
        try s.store.sync()
        // A crash before any checkpoint or MANIFEST: the tombstone voids the sleeping checkpoint.
        s.harness = HubHarness()
        s.harness = try SleepyHub.open(s.directory, idle: .seconds(1), maxRooms: 100)
        #expect(s.hub.rooms["r"] == nil && s.hub.sleepingRoomCount == 0 && !s.store.isAsleep("r"))
        let reader = s.harness.connect()
        let fresh = try #require(snapshotOf(s.harness.join(reader, "r")))
        #expect(fresh.version == 0 && fresh.epoch != epoch)
        // And after a clean restart, the name is the new room's.
        s.harness.send(.leave(requestID: 2, room: "r"), from: reader)
        try s.restart()
        #expect(s.store.position(of: "r") == nil || s.store.position(of: "r")?.epoch == fresh.epoch)
    }

    /// A room's TTL (SET_TTL) goes to sleep with it, survives a restart while it sleeps, and
    /// comes back with it when it wakes.
    @Test func aSleepingRoomKeepsItsTTLThroughARestartAndAWake() throws {
        var s = try SleepyHub()
        defer { s.remove() }
        let (writer, _) = writeThree(s)
        s.harness.send(.setTTL(requestID: 30, room: "r", seconds: 3600), from: writer)
        #expect(s.harness.drain(writer).first?.ackVersion == 3)
        s.sweep()
        #expect(s.store.isAsleep("r") && s.store.explicitTTL(of: "r") == 3600)
        try s.restart()
        #expect(s.store.isAsleep("r") && s.store.explicitTTL(of: "r") == 3600)
        let reader = s.harness.connect()
        _ = s.harness.join(reader, "r")
        #expect(s.hub.rooms["r"]?.ttlSeconds == 3600 && s.store.explicitTTL(of: "r") == 3600)
        // A checkpoint of the woken room keeps it too.
        s.harness.send(.leave(requestID: 2, room: "r"), from: reader)
        s.sweep()
        try s.restart()
        #expect(s.store.explicitTTL(of: "r") == 3600)
    }

    /// A sleeping room expires like a resident one: its TTL counts from its last member or
    /// write, asleep or not, and after a restart from the start. A room woken meanwhile is not
    /// expired by its old deadline.
    @Test func aSleepingRoomExpiresAtItsTTLAndNotBefore() throws {
        var s = try SleepyHub(ttl: .seconds(60))
        defer { s.remove() }
        _ = writeThree(s, room: "a")
        _ = writeThree(s, room: "b")
        // Both idle for 40 s already: they expire 20 s from now.
        for room in s.hub.rooms.values { room.idleSince = s.harness.clock.now - .seconds(40) }
        s.sweep()
        #expect(s.hub.sleepingRoomCount == 2)
        s.hub.expireRooms(now: s.harness.later(.seconds(10)))
        #expect(s.hub.sleepingRoomCount == 2 && s.hub.stats.roomsExpired == 0)
        // "b" wakes (a JOIN) and sleeps again: its idle time starts again, 60 s from now.
        let reader = s.harness.connect()
        _ = s.harness.join(reader, "b")
        s.harness.send(.leave(requestID: 2, room: "b"), from: reader)
        _ = s.harness.drain(reader)
        s.sweep()
        #expect(s.hub.sleepingRoomCount == 2)
        s.hub.expireRooms(now: s.harness.later(.seconds(30)))
        #expect(s.hub.stats.roomsExpired == 1 && !s.store.isAsleep("a") && s.store.isAsleep("b"))
        #expect(s.store.position(of: "a") == nil && s.hub.sleepingRoomCount == 1)
        // After a restart, "b" has a whole TTL again, from the start.
        try s.restart(ttl: .seconds(60))
        #expect(s.store.isAsleep("b") && s.hub.sleepingRoomCount == 1)
        s.hub.expireRooms(now: s.harness.later(.seconds(30)))
        #expect(s.store.isAsleep("b"))
        s.hub.expireRooms(now: s.harness.later(.seconds(61)))
        #expect(!s.store.isAsleep("b") && s.hub.stats.roomsExpired == 1 && s.hub.sleepingRoomCount == 0)
        try s.restart(ttl: .seconds(60))
        #expect(s.store.position(of: "a") == nil && s.store.position(of: "b") == nil)
    }

    /// SET_TTL on a room never written keeps it (PROTOCOL.md §11.20): it sleeps in a checkpoint
    /// at version 0 rather than being forgotten, and wakes with the same epoch and TTL.
    @Test func aRoomWithATTLButNoWriteSleepsAndKeepsItsEpoch() throws {
        var s = try SleepyHub()
        defer { s.remove() }
        let owner = s.harness.connect()
        s.harness.send(.setTTL(requestID: 1, room: "empty", seconds: 120), from: owner)
        _ = s.harness.drain(owner)
        let epoch = try #require(s.hub.rooms["empty"]).epoch
        s.sweep()
        #expect(s.store.isAsleep("empty") && s.hub.rooms["empty"] == nil)
        try s.restart()
        let reader = s.harness.connect()
        let woken = try #require(snapshotOf(s.harness.join(reader, "empty")))
        #expect(woken.epoch == epoch && woken.version == 0 && s.hub.rooms["empty"]?.ttlSeconds == 120)
    }
}
