// Rooms that end and rooms' TTLs in the store (docs/persistence.md, "Room ends and
// time-to-live"): a tombstone keeps a dropped room from coming back after a crash, whatever
// checkpoints and log records of it are still on disk; its checkpoint and its share of the log
// go; a TTL survives restarts, in the log and then in the checkpoint.

import Foundation
import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncStore

@Suite(.unitTests) struct StoreDropTests {
    /// What a kill -9 leaves: the directory as it is now, opened by another store.
    func crashCopy(_ dir: TempDirectory, _ label: String) throws -> (DurableStore, [RecoveredRoom], LogLines) {
        let copy = dir.path + "/" + label
        copyDirectory(dir.data, copy)
        let lines = LogLines()
        let (store, recovered) = try DurableStore.open(options: smallOptions(copy), logger: lines.logger)
        return (store, recovered, lines)
    }

    func checkpointFiles(_ directory: String) -> [String] { fileNames(directory).filter { $0.hasPrefix("ckpt-") } }

    /// A room with a checkpoint and log records after it, dropped: a crash right after the
    /// drop's sync does not bring it back, and the start removes its checkpoint.
    @Test func aDroppedRoomStaysDroppedAfterACrash() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        try rooms.write("gone", addItems(["a"], first: true), to: store)
        try rooms.write("kept", addItems(["k"], first: true), to: store)
        try store.sync()
        try store.checkpoint(rooms.image("gone")!)
        try rooms.write("gone", addItems(["b"]), to: store)
        try store.sync()
        let (before, recoveredBefore, _) = try crashCopy(dir, "before")
        #expect(recoveredBefore.map(\.name) == ["gone", "kept"], "without the drop the room is on disk")
        try before.close()

        #expect(store.position(of: "gone")?.epoch == 7 && store.position(of: "gone")?.version == 2)
        #expect(store.roomNames == ["gone", "kept"])
        store.drop(room: "gone", epoch: 7, version: 2)
        try store.sync()
        rooms.rooms["gone"] = nil
        #expect(store.position(of: "gone") == nil && store.roomNames == ["kept"])
        let (after, recovered, lines) = try crashCopy(dir, "after")
        defer { try? after.close() }
        expectSameRooms(recovered, rooms)
        #expect(lines.contains("the checkpoint of room gone, which was dropped"))
        #expect(checkpointFiles(dir.path + "/after").isEmpty)
        #expect(store.statistics.roomsDropped == 1)
    }

    /// The name is used again after the drop, under a new epoch: recovery gives the new room,
    /// also when the new room's checkpoint is loaded while the old room's checkpoint and log
    /// records are still on disk (records of the old epoch come after a checkpoint of the new
    /// one: held in doubt until the tombstone voids them).
    @Test func aNameUsedAgainComesBackAsTheNewRoom() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        for n in 0..<3 { try rooms.write("r", addItems(["old-\(n)"], first: n == 0), epoch: 7, to: store) }
        try store.sync()
        try store.checkpoint(rooms.image("r")!)
        try rooms.write("r", addItems(["old-3"]), to: store)
        store.drop(room: "r", epoch: 7, version: 4)
        rooms.rooms["r"] = nil
        try rooms.write("r", addItems(["new"], first: true), epoch: 9, to: store)
        try store.sync()
        do {
            let (copy, recovered, _) = try crashCopy(dir, "one")
            expectSameRooms(recovered, rooms)
            try copy.close()
        }
        // The new room's checkpoint, written while the old one's is still listed (no maintain ran).
        try store.checkpoint(rooms.image("r")!)
        #expect(checkpointFiles(dir.data).count == 2)
        let (copy, recovered, _) = try crashCopy(dir, "two")
        defer { try? copy.close() }
        expectSameRooms(recovered, rooms)
        #expect(recovered.first?.epoch == 9)
        #expect(checkpointFiles(dir.path + "/two").count == 1)
    }

    /// Without its tombstone, a record that does not follow its room's state is still damage.
    @Test func aRecordInDoubtWithoutATombstoneRefusesTheStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        try rooms.write("r", addItems(["a"], first: true), epoch: 7, to: store)
        try store.sync()
        try store.checkpoint(rooms.image("r")!)
        // The same room under another epoch, with no tombstone between: what damage looks like.
        store.append(
            WriteRecord(
                room: "r", epoch: 8, version: 1, writeID: [],
                diffFrame: diffFrame(room: "r", epoch: 8, version: 1, ops: addItems(["x"], first: true))))
        try store.sync()
        try store.close()
        #expect {
            try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        } throws: { error in
            guard case .corrupt(_, _, let reason) = error as? StoreError else { return false }
            return reason.contains("room r is at epoch 7, but this write is for epoch 8")
        }
    }

    /// The dropped room's checkpoint goes at the next `maintain` (listed until then), and the
    /// segment holding its writes once it is closed, with no other room pinning it.
    /// Under every fsync policy: the reclaim fdatasyncs the tombstone itself.
    @Test(arguments: [FsyncPolicy.always, .everysec, .no])
    func aDroppedRoomsFilesAreReclaimed(fsync: FsyncPolicy) throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data, fsync: fsync), logger: LogLines().logger)
        defer { try? store.close() }
        for n in 0..<20 { try rooms.write("big", addItems(["i\(n)"], first: n == 0), to: store) }
        try store.sync()
        try store.checkpoint(rooms.image("big")!)
        try rooms.write("big", addItems(["last"]), to: store)
        try store.sync()
        let oldSegment = store.activeSegmentName
        #expect(checkpointFiles(dir.data).count == 1)
        store.drop(room: "big", epoch: 7, version: 21)
        rooms.rooms["big"] = nil
        try store.sync()
        #expect(checkpointFiles(dir.data).count == 1, "kept until the tombstone is durable and a maintain runs")
        #expect(try Manifest.read(directory: dir.data)?.checkpoints.count == 1)
        try maintain(store, rooms)
        #expect(checkpointFiles(dir.data).isEmpty)
        #expect(try Manifest.read(directory: dir.data)?.checkpoints.isEmpty == true)
        // The log: once its segment is closed, nothing pins it.
        try store.switchSegmentNow()
        try maintain(store, rooms)
        #expect(!fileNames(dir.data).contains(oldSegment))
        #expect(!store.segmentNames.contains(oldSegment))
        let fsyncsBefore = store.statistics.fsyncs
        store.drop(room: "none", epoch: 1, version: 0)
        try maintain(store, rooms)
        #expect(store.statistics.fsyncs == fsyncsBefore, "a drop of nothing held costs no fdatasync")
        try store.close()
        let (reopened, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        #expect(recovered.isEmpty)
        try reopened.close()
    }

    /// A clean shutdown that checkpoints everything and deletes the log reclaims the dropped
    /// room's checkpoint first, so its tombstone never goes before it.
    /// A dropped room's checkpoint is unlinked on the background thread: `maintain` returns
    /// while the unlink is held, the file is still there and listed as removing in the
    /// MANIFEST (so a crash meanwhile is recognised at start), and once the job runs it is gone.
    @Test func checkpointsAreUnlinkedOffTheCallersThread() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(
            options: smallOptions(dir.data, fsync: .always, backgroundThread: true), logger: LogLines().logger)
        defer { try? store.close() }
        try rooms.write("gone", addItems(["a"], first: true), to: store)
        try store.sync()
        try store.checkpoint(rooms.image("gone")!)
        let file = try #require(checkpointFiles(dir.data).first)
        let held = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        // Held until the test lets it go, however slow the machine; released on every way out
        // (before the deferred close, which waits for the job).
        defer { release.signal() }
        store.injectBackgroundFault { job in
            if case .removeFiles(let paths, _) = job, paths.contains(where: { $0.hasSuffix(file) }) {
                held.signal()
                release.wait()
            }
            return nil
        }
        store.drop(room: "gone", epoch: 7, version: 1)
        rooms.rooms["gone"] = nil
        try store.sync()
        try maintain(store, rooms)
        // (An unlink on the caller's thread would have run inside maintain, never reaching here
        // through the background thread's hook.)
        // Only bounds a hang: a job that never comes fails here rather than blocking the lane.
        #expect(held.wait(timeout: .now() + 300) == .success, "no unlink job reached the background thread")
        #expect(checkpointFiles(dir.data) == [file], "the unlink is held on the background thread")
        let manifest = try #require(try Manifest.read(directory: dir.data))
        #expect(manifest.checkpoints.isEmpty && manifest.removing == [CheckpointFile.sequence(ofFileName: file)!])
        release.signal()
        store.injectBackgroundFault(nil)
        try store.finishBackgroundWork()
        #expect(checkpointFiles(dir.data).isEmpty && store.statistics.checkpointsDeleted == 1)
    }

    @Test func shutdownReclaimsBeforeDeletingTheLog() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        var options = smallOptions(dir.data)
        options.shutdownCheckpointBytes = 1
        let (store, _) = try DurableStore.open(options: options, logger: LogLines().logger)
        try rooms.write("gone", addItems(["a"], first: true), to: store)
        try rooms.write("kept", addItems(["k"], first: true), to: store)
        try store.sync()
        try store.checkpoint(rooms.image("gone")!)
        store.drop(room: "gone", epoch: 7, version: 1)
        rooms.rooms["gone"] = nil
        try close(store, rooms)
        #expect(checkpointFiles(dir.data).count == 1, "kept's only")
        let (reopened, recovered) = try DurableStore.open(options: options, logger: LogLines().logger)
        defer { try? reopened.close() }
        expectSameRooms(recovered, rooms)
    }

    /// A TTL set on a room never written keeps the room (at version 0, its epoch) across a
    /// crash; a later TTL replaces it; a checkpoint carries it once the log is gone; the store
    /// answers `ttl(of:)` alone.
    @Test func aTTLSurvivesCrashesAndCheckpoints() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        store.setTTL(room: "empty", epoch: 5, seconds: 30)
        try rooms.write("w", addItems(["a"], first: true), to: store)
        store.setTTL(room: "w", epoch: 7, seconds: 10)
        store.setTTL(room: "w", epoch: 7, seconds: 20)
        try store.sync()
        #expect(store.ttl(of: "w", default: nil) == .seconds(20))
        #expect(store.ttl(of: "other", default: .seconds(3)) == .seconds(3))
        do {
            let (copy, recovered, _) = try crashCopy(dir, "crash")
            #expect(recovered.map(\.name) == ["empty", "w"])
            #expect(recovered.map(\.ttlSeconds) == [30, 20])
            #expect(recovered.first?.epoch == 5 && recovered.first?.version == 0)
            #expect(copy.explicitTTL(of: "w") == 20)
            try copy.close()
        }
        // Both rooms are checkpointed once their segment closes, and the log goes.
        try store.switchSegmentNow()
        rooms.rooms["empty"] = Rooms.Room(epoch: 5, version: 0, snapshot: RoomSnapshot())
        #expect(Set(try maintain(store, rooms)) == ["empty", "w"])
        try maintain(store, rooms)
        store.setTTL(room: "w", epoch: 7, seconds: 0)
        try store.sync()
        #expect(store.ttl(of: "w", default: .seconds(3)) == nil, "0: never, whatever the default")
        try store.close()
        let (reopened, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? reopened.close() }
        #expect(recovered.map(\.ttlSeconds) == [30, 0])
        #expect(checkpointFiles(dir.data).count == 2)
    }

    /// The checkpoint's TTL record is read back, and one that is not the room's is damage.
    @Test func aCheckpointCarriesItsTTL() throws {
        let bytes = CheckpointFile.encode(
            room: "r", epoch: 3, version: 0, snapshot: RoomSnapshot(), history: [], ttl: (serial: 2, seconds: 9))
        let decoded = try CheckpointFile.decode(bytes, path: "ckpt")
        #expect(decoded.ttl?.serial == 2 && decoded.ttl?.seconds == 9)
        let plain = CheckpointFile.encode(room: "r", epoch: 3, version: 0, snapshot: RoomSnapshot(), history: [])
        #expect(try CheckpointFile.decode(plain, path: "ckpt").ttl == nil)
        let foreign = plain + Self.framed(.ttl(room: "other", epoch: 3, serial: 1, seconds: 9))
        #expect(throws: StoreError.self) { try CheckpointFile.decode(foreign, path: "ckpt") }
        let tombstone = plain + Self.framed(.tombstone(room: "r", epoch: 3, version: 0))
        #expect(throws: StoreError.self) { try CheckpointFile.decode(tombstone, path: "ckpt") }
    }

    static func framed(_ record: LifecycleRecord) -> [UInt8] {
        var payload: [UInt8] = []
        record.encodePayload(into: &payload)
        var out: [UInt8] = []
        RecordFraming.append(payload: payload, to: &out)
        return out
    }

    /// Each record's payload, byte by byte (docs/persistence.md).
    @Test func lifecycleRecordsHaveTheDocumentedLayout() throws {
        var payload: [UInt8] = []
        LifecycleRecord.tombstone(room: "ab", epoch: 300, version: 2).encodePayload(into: &payload)
        #expect(payload == [0x04, 2, 0x61, 0x62, 0xac, 0x02, 2])
        #expect(try LifecycleRecord(payload: payload, range: 0..<payload.count) == .tombstone(room: "ab", epoch: 300, version: 2))
        payload = []
        LifecycleRecord.ttl(room: "ab", epoch: 1, serial: 3, seconds: 86_400).encodePayload(into: &payload)
        #expect(payload == [0x05, 2, 0x61, 0x62, 1, 3, 0x80, 0xa3, 0x05])
        #expect(try LifecycleRecord(payload: payload, range: 0..<payload.count) == .ttl(room: "ab", epoch: 1, serial: 3, seconds: 86_400))
        #expect(throws: FieldReader.Failure.self) { try LifecycleRecord(payload: payload + [0], range: 0..<payload.count + 1) }
    }
}

/// Items `ids` appended to section `s` (created first when `first`).
func addItems(_ ids: [String], first: Bool = false) -> [SnapshotOperation] {
    (first ? [.appendSections([SnapshotElement("s")])] : []) + [.appendItems(ids.map { SnapshotElement(SnapshotIdentifier($0)) }, toSection: "s")]
}
