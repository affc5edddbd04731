import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncHub
import SnapSyncStore

// The write path, in-process: versions, compare-and-set, write ids, and the DIFF reaching every
// member (the writer first in its own output) before the writer's ACK.

@Suite(.unitTests) struct HubWriteTests {
    @Test func theWritersDiffPrecedesItsAckAndEveryMemberGetsIt() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect(), outsider = harness.connect()
        harness.join(writer, "room")
        harness.join(member, "room")
        harness.join(outsider, "other")
        harness.mutate(writer, "room", addItem("a", first: true), requestID: 11)
        let written = harness.drain(writer)
        #expect(written.map(\.diffVersion) == [1, nil])
        #expect(written.last?.ackVersion == 1 && written.last?.requestID == 11)
        #expect(harness.drain(member).map(\.diffVersion) == [1])
        #expect(harness.drain(outsider).isEmpty)
        harness.checkInvariants("room")
    }

    @Test func writesGetConsecutiveVersionsAndAWriterThatHasNotJoinedOnlyAnAck() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect()
        harness.join(member, "room")
        for (index, id) in ["a", "b", "c"].enumerated() {
            harness.mutate(writer, "room", addItem(id, first: index == 0), requestID: UInt64(index))
        }
        #expect(harness.drain(writer).map(\.ackVersion) == [1, 2, 3])
        #expect(harness.drain(member).map(\.diffVersion) == [1, 2, 3])
        #expect(harness.hub.rooms["room"]?.snapshot.numberOfItems == 3 && harness.hub.totalItems == 3)
        harness.checkInvariants("room")
    }

    @Test func aWrongExpectedVersionIsRejectedAndChangesNothing() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect()
        harness.join(member, "room")
        harness.mutate(writer, "room", addItem("a", first: true), expectedVersion: 0)
        harness.mutate(writer, "room", addItem("b"), requestID: 8, expectedVersion: 0)
        let answers = harness.drain(writer)
        #expect(answers.map(\.ackVersion) == [1, nil])
        #expect(answers.last?.errorCode == .versionMismatch && answers.last?.requestID == 8)
        #expect(harness.drain(member).map(\.diffVersion) == [1])
        #expect(harness.hub.rooms["room"]?.version == 1 && harness.hub.stats.writesRejected == 1)
        harness.checkInvariants("room")
    }

    @Test func aRetriedWriteIDIsAcknowledgedAtItsVersionWithoutASecondDiff() {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect()
        harness.join(member, "room")
        let id: [UInt8] = [1, 2, 3]
        harness.mutate(writer, "room", addItem("a", first: true), writeID: id)
        harness.mutate(writer, "room", addItem("b"))
        harness.mutate(writer, "room", addItem("a", first: true), writeID: id)
        harness.mutate(writer, "room", addItem("c"), writeID: id)
        let answers = harness.drain(writer)
        #expect(answers.prefix(3).map(\.ackVersion) == [1, 2, 1])
        #expect(answers.last?.errorCode == .writeIDConflict)
        #expect(harness.drain(member).map(\.diffVersion) == [1, 2])
        #expect(harness.hub.rooms["room"]?.version == 2)
        harness.checkInvariants("room")
    }

    @Test func aReplaceSendsTheDiffToItsTarget() throws {
        let harness = HubHarness()
        let writer = harness.connect(), member = harness.connect()
        harness.mutate(writer, "room", addItem("a", first: true))
        harness.join(member, "room")
        var target = RoomSnapshot()
        try target.apply([.appendSections([hubElement("t")]), .appendItems([hubElement("z", "zz")], toSection: "t")], limits: .default)
        harness.send(.replace(requestID: 9, room: "room", expectedVersion: 1, writeID: [], snapshot: target), from: writer)
        #expect(harness.drain(writer).map(\.ackVersion) == [1, 2])
        let diffs = harness.drain(member)
        guard diffs.count == 1, case .diff("room", _, 2, let ops, _) = diffs[0] else {
            Issue.record("expected one DIFF at version 2, got \(diffs)")
            return
        }
        var replica = RoomSnapshot()
        try replica.apply(addItem("a", first: true), limits: .default)
        try replica.apply(ops, limits: .default)
        #expect(replica == target && harness.hub.rooms["room"]?.snapshot == target)
        harness.checkInvariants("room")
    }

    @Test func aStoreThatRefusesFailsTheWriteBeforeTheRoomChanges() {
        let harness = HubHarness(store: RefusingStore())
        let writer = harness.connect()
        harness.join(writer, "room")
        harness.mutate(writer, "room", addItem("a", first: true))
        #expect(harness.drain(writer).map(\.errorCode) == [.storageFailure])
        #expect(harness.hub.rooms["room"]?.version == 0)
    }

    /// Only a full disk refuses a write; any other failure to prepare one stops the daemon, as a
    /// failed commit does, and nothing is answered.
    @Test func aStoreThatFailsOtherwiseStopsTheDaemon() {
        let harness = HubHarness(store: RefusingStore(.io(operation: "fsync of the MANIFEST", path: "test", errno: 5)))
        var failures: [String] = []
        harness.hub.storeFailed = { failures.append($0.message) }
        let writer = harness.connect()
        harness.join(writer, "room")
        _ = harness.drain(writer)
        harness.mutate(writer, "room", addItem("a", first: true))
        #expect(failures.count == 1 && failures[0].contains("room room"))
        #expect(harness.drain(writer).isEmpty)
        #expect(harness.hub.rooms["room"]?.version == 0)
    }

    @Test func aPassMarksEachSessionDirtyOnceAndAsksForOneFlush() {
        let harness = HubHarness()
        var flushesAsked = 0
        harness.hub.outputPending = { flushesAsked += 1 }
        let writer = harness.connect(), member = harness.connect()
        harness.join(writer, "room")
        harness.join(member, "room")
        harness.hub.dirty.forEach { $0.isDirty = false }
        harness.hub.dirty.removeAll()
        flushesAsked = 0
        for (index, id) in ["a", "b", "c"].enumerated() { harness.mutate(writer, "room", addItem(id, first: index == 0)) }
        #expect(harness.hub.dirty.map(\.id) == [writer.id, member.id])
        #expect(flushesAsked == 1)
    }
}

/// A store that refuses every write with `error`: by default as a full disk does.
private final class RefusingStore: RoomStore {
    let error: StoreError
    init(_ error: StoreError = .noSpace(path: "test", errno: 28)) { self.error = error }
    func prepare(room: String) throws(StoreError) { throw error }
    func append(room: String, epoch: UInt64, version: UInt64, writeID: [UInt8], fingerprint: UInt64?, diffFrame: UnsafeRawBufferPointer) {}
    func commit() throws(StoreError) {}
    func maintain() throws(StoreError) -> [String] { [] }
    func checkpoint(_ images: some Sequence<RoomImage>) throws(StoreError) {}
}
