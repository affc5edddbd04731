// A room's chain across restarts and sleep (docs/persistence.md, "Room chains"): a checkpoint
// keeps the chain the daemon gave with its image; recovery, waking and every trim of a history
// keep `RecoveredRoom.chain` the chain before `history.first`, so that the chain the daemon
// computes at the room's version continues the one its clients saw. Every expected chain is
// computed here from the writes made (`Rooms.chain(of:epoch:at:)`), never read from the store.

import Foundation
import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncStore

@Suite(.unitTests) struct StoreChainTests {
    /// What a kill -9 leaves: the directory as it is now, opened by another store.
    private func crashCopy(
        _ dir: TempDirectory, _ label: String, options: (String) -> StoreOptions = { smallOptions($0) }
    ) throws -> (DurableStore, [RecoveredRoom]) {
        let copy = dir.path + "/" + label
        copyDirectory(dir.data, copy)
        return try DurableStore.open(options: options(copy), logger: LogLines().logger)
    }

    private func checkpointFiles(_ directory: String) -> [String] { fileNames(directory).filter { $0.hasPrefix("ckpt-") } }

    private func readCheckpoint(_ directory: String, _ name: String) throws -> CheckpointFile {
        try CheckpointFile.decode(readFile(directory + "/" + name), path: name)
    }

    /// Writes `count` versions of `room` (one item each).
    private func write(_ count: Int, to room: String, epoch: UInt64 = 7, _ rooms: inout Rooms, _ store: DurableStore) throws {
        for _ in 0..<count {
            let n = rooms.rooms[room]?.version ?? 0
            var ops: [SnapshotOperation] = n == 0 ? [.appendSections(["s"])] : []
            ops.append(.appendItems([SnapshotElement(SnapshotIdentifier("i\(n)"))], toSection: "s"))
            try rooms.write(room, ops, epoch: epoch, to: store)
        }
        try store.sync()
    }

    /// A checkpoint of an old daemon: kind 0x02 header without a chain, as encoded before
    /// checkpoints held one, built field by field here.
    private func oldFormatCheckpoint(
        room: String, epoch: UInt64, version: UInt64, snapshot: RoomSnapshot, history: [WriteRecord]
    ) -> [UInt8] {
        var header: [UInt8] = [0x02]
        header.appendString(room)
        header.appendVarint(epoch)
        header.appendVarint(version)
        header.append(contentsOf: snapshot.digest.bytes)
        header.appendVarint(UInt64(history.count))
        var bytes = Array("SNAPCKP1".utf8)
        RecordFraming.append(payload: header, to: &bytes)
        RecordFraming.append(payload: snapshot.canonicalEncoding, to: &bytes)
        for write in history {
            var payload: [UInt8] = []
            write.encodePayload(into: &payload)
            RecordFraming.append(payload: payload, to: &bytes)
        }
        return bytes
    }

    // MARK: - (a) the file keeps the chain

    /// The file: a chain given is written (header kind 0x09) and read back; none given writes
    /// the previous layout byte for byte (kind 0x02), which reads back without a chain.
    @Test func aCheckpointFileKeepsItsChain() throws {
        var rooms = Rooms()
        let dir = TempDirectory()
        defer { dir.remove() }
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        try write(5, to: "r", &rooms, store)
        let history = rooms.writes(of: "r").suffix(3).map { $0 }
        let snapshot = try #require(rooms.rooms["r"]).snapshot
        let chain = try #require(rooms.chain(of: "r", epoch: 7, at: 2))
        let bytes = CheckpointFile.encode(room: "r", epoch: 7, version: 5, snapshot: snapshot, history: history, chain: chain)
        #expect(bytes[CheckpointFile.magic.count + RecordFraming.headerSize] == 0x09)
        let file = try CheckpointFile.decode(bytes, path: "ckpt")
        #expect(file.chain == chain && file.history == history && file.snapshot == snapshot)
        #expect(try CheckpointFile.decodeHeader(bytes, path: "ckpt").version == 5)

        let old = CheckpointFile.encode(room: "r", epoch: 7, version: 5, snapshot: snapshot, history: history)
        #expect(old == oldFormatCheckpoint(room: "r", epoch: 7, version: 5, snapshot: snapshot, history: history))
        #expect(try CheckpointFile.decode(old, path: "ckpt").chain == nil)

        // A chain cut short is damage, named as such.
        var header: [UInt8] = [0x09]
        header.appendString("r")
        header.appendVarint(7)
        header.appendVarint(0)
        header.append(contentsOf: RoomSnapshot().digest.bytes)
        header.appendVarint(0)
        header.append(contentsOf: [UInt8](repeating: 1, count: 31))
        var short = CheckpointFile.magic
        RecordFraming.append(payload: header, to: &short)
        RecordFraming.append(payload: RoomSnapshot().canonicalEncoding, to: &short)
        #expect {
            try CheckpointFile.decode(short, path: "ckpt")
        } throws: { error in
            "\(error)".contains("checkpoint header") && "\(error)".contains("chain")
        }
    }

    /// The store: the checkpoint of an image with a chain holds it, and a restart gives it back
    /// as the chain before the history, with the log's later writes after it.
    @Test func aCheckpointedRoomRecoversItsChain() throws {
        var rooms = Rooms()
        let dir = TempDirectory()
        defer { dir.remove() }
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data, historyLimit: 16), logger: LogLines().logger)
        defer { try? store.close() }
        try write(30, to: "r", &rooms, store)
        // The image holds 20 frames (versions 11 ... 30): the chain before them is at 10.
        let image = try #require(rooms.image("r"))
        #expect(image.diffFrames.count == 20 && image.chain == rooms.chain(of: "r", epoch: 7, at: 10))
        try store.checkpoint(image)
        // The store keeps 16 of them (versions 15 ... 30): its chain moved over 11 ... 14.
        let file = try readCheckpoint(dir.data, #require(checkpointFiles(dir.data).first))
        #expect(file.history.map(\.version) == Array(15...30))
        #expect(file.chain == rooms.chain(of: "r", epoch: 7, at: 14))
        try write(3, to: "r", &rooms, store)

        let (copy, recovered) = try crashCopy(dir, "crash", options: { smallOptions($0, historyLimit: 16) })
        defer { try? copy.close() }
        let room = try #require(recovered.first)
        #expect(room.version == 33 && room.history.map(\.version) == Array(18...33))
        expectSameChains(recovered, rooms)
    }

    // MARK: - (b) a checkpoint without a chain

    /// A checkpoint written before checkpoints held a chain reads back without one; recovery
    /// then takes `RoomChain.unknown` as the chain before its history (its history does not
    /// reach back to version 1), the same at every start, and moves it over the log's writes.
    @Test func anOldCheckpointGivesTheUnknownChainBeforeItsHistory() throws {
        var rooms = Rooms()
        let dir = TempDirectory()
        defer { dir.remove() }
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data, historyLimit: 16), logger: LogLines().logger)
        defer { try? store.close() }
        try write(10, to: "r", &rooms, store)
        // Replaced by an old daemon's bytes below: same room, version and history (7 ... 10).
        try store.checkpoint(#require(rooms.image("r", withChain: false)))
        let name = try #require(checkpointFiles(dir.data).first)
        let current = try readCheckpoint(dir.data, name)
        #expect(current.chain == nil)
        let history = rooms.writes(of: "r").suffix(4).map { $0 }
        writeFile(
            dir.data + "/" + name,
            oldFormatCheckpoint(room: "r", epoch: 7, version: 10, snapshot: current.snapshot, history: history))
        #expect(try readCheckpoint(dir.data, name).chain == nil)
        try write(3, to: "r", &rooms, store)
        // Versions 1 ... 10 went into the checkpoint: the log's older records are skipped.
        let frames = rooms.writes(of: "r").filter { $0.version >= 7 }.map(\.diffFrame)

        for attempt in ["first", "second"] {
            let (copy, recovered) = try crashCopy(dir, attempt, options: { smallOptions($0, historyLimit: 16) })
            let room = try #require(recovered.first)
            #expect(room.history.map(\.version) == Array(7...13))
            #expect(room.chain == RoomChain.unknown, "\(attempt) start")
            #expect(room.chainAtVersion == frames.reduce(RoomChain.unknown) { $0.next(frame: $1) })
            #expect(room.chainAtVersion != rooms.chain(of: "r", epoch: 7, at: 13), "not the true chain: unknown is not guessed away")
            try copy.close()
        }
    }

    /// The same with the history trimmed at recovery (a lower `historyLimit`): the unknown
    /// chain is before the checkpoint's history, and moves over the records dropped.
    @Test func anOldCheckpointsUnknownChainMovesOverTheRecordsDropped() throws {
        var rooms = Rooms()
        let dir = TempDirectory()
        defer { dir.remove() }
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data, historyLimit: 16), logger: LogLines().logger)
            defer { try? store.close() }
            try write(12, to: "r", &rooms, store)
            try store.checkpoint(#require(rooms.image("r", withChain: false)))
        }
        let name = try #require(checkpointFiles(dir.data).first)
        let current = try readCheckpoint(dir.data, name)
        let history = rooms.writes(of: "r").suffix(6).map { $0 }  // versions 7 ... 12
        writeFile(
            dir.data + "/" + name,
            oldFormatCheckpoint(room: "r", epoch: 7, version: 12, snapshot: current.snapshot, history: history))
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data, historyLimit: 4), logger: LogLines().logger)
        defer { try? store.close() }
        let room = try #require(recovered.first)
        #expect(room.history.map(\.version) == Array(9...12))
        #expect(room.chain == history.prefix(2).reduce(RoomChain.unknown) { $0.next(frame: $1.diffFrame) })
        #expect(room.chainAtVersion == history.reduce(RoomChain.unknown) { $0.next(frame: $1.diffFrame) })
    }

    /// An old checkpoint whose history reaches back to version 1 knows its chain exactly: the
    /// incarnation's start. The previous release's data directory (Tests/Fixtures) recovers
    /// with the true chains of its rooms.
    @Test func previousReleaseDataRecoversWithChains() throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/previous-release-data")
        let dir = TempDirectory()
        defer { dir.remove() }
        copyDirectory(fixture.path, dir.data)
        for name in checkpointFiles(dir.data) {
            let file = try readCheckpoint(dir.data, name)
            #expect(file.chain == nil && file.history.count == Int(file.version), "\(name): the whole history, no chain")
        }
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        #expect(recovered.map(\.name) == ["board", "notes"])
        for room in recovered {
            #expect(room.history.map(\.version) == Array(1...room.version), "\(room.name)")
            #expect(room.chain == RoomChain.start(epoch: room.epoch), "\(room.name)")
            #expect(
                room.chainAtVersion == room.history.reduce(RoomChain.start(epoch: room.epoch)) { $0.next(frame: $1.diffFrame) })
        }
    }

    // MARK: - (c) a new room from the log alone

    /// No checkpoint: the log starts the room at version 1, so its chain is the incarnation's
    /// start, and at its version the frames hashed in order.
    @Test func aNewRoomFromTheLogStartsAtItsEpochsChain() throws {
        var rooms = Rooms()
        let dir = TempDirectory()
        defer { dir.remove() }
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        try write(6, to: "a", epoch: 41, &rooms, store)
        try write(2, to: "b", epoch: 42, &rooms, store)
        let (copy, recovered) = try crashCopy(dir, "crash")
        defer { try? copy.close() }
        #expect(recovered.map(\.name) == ["a", "b"])
        for room in recovered {
            #expect(room.history.count == Int(room.version))
            #expect(room.chain == RoomChain.start(epoch: room.epoch))
            // Hashed here from the frames written: SHA-256(chain ‖ frame) per version.
            let frames = rooms.writes(of: room.name).map(\.diffFrame)
            #expect(room.chainAtVersion == frames.reduce(RoomChain.start(epoch: room.epoch)) { $0.next(frame: $1) })
        }
        expectSameChains(recovered, rooms)
    }

    /// A room given a TTL and never written is at version 0: its chain is its start.
    @Test func aRoomWithATTLOnlyIsAtItsStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        try store.reserve()
        store.setTTL(room: "t", epoch: 99, seconds: 60)
        try store.sync()
        let (copy, recovered) = try crashCopy(dir, "crash")
        defer { try? copy.close() }
        let room = try #require(recovered.first)
        #expect(room.version == 0 && room.chain == RoomChain.start(epoch: 99))
    }

    /// A tombstone ends the incarnation: the room written again under the same name starts
    /// from its new epoch's chain, whatever the old one's checkpoint held.
    @Test func aRoomWrittenAfterItsTombstoneStartsAfresh() throws {
        var rooms = Rooms()
        let dir = TempDirectory()
        defer { dir.remove() }
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        try write(4, to: "r", epoch: 1, &rooms, store)
        try store.checkpoint(#require(rooms.image("r")))
        try store.reserve()
        store.drop(room: "r", epoch: 1, version: 4)
        try store.sync()
        rooms.rooms["r"] = nil
        try write(3, to: "r", epoch: 2, &rooms, store)
        let (copy, recovered) = try crashCopy(dir, "crash")
        defer { try? copy.close() }
        let room = try #require(recovered.first)
        #expect(room.epoch == 2 && room.version == 3 && room.chain == RoomChain.start(epoch: 2))
        expectSameChains(recovered, rooms)
    }

    // MARK: - (d) histories trimmed

    /// Replay trims the history to `historyLimit` (in halves, then once more when the rooms
    /// are handed over): the chain before `history.first` is the true chain at that version.
    @Test func aHistoryTrimmedByTheLimitKeepsTheChainBeforeIt() throws {
        var rooms = Rooms()
        let dir = TempDirectory()
        defer { dir.remove() }
        let options = { (directory: String) in smallOptions(directory, historyLimit: 8) }
        let (store, _) = try DurableStore.open(options: options(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        // 37 versions from the log alone: trimmed at 16 records (twice), then to the last 8.
        try write(37, to: "log-only", &rooms, store)
        // A checkpoint at 20 of 20 frames (kept: 13 ... 20), then 19 versions of log.
        try write(20, to: "checkpointed", &rooms, store)
        try store.checkpoint(#require(rooms.image("checkpointed")))
        try write(19, to: "checkpointed", &rooms, store)
        let (copy, recovered) = try crashCopy(dir, "crash", options: options)
        defer { try? copy.close() }
        #expect(recovered.map { $0.history.map(\.version) } == [Array(32...39), Array(30...37)])
        for room in recovered {
            #expect(room.chain != nil && room.chain != RoomChain.start(epoch: room.epoch))
        }
        expectSameChains(recovered, rooms)
    }

    // MARK: - (e) sleep and wake

    /// An evicted room wakes with the chain its image had; after a restart too (left asleep),
    /// with a lower history limit (the chain moves over the records dropped), and when the log
    /// writes it after its checkpoint (woken by replay).
    @Test func aSleepingRoomWakesWithItsChain() throws {
        var rooms = Rooms()
        let dir = TempDirectory()
        defer { dir.remove() }
        let sleepy = { (directory: String, limit: Int) in
            var options = smallOptions(directory, historyLimit: limit)
            options.sleepingRooms = true
            return options
        }
        let (store, _) = try DurableStore.open(options: sleepy(dir.data, 16), logger: LogLines().logger)
        defer { try? store.close() }
        try write(25, to: "sleeper", &rooms, store)
        try write(3, to: "written-after", &rooms, store)
        #expect(try store.evict(["sleeper", "written-after"].compactMap { rooms.image($0) }, within: nil) == 2)
        try store.commitEvictions()

        let woken = try #require(try store.loadSleeping("sleeper"))
        #expect(woken.history.map(\.version) == Array(10...25))
        expectSameChains([woken], rooms)
        store.markAwake(woken)

        // "written-after" is woken, written, and a crash follows: replay wakes it from its
        // checkpoint and moves on over the log's writes.
        let other = try #require(try store.loadSleeping("written-after"))
        expectSameChains([other], rooms)
        store.markAwake(other)
        try write(2, to: "written-after", &rooms, store)

        let (copy, recovered) = try crashCopy(dir, "crash", options: { sleepy($0, 4) })
        defer { try? copy.close() }
        #expect(recovered.map(\.name) == ["written-after"] && copy.isAsleep("sleeper"))
        #expect(recovered.first?.history.map(\.version) == Array(2...5))
        expectSameChains(recovered, rooms)
        let again = try #require(try copy.loadSleeping("sleeper"))
        #expect(again.history.map(\.version) == Array(22...25))
        expectSameChains([again], rooms)
    }
}
