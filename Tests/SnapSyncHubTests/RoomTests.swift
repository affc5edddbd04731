import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
import SnapSyncStore
@testable import SnapSyncHub

// Rooms without sockets: writes, rejections, compare-and-set, write-id deduplication, history
// and the resume decision.

private func makeRoom(
    _ name: String = "room", limits: WireLimits = WireLimits(), maxHistoryBytes: Int = Room.defaultHistoryBytes,
    version: UInt64 = 0, epoch: UInt64 = 77
) -> Room {
    Room(name: name, epoch: epoch, version: version, snapshot: RoomSnapshot(), limits: limits, maxHistoryBytes: maxHistoryBytes)
}

private func element(_ id: String, _ payload: String = "") -> SnapshotElement {
    SnapshotElement(SnapshotIdentifier(id), payload: SnapshotPayload(payload))
}

/// Applies ops that must succeed and returns the DIFF frame.
@discardableResult
private func mustApply(
    _ room: Room, _ ops: [SnapshotOperation], writeID: [UInt8] = [], expected: UInt64? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
) -> OutputChunk? {
    var scratch: [UInt8] = []
    guard case .applied(_, let diff) = room.mutate(ops, expectedVersion: expected, writeID: writeID, scratch: &scratch) else {
        Issue.record("write was not applied", sourceLocation: sourceLocation)
        return nil
    }
    #expect(throws: Never.self, sourceLocation: sourceLocation) { try room.checkInvariants() }
    return diff
}

private func decode(_ chunk: OutputChunk) throws -> Message {
    try FrameDecoder.decode(frame: chunk.array, accepting: .server)
}

@Suite(.unitTests) struct RoomTests {
    @Test func appliedWriteBumpsTheVersionAndEncodesItsDiffOnce() throws {
        let room = makeRoom()
        let ops: [SnapshotOperation] = [.appendSections([element("s")]), .appendItems([element("a", "x")], toSection: "s")]
        var scratch: [UInt8] = []
        guard case .applied(let version, let diff) = room.mutate(ops, expectedVersion: nil, writeID: [], scratch: &scratch) else {
            Issue.record("not applied")
            return
        }
        #expect(version == 1)
        #expect(room.version == 1)
        #expect(diff.isFrozen)
        let message = try decode(diff)
        guard case .diff(let name, let epoch, let diffVersion, let diffOps, _) = message else {
            Issue.record("not a DIFF: \(message)")
            return
        }
        #expect(name == "room" && epoch == 77 && diffVersion == 1 && diffOps == ops)
        #expect(room.snapshot.itemIdentifiers == ["a"])
        #expect(room.historyCount == 1 && room.historyBytes == diff.count)
    }

    @Test func rejectedBatchLeavesTheRoomUnchangedAndSaysWhere() {
        let room = makeRoom()
        mustApply(room, [.appendSections([element("s")]), .appendItems([element("a")], toSection: "s")])
        let before = room.snapshot
        let digest = room.digest
        var scratch: [UInt8] = []
        let outcome = room.mutate(
            [.appendItems([element("b")], toSection: "s"), .deleteItems(["missing"])],
            expectedVersion: nil, writeID: [1, 2], scratch: &scratch)
        guard case .rejected(let rejection) = outcome else {
            Issue.record("expected a rejection, got \(outcome)")
            return
        }
        #expect(rejection.code == .itemNotFound)
        #expect(rejection.opIndex == 1)
        #expect(rejection.identifier == "missing")
        #expect(rejection.message.contains("missing"))
        #expect(room.snapshot == before)
        #expect(room.digest == digest)
        #expect(room.version == 1)
        #expect(room.historyCount == 1)
        // A rejected write's id is not remembered: retrying it is a fresh attempt.
        #expect(throws: Never.self) { try room.checkInvariants() }
        guard case .rejected = room.mutate([.deleteItems(["missing"])], expectedVersion: nil, writeID: [1, 2], scratch: &scratch) else {
            Issue.record("a rejected write id was remembered")
            return
        }
    }

    @Test func limitsComeFromTheRoomLimits() {
        var limits = WireLimits()
        limits.model.maxItems = 2
        let room = makeRoom(limits: limits)
        mustApply(room, [.appendSections([element("s")]), .appendItems([element("a"), element("b")], toSection: "s")])
        var scratch: [UInt8] = []
        guard
            case .rejected(let rejection) = room.mutate(
                [.appendItems([element("c")], toSection: "s")],
                expectedVersion: nil, writeID: [], scratch: &scratch)
        else {
            Issue.record("a third item was accepted")
            return
        }
        #expect(rejection.code == .tooManyItems && rejection.opIndex == 0)
        #expect(room.snapshot.numberOfItems == 2)
    }

    @Test func compareAndSetRejectsAStaleVersionNamingTheCurrentOne() {
        let room = makeRoom()
        mustApply(room, [.appendSections([element("s")])], expected: 0)
        var scratch: [UInt8] = []
        guard
            case .rejected(let rejection) = room.mutate(
                [.appendSections([element("t")])], expectedVersion: 0,
                writeID: [], scratch: &scratch)
        else {
            Issue.record("a stale expected version was accepted")
            return
        }
        #expect(rejection.code == .versionMismatch)
        #expect(rejection.opIndex == nil)
        #expect(rejection.message.contains("version 1"))
        #expect(room.version == 1 && room.snapshot.numberOfSections == 1)
        mustApply(room, [.appendSections([element("t")])], expected: 1)
        #expect(room.version == 2)
    }

    @Test func repeatedWriteIDGetsTheOriginalVersionAndAppliesNothing() {
        let room = makeRoom()
        let id: [UInt8] = Array("write-1".utf8)
        mustApply(room, [.appendSections([element("s")])], writeID: id, expected: 0)
        mustApply(room, [.appendSections([element("t")])], writeID: Array("write-2".utf8))
        var scratch: [UInt8] = []
        // The retry would fail if applied (duplicate section) and its expected version is stale
        // by now; neither matters: it is answered with version 1.
        let outcome = room.mutate([.appendSections([element("s")])], expectedVersion: 0, writeID: id, scratch: &scratch)
        guard case .duplicate(let version) = outcome else {
            Issue.record("expected a duplicate, got \(outcome)")
            return
        }
        #expect(version == 1)
        #expect(room.version == 2)
        #expect(room.snapshot.sectionIdentifiers == ["s", "t"])
    }

    @Test func writeIDsAreForgottenWithTheirHistory() {
        var limits = WireLimits()
        limits.historyCount = 2
        let room = makeRoom(limits: limits)
        mustApply(room, [.appendSections([element("a")])], writeID: [1])
        mustApply(room, [.appendSections([element("b")])], writeID: [2])
        mustApply(room, [.appendSections([element("c")])], writeID: [3])
        mustApply(room, [.appendSections([element("d")])], writeID: [4])
        // History keeps versions 3 and 4 (base 2): ids of versions 2...4 are remembered.
        #expect(room.historyBaseVersion == 2)
        var scratch: [UInt8] = []
        guard case .duplicate(3) = room.mutate([.appendSections([element("c")])], expectedVersion: nil, writeID: [3], scratch: &scratch) else {
            Issue.record("write id 3 was forgotten too early")
            return
        }
        guard case .applied = room.mutate([.appendSections([element("a2")])], expectedVersion: nil, writeID: [1], scratch: &scratch) else {
            Issue.record("write id 1 is still remembered after leaving history")
            return
        }
    }

    @Test func emptyBatchIsAcknowledgedAtTheCurrentVersionWithoutANewOne() {
        let room = makeRoom()
        mustApply(room, [.appendSections([element("s")])])
        var scratch: [UInt8] = []
        guard case .unchanged(let version) = room.mutate([], expectedVersion: nil, writeID: [9], scratch: &scratch) else {
            Issue.record("an empty batch changed something")
            return
        }
        #expect(version == 1 && room.version == 1 && room.historyCount == 1)
        // Its write id is remembered too: its retry is a duplicate...
        guard case .duplicate(1) = room.mutate([], expectedVersion: nil, writeID: [9], scratch: &scratch) else {
            Issue.record("the write id of an empty batch was not remembered")
            return
        }
        // ...and another batch reusing it is refused, not acknowledged and dropped.
        guard case .rejected(let conflict) = room.mutate([.appendSections([element("t")])], expectedVersion: nil, writeID: [9], scratch: &scratch) else {
            Issue.record("a different batch reusing an empty batch's write id was not refused")
            return
        }
        #expect(conflict.code == .writeIDConflict && conflict.opIndex == nil && conflict.identifier == nil)
        #expect(conflict.message.contains("0x09") && conflict.message.contains("version 1"))
        #expect(room.version == 1 && room.snapshot.sectionIdentifiers == ["s"])
        // An empty batch still checks the expected version.
        guard case .rejected(let rejection) = room.mutate([], expectedVersion: 5, writeID: [], scratch: &scratch) else {
            Issue.record("an empty batch skipped compare-and-set")
            return
        }
        #expect(rejection.code == .versionMismatch)
    }

    @Test func replaceSendsTheServerSideDiffAndReachesTheTarget() throws {
        let room = makeRoom()
        mustApply(
            room,
            [
                .appendSections([element("s"), element("t")]),
                .appendItems([element("a"), element("b")], toSection: "s"),
            ])
        let before = room.snapshot
        let target = try RoomSnapshot([(element("t", "new"), [element("b"), element("c")]), (element("u"), [])])
        var scratch: [UInt8] = []
        guard case .applied(let version, let diff) = room.replace(with: target, expectedVersion: 1, writeID: [], scratch: &scratch) else {
            Issue.record("replace was not applied")
            return
        }
        #expect(version == 2)
        #expect(room.snapshot == target)
        guard case .diff(_, _, 2, let ops, _) = try decode(diff) else {
            Issue.record("not a DIFF at version 2")
            return
        }
        var replica = before
        try replica.apply(ops, limits: .unlimited)
        #expect(replica == target)
        // Replacing with the same content changes nothing.
        guard case .unchanged(2) = room.replace(with: target, expectedVersion: nil, writeID: [], scratch: &scratch) else {
            Issue.record("an identical replace made a version")
            return
        }
        #expect(room.version == 2)
    }

    /// A REPLACE with a write id hashes its target once: that digest becomes the room's, and it
    /// must be the digest of the room at the new version, not of the one before.
    @Test func aReplaceWithAWriteIDLeavesTheRoomsDigestRight() throws {
        let room = makeRoom()
        mustApply(room, [.appendSections([element("s")]), .appendItems([element("a")], toSection: "s")])
        #expect(room.digest == room.snapshot.digest)
        let target = try RoomSnapshot([(element("s"), [element("b", "x"), element("a")])])
        var scratch: [UInt8] = []
        guard case .applied(2, _) = room.replace(with: target, expectedVersion: nil, writeID: [1, 2], scratch: &scratch) else {
            Issue.record("replace was not applied at version 2")
            return
        }
        #expect(room.digest == target.digest)
        mustApply(room, [.deleteItems(["a"])])
        #expect(room.digest == room.snapshot.digest)
        #expect(room.digest != target.digest)
    }

    @Test func aDiffTooLargeForTheFrameLimitIsRefusedBeforeTheRoomChanges() {
        var limits = WireLimits()
        limits.maxFrameBytes = 1024
        let room = makeRoom(limits: limits)
        var scratch: [UInt8] = []
        let big = element("s", String(repeating: "x", count: 2000))
        guard case .rejected(let rejection) = room.mutate([.appendSections([big])], expectedVersion: nil, writeID: [], scratch: &scratch) else {
            Issue.record("an oversized DIFF was accepted")
            return
        }
        #expect(rejection.code == .snapshotTooLarge)
        #expect(room.version == 0 && room.snapshot.isEmpty)
    }

    @Test func roomNamesAreCheckedForLength() {
        #expect(Room.validate(name: "")?.code == .invalidRoomName)
        #expect(Room.validate(name: String(repeating: "r", count: 129))?.code == .invalidRoomName)
        #expect(Room.validate(name: String(repeating: "r", count: 128)) == nil)
        #expect(Room.validate(name: "é") == nil)
    }

    @Test func newRoomsStartEmptyAtVersionZeroWithANonzeroEpoch() {
        let a = Room(name: "a", limits: WireLimits()), b = Room(name: "b", limits: WireLimits())
        #expect(a.epoch != 0 && b.epoch != 0 && a.epoch != b.epoch)
        #expect(a.version == 0 && a.snapshot.isEmpty)
    }

    @Test func digestIsTheSnapshotsAndFollowsEveryVersion() {
        let room = makeRoom()
        #expect(room.digest == RoomSnapshot().digest)
        mustApply(room, [.appendSections([element("s")])])
        #expect(room.digest == room.snapshot.digest)
        #expect(room.digest != RoomSnapshot().digest)
    }
}

@Suite(.unitTests) struct ResumeDecisionTests {
    /// A room at version 5 keeping the last 3 DIFFs (base version 2).
    private func roomAtFive() -> (Room, [OutputChunk]) {
        var limits = WireLimits()
        limits.historyCount = 3
        let room = makeRoom(limits: limits)
        var frames: [OutputChunk] = []
        for i in 1...5 { frames.append(mustApply(room, [.appendSections([element("s\(i)")])])!) }
        return (room, frames)
    }

    @Test func freshJoinGetsTheInitialSnapshot() {
        let (room, _) = roomAtFive()
        guard case .snapshot(.initial) = room.answerJoin(resume: nil) else {
            Issue.record("fresh JOIN not answered with SNAPSHOT initial")
            return
        }
    }

    @Test func positionInsideHistoryGetsCatchupWithExactlyTheMissingDiffs() {
        let (room, frames) = roomAtFive()
        for from in UInt64(2)...5 {
            guard case .catchup(let start, let end, let sent) = room.answerJoin(resume: .init(epoch: 77, version: from)) else {
                Issue.record("position \(from) is inside history")
                continue
            }
            #expect(start == from && end == 5)
            #expect(
                sent.map(ObjectIdentifier.init) == frames[Int(from)...].map(ObjectIdentifier.init),
                "CATCHUP must send the very frames of versions \(from + 1)...5")
        }
    }

    @Test func positionOutsideHistoryOrAnotherEpochGetsResync() {
        let (room, _) = roomAtFive()
        for position in [
            ResumePoint(epoch: 77, version: 1), .init(epoch: 77, version: 0),
            .init(epoch: 78, version: 5), .init(epoch: 77, version: 6),
        ] {
            guard case .snapshot(.resync) = room.answerJoin(resume: position) else {
                Issue.record("\(position) should get SNAPSHOT resync")
                continue
            }
        }
    }

    @Test func historyIsBoundedByBytesToo() {
        let room = makeRoom(maxHistoryBytes: 100)
        for i in 1...4 { mustApply(room, [.appendSections([element("s\(i)", String(repeating: "p", count: 40))])]) }
        #expect(room.historyBytes <= 100)
        #expect(room.historyCount >= 1)
        #expect(room.historyBaseVersion == 4 - UInt64(room.historyCount))
        // A frame larger than the byte bound is not kept at all.
        mustApply(room, [.appendSections([element("big", String(repeating: "p", count: 200))])])
        #expect(room.historyCount == 0 && room.historyBaseVersion == 5)
        guard case .catchup(5, 5, let none) = room.answerJoin(resume: .init(epoch: 77, version: 5)), none.isEmpty else {
            Issue.record("a current client must get an empty CATCHUP")
            return
        }
    }

    /// The bounds are on memory: an evicted frame must be released when it is evicted, not when
    /// the history next compacts its array (which once kept up to 64 evicted DIFFs alive).
    @Test func evictedFramesAreReleasedAtOnce() {
        var history = RoomHistory(maxCount: 2, maxBytes: 1 << 20, version: 0)
        weak var first: OutputChunk?
        weak var second: OutputChunk?
        do {
            let a = [UInt8](repeating: 1, count: 100).withUnsafeBytes { OutputChunk(copying: $0) }
            let b = [UInt8](repeating: 2, count: 100).withUnsafeBytes { OutputChunk(copying: $0) }
            first = a
            second = b
            history.append(a, version: 1, chain: .unknown)
            history.append(b, version: 2, chain: .unknown)
            #expect(history.evictOldest() == nil, "within its bounds")
        }
        #expect(first != nil && second != nil)
        for v in 3...5 {
            history.append(
                [UInt8](repeating: UInt8(v), count: 100).withUnsafeBytes { OutputChunk(copying: $0) }, version: UInt64(v), chain: .start(epoch: UInt64(v)))
            // One over the count: the oldest goes, with its version, and then nothing more.
            #expect(history.evictOldest()?.version == UInt64(v - 2))
            #expect(history.evictOldest() == nil)
        }
        #expect(first == nil, "an evicted frame is still referenced")
        #expect(second == nil, "an evicted frame is still referenced")
        #expect(history.count == 2 && history.baseVersion == 3)
        #expect(history.frames(after: 3)?.map { $0.array } == [[UInt8](repeating: 4, count: 100), [UInt8](repeating: 5, count: 100)])
        // Each frame's chain goes with it.
        #expect(history.chains(after: 3) == [.start(epoch: 4), .start(epoch: 5)])
        // The chain before the oldest frame kept is the evicted frame's; older ones are gone.
        #expect(history.chain(at: 5) == .start(epoch: 5) && history.chain(at: 3) == .start(epoch: 3))
        #expect(history.chain(at: 2) == nil && history.chain(at: 6) == nil)
    }
}

@Suite(.unitTests) struct WriteIDConflictTests {
    /// Any remembered id, not only an empty batch's: the same request again is a retry, a
    /// different one (ops, expected version, or REPLACE content) is a conflict.
    @Test func aWriteIDNamesOneRequest() {
        let room = makeRoom()
        mustApply(room, [.appendSections([element("s")])], writeID: [7])
        var scratch: [UInt8] = []
        guard case .duplicate(1) = room.mutate([.appendSections([element("s")])], expectedVersion: nil, writeID: [7], scratch: &scratch) else {
            Issue.record("the retry was not recognised")
            return
        }
        for outcome in [
            room.mutate([.appendSections([element("x")])], expectedVersion: nil, writeID: [7], scratch: &scratch),
            room.mutate([.appendSections([element("s")])], expectedVersion: 0, writeID: [7], scratch: &scratch),
            room.replace(with: room.snapshot, expectedVersion: nil, writeID: [7], scratch: &scratch),
        ] {
            guard case .rejected(let rejection) = outcome, rejection.code == .writeIDConflict else {
                Issue.record("expected write_id_conflict, got \(outcome)")
                continue
            }
        }
        // A REPLACE that changed nothing: its retry is still a duplicate after another write.
        let target = room.snapshot
        guard case .unchanged(1) = room.replace(with: target, expectedVersion: nil, writeID: [8], scratch: &scratch) else {
            Issue.record("an equal REPLACE changed something")
            return
        }
        mustApply(room, [.appendSections([element("t")])])
        guard case .duplicate(1) = room.replace(with: target, expectedVersion: nil, writeID: [8], scratch: &scratch) else {
            Issue.record("the retried no-op REPLACE was applied again")
            return
        }
        #expect(room.snapshot.sectionIdentifiers == ["s", "t"])
    }

    /// Identifiers are delimited in the fingerprint: deleting "ab" and "c" is another request
    /// than deleting "a" and "bc", though their bytes run together the same.
    @Test func requestsWhoseIdentifierBytesRunTogetherConflict() {
        let room = makeRoom()
        mustApply(
            room,
            [
                .appendSections([element("s")]),
                .appendItems(["ab", "c", "a", "bc"].map { element($0) }, toSection: "s"),
            ])
        mustApply(room, [.deleteItems(["ab", "c"])], writeID: [7])
        var scratch: [UInt8] = []
        guard case .rejected(let rejection) = room.mutate([.deleteItems(["a", "bc"])], expectedVersion: nil, writeID: [7], scratch: &scratch),
            rejection.code == .writeIDConflict
        else {
            Issue.record("another batch reusing write id 7 was taken as its retry")
            return
        }
        #expect(room.snapshot.itemIdentifiers == ["a", "bc"])
    }

    /// IDs restored from the store have no fingerprint: any write reusing one is its retry.
    @Test func restoredIdsMatchAnyWrite() {
        let room = Room(
            name: "r", epoch: 5, version: 1, snapshot: RoomSnapshot(), limits: WireLimits(),
            history: [WriteRecord(room: "r", epoch: 5, version: 1, writeID: [1], diffFrame: [0, 0, 0, 1, 0x22])])
        var scratch: [UInt8] = []
        guard case .duplicate(1) = room.mutate([.appendSections([element("x")])], expectedVersion: nil, writeID: [1], scratch: &scratch) else {
            Issue.record("a restored write id was not taken as a retry")
            return
        }
    }
}

@Suite(.unitTests) struct WriteIDWindowTests {
    @Test func noOpWritesCannotPushOutTheIDOfAWriteStillInHistory() {
        var window = WriteIDWindow(maxCount: 4)
        window.remember([1], version: 1, fingerprint: nil, oldestVersion: 0)
        for n in UInt8(10)..<UInt8(30) { window.remember([n], version: 1, fingerprint: nil, changed: false, oldestVersion: 0) }
        #expect(window.entry(of: [1])?.version == 1, "the applied write's id is still in the window")
        #expect(window.entry(of: [29])?.version == 1 && window.entry(of: [26])?.version == 1)
        #expect(window.entry(of: [25])?.version == nil, "no-op ids are capped at maxCount")
        #expect(window.count == 5)
    }

    @Test func idsLeaveWithTheirVersion() {
        var window = WriteIDWindow(maxCount: 4)
        window.remember([1], version: 1, fingerprint: nil, oldestVersion: 0)
        window.remember([2], version: 1, fingerprint: nil, changed: false, oldestVersion: 0)
        window.remember([3], version: 2, fingerprint: nil, oldestVersion: 0)
        window.forget(before: 2)
        #expect(window.entry(of: [1])?.version == nil && window.entry(of: [2])?.version == nil)
        #expect(window.entry(of: [3])?.version == 2)
        // Empty ids are never remembered.
        window.remember([], version: 3, fingerprint: nil, oldestVersion: 2)
        #expect(window.entry(of: [])?.version == nil)
    }
}
