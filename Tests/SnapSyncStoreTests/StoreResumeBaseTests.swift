// A room's resume base across restarts and sleep (docs/persistence.md, "The resume window and
// folded catch-ups"): a checkpoint keeps the base the daemon gave with its image; recovery,
// waking and every trim of a history keep `RecoveredRoom.base` the state before
// `history.first`, so that the daemon can fold a resume from anywhere in the window after a
// restart or a wake. Every expected state is the one the test's own rooms had at that version
// (`Rooms(keepingStates:)`), never one the store rebuilt.

import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncStore

@Suite(.unitTests) struct StoreResumeBaseTests {
    private func options(_ directory: String, keepsBases: Bool = true, sleeping: Bool = false) -> StoreOptions {
        var options = smallOptions(directory, historyLimit: 16, keepsResumeBases: keepsBases)
        options.sleepingRooms = sleeping
        return options
    }

    /// Writes `count` versions of `room`: items appended, the odd ones moved to the front and
    /// every third removed, so that no state is a prefix of a later one.
    private func write(_ count: Int, to room: String, _ rooms: inout Rooms, _ store: DurableStore) throws {
        for _ in 0..<count {
            let n = rooms.rooms[room]?.version ?? 0
            var ops: [SnapshotOperation] = n == 0 ? [.appendSections(["s"])] : []
            ops.append(.appendItems([SnapshotElement(SnapshotIdentifier("i\(n)"), payload: SnapshotPayload([UInt8(n & 0xFF)]))], toSection: "s"))
            if n % 2 == 1, let first = rooms.rooms[room]?.snapshot.itemIdentifiers(inSection: "s")?.first {
                ops.append(.moveItem(SnapshotIdentifier("i\(n)"), .before(first)))
            }
            if n % 3 == 2 { ops.append(.deleteItems([SnapshotIdentifier("i\(n - 1)")])) }
            try rooms.write(room, ops, to: store)
        }
        try store.sync()
    }

    private func checkpointFile(_ directory: String) throws -> CheckpointFile {
        let name = try #require(fileNames(directory).first { $0.hasPrefix("ckpt-") })
        return try CheckpointFile.decode(readFile(directory + "/" + name), path: name)
    }

    /// The file: a base given is written after the TTL and read back whole; none given writes
    /// the file as before; a record of another kind in its place is damage.
    @Test func aCheckpointFileKeepsTheBase() throws {
        var rooms = Rooms(keepingStates: true)
        let dir = TempDirectory()
        defer { dir.remove() }
        let (store, _) = try DurableStore.open(options: options(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        try write(8, to: "r", &rooms, store)
        let history = Array(rooms.writes(of: "r").suffix(3))
        let snapshot = try #require(rooms.state(of: "r", at: 8))
        let base = try #require(rooms.state(of: "r", at: 5))
        #expect(base != snapshot)
        let bytes = CheckpointFile.encode(
            room: "r", epoch: 7, version: 8, snapshot: snapshot, history: history, ttl: (serial: 2, seconds: 60), base: base)
        let file = try CheckpointFile.decode(bytes, path: "ckpt")
        #expect(file.base == base && file.snapshot == snapshot && file.history == history && file.ttl?.seconds == 60)
        #expect(try CheckpointFile.decodeHeader(bytes, path: "ckpt").ttl?.seconds == 60)

        let plain = CheckpointFile.encode(room: "r", epoch: 7, version: 8, snapshot: snapshot, history: history)
        #expect(try CheckpointFile.decode(plain, path: "ckpt").base == nil)

        // A last record of an unknown kind (0x0B) where the base may stand: damage, named.
        var odd = plain
        RecordFraming.append(payload: [0x0B, 0], to: &odd)
        for decode in [{ _ = try CheckpointFile.decode(odd, path: "ckpt") }, { _ = try CheckpointFile.decodeHeader(odd, path: "ckpt") }] {
            #expect {
                try decode()
            } throws: { error in
                "\(error)".contains("follow the last record a checkpoint holds")
            }
        }
        // A base whose encoding is cut: damage, named as the base.
        var cut = plain
        var record: [UInt8] = [PayloadKind.resumeBase.rawValue]
        base.encodeCanonical(into: &record)
        RecordFraming.append(payload: Array(record.dropLast()), to: &cut)
        #expect {
            try CheckpointFile.decode(cut, path: "ckpt")
        } throws: { error in
            "\(error)".contains("resume base of room r")
        }
    }

    /// The store: the checkpoint of an image with a base holds it, moved over the frames the
    /// store does not keep; a restart gives back the state before the recovered history, moved
    /// over the log's writes that pushed the checkpoint's history out.
    @Test func aCheckpointedRoomRecoversItsBasePastTheLogsWrites() throws {
        var rooms = Rooms(keepingStates: true)
        let dir = TempDirectory()
        defer { dir.remove() }
        let (store, _) = try DurableStore.open(options: options(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        try write(30, to: "r", &rooms, store)
        // The image holds 20 frames (11 ... 30) and the state at 10; the store keeps 16 (15 ... 30).
        let image = try #require(rooms.imageWithBase("r"))
        #expect(image.diffFrames.count == 20 && image.base == rooms.state(of: "r", at: 10))
        try store.checkpoint(image)
        let file = try checkpointFile(dir.data)
        #expect(file.history.map(\.version) == Array(15...30))
        #expect(file.base == rooms.state(of: "r", at: 14))
        // 40 more in the log only: recovery keeps 16 (55 ... 70), the base moved to 54.
        try write(40, to: "r", &rooms, store)

        let copy = dir.path + "/crash"
        copyDirectory(dir.data, copy)
        let (recoveredStore, recovered) = try DurableStore.open(options: options(copy), logger: LogLines().logger)
        defer { try? recoveredStore.close() }
        let room = try #require(recovered.first)
        #expect(room.version == 70 && room.history.map(\.version) == Array(55...70))
        #expect(room.base == rooms.state(of: "r", at: 54))
        #expect(room.snapshot == rooms.state(of: "r", at: 70))
    }

    /// A room the log holds from version 1 (no checkpoint) starts from the empty room: its base
    /// is that, moved over the writes the history limit drops. Without `keepsResumeBases` no
    /// base is kept or read, a checkpoint's included.
    @Test func aNewRoomsBaseStartsEmptyAndNoneIsKeptWhenNotAsked() throws {
        var rooms = Rooms(keepingStates: true)
        let dir = TempDirectory()
        defer { dir.remove() }
        do {
            let (store, _) = try DurableStore.open(options: options(dir.data), logger: LogLines().logger)
            defer { try? store.close() }
            try write(40, to: "new", &rooms, store)
            try write(20, to: "kept", &rooms, store)
            try store.checkpoint(#require(rooms.imageWithBase("kept")))
        }
        let (store, recovered) = try DurableStore.open(options: options(dir.data), logger: LogLines().logger)
        let new = try #require(recovered.first { $0.name == "new" })
        #expect(new.history.map(\.version) == Array(25...40) && new.base == rooms.state(of: "new", at: 24))
        let kept = try #require(recovered.first { $0.name == "kept" })
        #expect(kept.history.map(\.version) == Array(5...20) && kept.base == rooms.state(of: "kept", at: 4))
        try store.close()

        let (plain, without) = try DurableStore.open(options: options(dir.data, keepsBases: false), logger: LogLines().logger)
        defer { try? plain.close() }
        #expect(without.count == 2 && without.allSatisfy { $0.base == nil })
    }

    /// Sleep: a room evicted with its base wakes with it; so does one recovery leaves asleep.
    @Test func aSleepingRoomWakesWithItsBase() throws {
        var rooms = Rooms(keepingStates: true)
        let dir = TempDirectory()
        defer { dir.remove() }
        do {
            let (store, _) = try DurableStore.open(options: options(dir.data, sleeping: true), logger: LogLines().logger)
            defer { try? store.close() }
            try write(25, to: "r", &rooms, store)
            #expect(try store.evict([#require(rooms.imageWithBase("r"))], within: nil) == 1)
            let woken = try #require(try store.loadSleeping("r"))
            #expect(woken.history.map(\.version) == Array(10...25) && woken.base == rooms.state(of: "r", at: 9))
            #expect(woken.snapshot == rooms.state(of: "r", at: 25))
        }
        let (store, recovered) = try DurableStore.open(options: options(dir.data, sleeping: true), logger: LogLines().logger)
        defer { try? store.close() }
        #expect(recovered.isEmpty && store.isAsleep("r"))
        let woken = try #require(try store.loadSleeping("r"))
        #expect(woken.base == rooms.state(of: "r", at: 9))
    }
}
