// The byte formats of the write-ahead log and checkpoints (docs/persistence.md).

import Foundation
import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncStore

@Suite(.unitTests) struct StoreFormatTests {
    @Test func recordsRoundTripAndEndAtZeros() {
        let payloads: [[UInt8]] = [[1], Array(0..<200), Array(repeating: 0, count: 33), [0xFF, 0]]
        var bytes: [UInt8] = []
        for p in payloads { RecordFraming.append(payload: p, to: &bytes) }
        #expect(bytes.count == payloads.reduce(0) { $0 + 12 + $1.count })
        bytes.append(contentsOf: repeatElement(0, count: 40))  // preallocated space
        var offset = 0
        var read: [[UInt8]] = []
        while case .record(let range, let next) = RecordFraming.parse(bytes, at: offset, end: bytes.count, maxPayload: 1000) {
            read.append(Array(bytes[range]))
            offset = next
        }
        #expect(read == payloads)
        #expect(RecordFraming.parse(bytes, at: offset, end: bytes.count, maxPayload: 1000) == .end)
        #expect(RecordFraming.parse(bytes, at: bytes.count, end: bytes.count, maxPayload: 1000) == .end)
        #expect(RecordFraming.nextGoodRecord(bytes, after: offset, end: bytes.count, maxPayload: 1000) == nil)
    }

    @Test func headerLayoutIsLengthThenChecksums() {
        var bytes: [UInt8] = []
        RecordFraming.append(payload: [0x41, 0x42, 0x43], to: &bytes)
        #expect(Array(bytes[0..<4]) == [0, 0, 0, 3])
        #expect(bigEndianUInt32(bytes, at: 4) == Checksum.crc32([0x41, 0x42, 0x43]))
        #expect(bigEndianUInt32(bytes, at: 8) == Checksum.crc32(Array(bytes[0..<8])))
        // zlib's CRC-32 of "ABC" (IEEE polynomial), so the format is checkable without this code.
        #expect(Checksum.crc32([0x41, 0x42, 0x43]) == 0xA383_0348)
    }

    /// Every single flipped bit of a record is caught, in the header or the payload.
    @Test func everyFlippedBitIsDetected() {
        var bytes: [UInt8] = []
        RecordFraming.append(payload: Array("a write-ahead log record".utf8), to: &bytes)
        for bit in 0..<(bytes.count * 8) {
            var damaged = bytes
            damaged[bit / 8] ^= UInt8(1 << (bit % 8))
            let parsed = RecordFraming.parse(damaged, at: 0, end: damaged.count, maxPayload: 1 << 20)
            guard case .damaged = parsed else {
                Issue.record("bit \(bit) flipped and the record still parses as \(parsed)")
                continue
            }
        }
    }

    @Test func truncatedRecordsAreDamagedNotEnd() {
        var bytes: [UInt8] = []
        RecordFraming.append(payload: Array(1...50), to: &bytes)
        // (A cut inside the length's leading zero bytes reads as zeros, i.e. as the end.)
        for cut in 4..<bytes.count {
            let parsed = RecordFraming.parse(Array(bytes[0..<cut]), at: 0, end: cut, maxPayload: 1000)
            guard case .damaged = parsed else {
                Issue.record("a record cut at \(cut) of \(bytes.count) bytes parses as \(parsed)")
                continue
            }
        }
    }

    @Test func lengthsAboveTheLimitAreDamage() {
        var bytes: [UInt8] = []
        RecordFraming.append(payload: Array(repeating: 9, count: 100), to: &bytes)
        guard case .damaged(let why) = RecordFraming.parse(bytes, at: 0, end: bytes.count, maxPayload: 99) else {
            Issue.record("a record over the limit parsed")
            return
        }
        #expect(why.contains("outside"))
    }

    @Test func nextGoodRecordFindsWhatFollowsDamage() {
        var bytes: [UInt8] = []
        RecordFraming.append(payload: Array(repeating: 1, count: 30), to: &bytes)
        let second = bytes.count
        RecordFraming.append(payload: Array(repeating: 2, count: 30), to: &bytes)
        let third = bytes.count
        RecordFraming.append(payload: Array(repeating: 3, count: 30), to: &bytes)
        bytes[second + 20] ^= 0x10
        #expect(RecordFraming.nextGoodRecord(bytes, after: second, end: bytes.count, maxPayload: 1000) == third)
        // Zeros between damage and a record are skipped.
        var padded = Array(bytes[0..<third - 5])
        padded.append(contentsOf: repeatElement(0, count: 100))
        let again = padded.count
        RecordFraming.append(payload: [7], to: &padded)
        #expect(RecordFraming.nextGoodRecord(padded, after: second, end: padded.count, maxPayload: 1000) == again)
    }

    @Test func writePayloadRoundTrips() throws {
        let ops: [SnapshotOperation] = [.appendSections([SnapshotElement("s", payload: "p")]), .appendItems(["a", "b"], toSection: "s")]
        let write = WriteRecord(
            room: "ροom ✓", epoch: 0xDEAD_BEEF_0000_0001, version: 300,
            writeID: Array(0..<32), diffFrame: diffFrame(room: "ροom ✓", epoch: 1, version: 300, ops: ops))
        var payload: [UInt8] = []
        write.encodePayload(into: &payload)
        #expect(payload.first == 0x01)
        #expect(try WriteRecord(payload: payload, range: payload.indices) == write)
        #expect(payload.count <= WriteRecord.payloadSizeUpperBound(room: write.room, writeID: write.writeID, frameCount: write.diffFrame.count))
        var trailing = payload
        trailing.append(0)
        #expect(throws: FieldReader.Failure.self) { try WriteRecord(payload: trailing, range: trailing.indices) }
        var kind = payload
        kind[0] = 0x09
        #expect(throws: FieldReader.Failure.self) { try WriteRecord(payload: kind, range: kind.indices) }
    }

    @Test func varintsMustBeMinimal() throws {
        func varint(_ bytes: [UInt8]) throws(FieldReader.Failure) -> UInt64 {
            try bytes.withUnsafeBufferPointer { (p) throws(FieldReader.Failure) -> UInt64 in
                var r = FieldReader(p, from: 0, to: p.count)
                return try r.varint("v")
            }
        }
        #expect { try varint([0x80, 0x00]) } throws: { ($0 as? FieldReader.Failure)?.what == "v is not minimally encoded" }
        #expect(try varint([0xAC, 0x02]) == 300)
        var big: [UInt8] = []
        big.appendVarint(UInt64.max)
        #expect(try varint(big) == .max)
        #expect { try varint([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02]) } throws: {
            ($0 as? FieldReader.Failure)?.what == "v does not fit in 64 bits"
        }
        #expect { try varint([0xFF, 0xFF]) } throws: { ($0 as? FieldReader.Failure)?.what == "v runs past the end" }
    }

    @Test func segmentHeaderIsChecked() {
        let header = LogSegment.header(sequence: 42)
        #expect(header.count == LogSegment.headerSize)
        #expect(Array(header[0..<8]) == Array("SNAPWAL1".utf8))
        #expect(LogSegment.checkHeader(header, sequence: 42) == nil)
        #expect(LogSegment.checkHeader(header, sequence: 43) != nil)
        #expect(LogSegment.checkHeader(Array(header[0..<10]), sequence: 42) != nil)
        for i in header.indices {
            var damaged = header
            damaged[i] ^= 1
            #expect(LogSegment.checkHeader(damaged, sequence: 42) != nil, "byte \(i)")
        }
        #expect(LogSegment.fileName(42) == "wal-000000000000002a.log")
        #expect(LogSegment.sequence(ofFileName: "wal-000000000000002a.log") == 42)
        #expect(LogSegment.sequence(ofFileName: "wal-2a.log") == nil)
        #expect(LogSegment.sequence(ofFileName: "wal-000000000000002A.log") == nil)
        #expect(LogSegment.sequence(ofFileName: "wal-000000000000002a.log.tmp") == nil)
    }

    @Test func checkpointRoundTripsWithHistory() throws {
        var snapshot = RoomSnapshot()
        var history: [WriteRecord] = []
        for v in 1...5 as ClosedRange<UInt64> {
            let ops: [SnapshotOperation] =
                v == 1 ? [.appendSections(["s"])] : [.appendItems([SnapshotElement(SnapshotIdentifier(uint64: v), payload: "x")], toSection: "s")]
            try snapshot.apply(ops)
            history.append(
                WriteRecord(
                    room: "r", epoch: 9, version: v, writeID: [UInt8(v)],
                    // Records with a fingerprint (kind 0x06) and without (0x01) side by side.
                    fingerprint: v % 2 == 0 ? 0x0101 * v : nil,
                    diffFrame: diffFrame(room: "r", epoch: 9, version: v, ops: ops)))
        }
        let bytes = CheckpointFile.encode(room: "r", epoch: 9, version: 5, snapshot: snapshot, history: Array(history[2...]))
        #expect(Array(bytes[0..<8]) == Array("SNAPCKP1".utf8))
        let file = try CheckpointFile.decode(bytes, path: "ckpt")
        #expect(file.room == "r" && file.epoch == 9 && file.version == 5)
        #expect(file.snapshot == snapshot)
        #expect(file.history == Array(history[2...]))

        // Damage anywhere is reported as corruption, never loaded.
        for i in stride(from: 0, to: bytes.count, by: 7) {
            var damaged = bytes
            damaged[i] ^= 0x04
            #expect(throws: StoreError.self, "byte \(i)") { try CheckpointFile.decode(damaged, path: "ckpt") }
        }
        // A cut file too.
        #expect(throws: StoreError.self) { try CheckpointFile.decode(Array(bytes.dropLast()), path: "ckpt") }
        #expect(throws: StoreError.self) { try CheckpointFile.decode(bytes + [0], path: "ckpt") }
    }

    /// An outline's checkpoint carries its levels (PROTOCOL.md §4) and reads back as the same
    /// forest; levels that describe no forest are corruption.
    @Test func checkpointOfAnOutlineRoundTrips() throws {
        var snapshot = RoomSnapshot()
        try snapshot.apply([
            .appendSections(["s", "t"]), .appendItems(["a", "b"], toSection: "s"), .appendItems(["c"], toSection: "t"),
            .appendChildren(["a1"], toParent: "a"), .appendChildren(["a11"], toParent: "a1"), .moveItemToParent("b", parent: "c"),
        ])
        let bytes = CheckpointFile.encode(room: "r", epoch: 3, version: 6, snapshot: snapshot, history: [])
        let file = try CheckpointFile.decode(bytes, path: "ckpt")
        #expect(file.snapshot == snapshot)
        #expect(file.snapshot.parent(of: "a11") == "a1" && file.snapshot.parent(of: "b") == "c")
        #expect(file.snapshot.digest == snapshot.digest)
        // The snapshot record alone, with its levels made impossible (a section starting at 1).
        var encoding = snapshot.canonicalEncoding
        let levelsStart = encoding.count - snapshot.numberOfItems
        encoding[levelsStart] = 1
        #expect(throws: FieldReader.Failure.self) { try SnapshotDecoding.decode(encoding, range: 0..<encoding.count) }
        // Too few levels.
        let short = Array(snapshot.canonicalEncoding.dropLast(2))
        #expect(throws: FieldReader.Failure.self) { try SnapshotDecoding.decode(short, range: 0..<short.count) }
    }

    /// The checkpoints a previous release wrote (Tests/Fixtures/previous-release-data, protocol
    /// version 1, no levels part) still decode, to the snapshots their digests name.
    @Test func previousReleaseCheckpointsDecode() throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/previous-release-data")
        var rooms: [String: UInt64] = [:]
        for name in ["ckpt-0000000000000001.snap", "ckpt-0000000000000002.snap"] {
            let bytes = Array(try Data(contentsOf: fixture.appendingPathComponent(name)))
            let file = try CheckpointFile.decode(bytes, path: name)
            #expect(!file.snapshot.isOutline)
            rooms[file.room] = file.version
        }
        #expect(rooms == ["board": 5, "notes": 2])
    }

    /// A checkpoint whose records all check but whose snapshot is not the one its digest names.
    @Test func checkpointDigestIsVerified() throws {
        let snapshot = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("a")])])
        let other = try RoomSnapshot([(SnapshotElement("s"), [SnapshotElement("b")])])
        var header: [UInt8] = [0x02]
        header.appendString("r")
        header.appendVarint(1)
        header.appendVarint(1)
        header.append(contentsOf: snapshot.digest.bytes)
        header.appendVarint(0)
        var bytes = CheckpointFile.magic
        RecordFraming.append(payload: header, to: &bytes)
        RecordFraming.append(payload: other.canonicalEncoding, to: &bytes)
        #expect {
            try CheckpointFile.decode(bytes, path: "ckpt")
        } throws: { error in
            "\(error)".contains("digest")
        }
    }

    /// A history of more writes than the checkpoint's version would hold a write that made
    /// version 0 (or, wrapping, one past 2^64 - 1): damage, never loaded.
    @Test func checkpointHistoryLongerThanItsVersionIsDamage() throws {
        let ops: [SnapshotOperation] = [.appendSections(["s"])]
        var snapshot = RoomSnapshot()
        try snapshot.apply(ops)
        let history = (0...1 as ClosedRange<UInt64>).map { v in
            WriteRecord(room: "r", epoch: 9, version: v, writeID: [], diffFrame: diffFrame(room: "r", epoch: 9, version: v, ops: ops))
        }
        let bytes = CheckpointFile.encode(room: "r", epoch: 9, version: 1, snapshot: snapshot, history: history)
        #expect {
            try CheckpointFile.decode(bytes, path: "ckpt")
        } throws: { error in
            guard case .corrupt(let path, let offset, let reason) = error as? StoreError else { return false }
            return path == "ckpt" && offset == CheckpointFile.magic.count
                && reason.contains("checkpoint header: history_count 2 is more than the version 1")
        }
    }

    @Test func snapshotDecodingRejectsBrokenRules() {
        // Two sections with the same identifier: well-formed bytes, invalid snapshot.
        var bytes: [UInt8] = []
        bytes.appendVarint(2)
        for _ in 0..<2 {
            bytes.appendString("s")
            bytes.appendVarint(0)
            bytes.appendVarint(0)
        }
        #expect(throws: FieldReader.Failure.self) { try SnapshotDecoding.decode(bytes, range: bytes.indices) }
    }
}
