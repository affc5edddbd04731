import Foundation
import Logging
import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncStore

/// The seeds that the store writes itself: log segments and checkpoint files made by
/// `DurableStore` through its public API (open, reserve, append, sync, maintain, checkpoint), and the
/// canonical encodings of the rooms they hold. They are checked against the committed
/// seeds/<target>/store-* files, so the seeds follow any change of format; to rewrite them:
///
///     SNAPSYNC_WRITE_FUZZ_SEEDS=1 swift test --filter SeedCorpusTests
///
/// (the seeds from Protocol/vectors come from Tests/Fuzz/make-corpus.py).
@Suite(.unitTests) struct SeedCorpusTests {
    /// Writes a few rooms through a real store, forces a segment switch and a checkpoint of
    /// every room, and returns the files: (target, seed name, bytes). The store's background
    /// work runs inline, so that one `maintain` both switches segments and names every room due,
    /// and its checkpoint batch has no time budget, so that one `checkpoint` writes every room
    /// however slow the disk.
    static func storeSeeds() throws -> [(FuzzTarget, String, [UInt8])] {
        let directory = NSTemporaryDirectory() + "snapsync-fuzz-seeds-\(getpid())-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let options = StoreOptions(
            directory: directory, fsync: .no, segmentBytes: 1 << 20, maxDiffFrameBytes: 4 << 10,
            preallocationBytes: 4 << 10, checkpointInterval: .seconds(60), checkpointBatchDuration: nil, historyLimit: 4,
            backgroundThread: false)
        let logger = Logger(label: "fuzz-seeds") { _ in SwiftLogNoOpLogHandler() }
        let start = ContinuousClock.now
        let (store, _) = try DurableStore.open(options: options, logger: logger, now: start)
        var rooms: [String: (epoch: UInt64, snapshot: RoomSnapshot, frames: [[UInt8]])] = [:]
        for (index, (room, ops, writeID)) in writes.enumerated() {
            try store.reserve()
            var state = rooms[room] ?? (epoch: UInt64(index + 1) * 0x9E37_79B9, snapshot: RoomSnapshot(), frames: [])
            try state.snapshot.apply(ops, limits: .default)
            var frame: [UInt8] = []
            FrameEncoder().encodeDiff(room: room, epoch: state.epoch, version: UInt64(state.frames.count + 1), ops: ops, into: &frame)
            // Writes with a write id keep their fingerprint (kind 0x06), as the daemon's do.
            var scratch: [UInt8] = []
            let fingerprint = WriteFingerprint.mutate(ops, expectedVersion: nil, scratch: &scratch)
            store.append(
                WriteRecord(
                    room: room, epoch: state.epoch, version: UInt64(state.frames.count + 1),
                    writeID: writeID, fingerprint: fingerprint, diffFrame: frame))
            state.frames.append(frame)
            rooms[room] = state
            try store.sync(now: start)
        }
        // A room given a TTL (kept in its checkpoint), and one written, then dropped (a tombstone).
        try store.reserve()
        store.setTTL(room: "notes", epoch: rooms["notes"]!.epoch, seconds: 3600)
        try store.reserve()
        var frame: [UInt8] = []
        FrameEncoder().encodeDiff(room: "gone", epoch: 5, version: 1, ops: [.appendSections(["s"])], into: &frame)
        store.append(WriteRecord(room: "gone", epoch: 5, version: 1, writeID: [], diffFrame: frame))
        store.drop(room: "gone", epoch: 5, version: 1)
        try store.sync(now: start)
        // A closed segment's data, before every room it pins is checkpointed and it is deleted.
        let firstSegment = try readAll(directory + "/" + store.activeSegmentName)
        let due = try store.maintain(now: start + .seconds(120))
        try store.checkpoint(
            due.compactMap { name in
                rooms[name].map {
                    // With the chain and the resume base before the frames (the room at 0),
                    // as the daemon gives them: the store moves both over the frames it drops.
                    RoomImage(
                        room: name, epoch: $0.epoch, version: UInt64($0.frames.count), snapshot: $0.snapshot, diffFrames: $0.frames,
                        chain: .start(epoch: $0.epoch), base: RoomSnapshot())
                }
            })
        try store.close()

        var seeds: [(FuzzTarget, String, [UInt8])] = []
        // Recovery reads a segment up to its end; the zeros of preallocated space read as the
        // end of the data, so a dozen of them stand for the rest.
        let records = firstSegment.count - (firstSegment.reversed().firstIndex { $0 != 0 } ?? 0)
        seeds.append((.log, "store-segment", Array(firstSegment[..<min(records + 12, firstSegment.count)])))
        // Named by room: which sequence number a room's checkpoint gets is not fixed.
        for name in try FileManager.default.contentsOfDirectory(atPath: directory).sorted() where name.hasPrefix("ckpt-") {
            let bytes = try readAll(directory + "/" + name)
            let room = try CheckpointFile.decode(bytes, path: name).room
            seeds.append((.checkpoint, "store-checkpoint-" + String(room.unicodeScalars.filter { $0.isASCII && $0.properties.isAlphabetic }), bytes))
        }
        for (name, state) in rooms.sorted(by: { $0.key < $1.key }) {
            seeds.append(
                (.snapshot, "store-room-" + String(name.unicodeScalars.filter { $0.isASCII && $0.properties.isAlphabetic }), state.snapshot.canonicalEncoding))
        }
        return seeds
    }

    /// Writes of every kind of op, to three rooms, some with a write_id.
    static let writes: [(String, [SnapshotOperation], [UInt8])] = [
        ("lobby", [.appendSections(["inbox", "archive"])], []),
        ("lobby", [.appendItems([SnapshotElement("m1", payload: "first"), SnapshotElement("m2", payload: "second")], toSection: "inbox")], Array("w1".utf8)),
        ("lobby", [.insertItems(["m0"], .before("m1")), .moveItemToSection("m2", section: "archive")], []),
        ("lobby", [.updateItems([SnapshotElement("m1", payload: "1st")], .reload), .updateSections([SnapshotElement("inbox", payload: "In")])], []),
        ("notes", [.appendSections(["a"]), .appendItems(["x", "y", "z"], toSection: nil)], Array(repeating: 7, count: 32)),
        ("notes", [.moveItem("z", .before("x")), .deleteItems(["y"]), .insertSections(["b"], .after("a"))], []),
        ("lobby", [.moveSection("archive", .before("inbox")), .updateItems(["m0"], .reconfigure)], []),
        ("notes", [.deleteSections(["b"]), .deleteAllItems], []),
        ("notes", [.appendSections([SnapshotElement("c", payload: "again")]), .appendItems(["x"], toSection: "c")], []),
        ("émoji ✓", [.appendSections([SnapshotElement("s", payload: SnapshotPayload([0, 1, 2, 255]))])], []),
    ]

    static func readAll(_ path: String) throws -> [UInt8] {
        try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test func storeWrittenFilesPassEveryLaw() throws {
        let seeds = try Self.storeSeeds()
        #expect(Set(seeds.map(\.0)) == [.log, .checkpoint, .snapshot])
        #expect(seeds.filter { $0.0 == .checkpoint }.count == 3, "one checkpoint per room")
        for (target, name, bytes) in seeds {
            #expect(throws: Never.self, "\(target.rawValue)/\(name)") { try target.run(bytes) }
        }
        // The files the store wrote must parse as such, not merely be refused without a trap.
        for (target, name, bytes) in seeds where target == .checkpoint {
            #expect(throws: Never.self, "\(name)") { try CheckpointFile.decode(bytes, path: name) }
        }
        if let segment = seeds.first(where: { $0.0 == .log })?.2 {
            #expect(LogSegment.checkHeader(segment, sequence: 1) == nil)
            var offset = LogSegment.headerSize, records = 0
            while case .record(_, let next) = RecordFraming.parse(segment, at: offset, end: segment.count, maxPayload: 1 << 20) {
                offset = next
                records += 1
            }
            #expect(records == Self.writes.count + 3, "the writes, a TTL, a write and a tombstone")
        }
    }

    @Test func committedStoreSeedsAreCurrent() throws {
        let write = ProcessInfo.processInfo.environment["SNAPSYNC_WRITE_FUZZ_SEEDS"] == "1"
        for (target, name, bytes) in try Self.storeSeeds() {
            let url = FuzzReplayTests.fuzzDirectory.appendingPathComponent("seeds/\(target.rawValue)/\(name)")
            if write {
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(bytes).write(to: url)
            }
            let committed = try? [UInt8](Data(contentsOf: url))
            #expect(committed == bytes, "seeds/\(target.rawValue)/\(name) is stale: SNAPSYNC_WRITE_FUZZ_SEEDS=1 swift test --filter SeedCorpusTests")
        }
    }
}
