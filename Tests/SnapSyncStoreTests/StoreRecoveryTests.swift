// Start-up: rooms come back from the log with the same epoch, version, content and history;
// a torn tail is cut off (and said so); damage followed by good records stops the start.

import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncStore
#if canImport(Glibc)
    import Glibc
#endif

@Suite(.unitTests) struct StoreRecoveryTests {
    @Test func roomsComeBackAfterCleanClose() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        do {
            let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            #expect(recovered.isEmpty)
            try rooms.writeMany(60, rooms: 3, to: store)
            try rooms.write("room-1", [.moveItem("room-1-item-0", .after("room-1-item-3"))], writeID: [1, 2, 3], to: store)
            try store.sync()
            try store.close()
        }
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        // History: the last `historyLimit` writes of each room, byte for byte, write_ids included.
        for room in recovered {
            #expect(room.history == Array(rooms.writes(of: room.name).suffix(16)))
            #expect(room.history.last?.version == room.version)
        }
        #expect(recovered.first { $0.name == "room-1" }?.history.last?.writeID == [1, 2, 3])
    }

    /// Room names are bytes (PROTOCOL.md §2): "doc:" + U+00E1 and "doc:a" + U+0301 are `==`
    /// as Swift Strings but two rooms, each with its own epoch, and both come back. Keyed by
    /// `String`, the second room's write looked like a write of the first at a wrong epoch,
    /// and the store refused to start.
    @Test func canonicallyEquivalentRoomNamesAreTwoRooms() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let names = ["doc:\u{E1}", "doc:a\u{301}"]
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            for (index, name) in names.enumerated() {
                let epoch = UInt64(7 + index)
                let ops: [SnapshotOperation] = [.appendSections([SnapshotElement(SnapshotIdentifier("s\(index)"))])]
                try store.reserve()
                store.append(
                    WriteRecord(
                        room: name, epoch: epoch, version: 1, writeID: [],
                        diffFrame: diffFrame(room: name, epoch: epoch, version: 1, ops: ops)))
            }
            try store.sync()
            try store.close()
        }
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        #expect(recovered.count == 2)
        for (index, name) in names.enumerated() {
            let room = recovered.first { $0.name.utf8.elementsEqual(name.utf8) }
            #expect(room?.epoch == UInt64(7 + index) && room?.version == 1)
        }
    }

    /// The process dies (no close, no sync of what came after the last sync): what was synced is
    /// there, what was only appended is not — it was never acknowledged.
    @Test func onlySyncedWritesSurviveAProcessCrash() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        var expected = Rooms()
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(25, to: store)
            expected = rooms
            // Appended, never synced: its ACK was never sent.
            try rooms.write("room-0", [.appendItems(["lost"], toSection: "s")], to: store)
            // The store is dropped without close(): like kill -9, the fds close, nothing more.
        }
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, expected)
        #expect(recovered.allSatisfy { !$0.snapshot.contains(item: "lost") })
    }

    @Test func writesContinueAfterRecovery() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        for _ in 0..<3 {
            let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            expectSameRooms(recovered, rooms)
            try rooms.writeMany(10, rooms: 2, to: store)
            try store.close()
        }
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
        #expect(recovered.map(\.version) == [15, 15])
    }

    /// Cut the newest segment at every byte of its last records in turn: the store opens with
    /// exactly the whole records before the cut, says so in the log, and trims the file.
    @Test func truncatedTailIsCutAtEveryByte() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (rooms, segment) = try writeClosedLog(12, rooms: 2, payloadBytes: 5, in: dir)
        let original = readFile(segment)
        let (starts, end) = recordOffsets(original)
        #expect(starts.count == 12 && end == original.count)
        let firstCut = starts[starts.count - 3]
        for cut in firstCut..<end {
            let copy = dir.path + "/cut"
            copyDirectory(dir.data, copy)
            let path = copy + "/" + lastPathComponent(segment)
            let cutBytes = Array(original[0..<cut])
            writeFile(path, cutBytes)
            let whole = starts.filter { s in starts.firstIndex(of: s).map { i in (i + 1 < starts.count ? starts[i + 1] : end) <= cut } ?? false }.count
            var expected = Rooms()
            for w in rooms.writes.prefix(whole) { expected.replay(w) }
            let lines = LogLines()
            let (store, recovered) = try DurableStore.open(options: smallOptions(copy), logger: lines.logger)
            expectSameRooms(recovered, expected)
            let boundary = whole < starts.count ? starts[whole] : end
            if cut > boundary && original[boundary..<cut].allSatisfy({ $0 == 0 }) {
                // Only the leading zero bytes of a length: indistinguishable from preallocated space.
                #expect(lines.contains("trimmed \(cut - boundary) zero bytes after the last record at byte \(boundary)"), "cut at \(cut): \(lines.all)")
            } else if cut > boundary {
                #expect(lines.contains("cut off a torn tail of \(cut - boundary) bytes at byte \(boundary)"), "cut at \(cut): \(lines.all)")
            } else {
                #expect(!lines.contains("torn tail"), "cut at \(cut)")
            }
            #expect(readFile(path).count == boundary, "the torn bytes are removed from the file")
            try store.close()
        }
    }

    /// A torn write of the next record into preallocated space: the sectors of it that reached
    /// the disk, then zeros (sectors never written). It is cut off.
    @Test func tornWriteIntoPreallocatedSpaceIsCut() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        var rooms = Rooms()
        let segment: String
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(5, to: store)
            segment = dir.data + "/" + store.activeSegmentName
            // Dropped without close: the preallocated zeros stay after the data.
        }
        let saved = dir.path + "/saved"
        copyDirectory(dir.data, saved)
        let original = readFile(segment)
        let (_, end) = recordOffsets(original)
        #expect(original.count > end + 2000, "the segment is preallocated")
        #expect(original[end...].allSatisfy { $0 == 0 })
        // A 1,500-byte record of which only the sectors up to the first, second or third 512-byte
        // boundary were written (header and all, when the first boundary falls inside it).
        var record: [UInt8] = []
        RecordFraming.append(payload: (0..<1500).map { UInt8($0 % 251) | 1 }, to: &record)
        let boundaries = Array(stride(from: (end / 512 + 1) * 512, to: end + record.count, by: 512))
        #expect(boundaries.count >= 2)
        for boundary in boundaries {
            copyDirectory(saved, dir.data)
            var bytes = original
            bytes.replaceSubrange(end..<boundary, with: record[0..<(boundary - end)])
            writeFile(segment, bytes)
            let lines = LogLines()
            let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: lines.logger)
            expectSameRooms(recovered, rooms)
            #expect(lines.contains("cut off a torn tail"), "written up to \(boundary): \(lines.all)")
            #expect(readFile(segment).count == end)
            try store.close()
        }
    }

    /// A bit flipped in the middle of the log, with good records after it: the store refuses
    /// to open, names the file and offset, and changes nothing on disk.
    @Test func damageFollowedByGoodRecordsRefusesToStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (rooms, segment) = try writeClosedLog(20, in: dir)
        let original = readFile(segment)
        let (starts, _) = recordOffsets(original)
        for (victim, byteInRecord) in [(10, 3), (10, 5), (10, 9), (10, 30), (0, 14), (18, 20)] {
            var bytes = original
            bytes[starts[victim] + byteInRecord] ^= 0x20
            expectRefusedUnchanged(dir, segment, bytes, offset: starts[victim], saying: ["good record follows"])
        }
        writeFile(segment, original)
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? store.close() }
        expectSameRooms(recovered, rooms)
    }

    /// A flipped byte in the last record, which lies whole in the file: a crash cannot do that
    /// (an unfinished write ends early or has zero sectors), and the record may have been
    /// acknowledged. The store refuses to open and changes nothing; the message says where.
    @Test func damagedLastCompleteRecordRefusesToStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (_, segment) = try writeClosedLog(6, in: dir)
        let original = readFile(segment)
        let (starts, end) = recordOffsets(original)
        #expect(end == original.count)
        for byte in [2, 5, 9, 20, end - starts[5] - 1] {
            var bytes = original
            bytes[starts[5] + byte] ^= 0x10
            expectRefusedUnchanged(dir, segment, bytes, offset: starts[5], saying: ["damaged afterwards", "will not start"])
        }
    }

    /// The last record cut short (its end past the end of the file, as after a crash in the
    /// middle of its write into a file that was not preallocated): the prefix is recovered.
    @Test func truncatedLastRecordRecoversThePrefix() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (rooms, segment) = try writeClosedLog(6, in: dir)
        let original = readFile(segment)
        let (starts, end) = recordOffsets(original)
        writeFile(segment, Array(original[0..<(end - 3)]))
        let lines = LogLines()
        let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: lines.logger)
        defer { try? store.close() }
        var expected = Rooms()
        for w in rooms.writes.prefix(5) { expected.replay(w) }
        expectSameRooms(recovered, expected)
        #expect(lines.contains("cut off a torn tail of \(end - 3 - starts[5]) bytes at byte \(starts[5])"), "\(lines.all)")
    }

    @Test func damagedSegmentHeaderRefusesToStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let segment: String
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            var rooms = Rooms()
            try rooms.writeMany(2, to: store)
            segment = dir.data + "/" + store.activeSegmentName
            try store.close()
        }
        var bytes = readFile(segment)
        bytes[9] ^= 0x80
        writeFile(segment, bytes)
        #expect(throws: StoreError.self) {
            _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        }
    }

    /// A write missing in the middle of a room's history (its record removed whole, checksums
    /// intact) is caught by the version check.
    @Test func aGapInVersionsRefusesToStart() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (_, segment) = try writeClosedLog(6, rooms: 1, in: dir)
        var bytes = readFile(segment)
        let (starts, _) = recordOffsets(bytes)
        bytes.removeSubrange(starts[2]..<starts[3])
        writeFile(segment, bytes)
        #expect {
            _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        } throws: { error in
            "\(error)".contains("writes are missing")
        }
    }

    @Test func aSecondStoreOnTheSameDirectoryIsRefused() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        #expect {
            _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        } throws: { error in
            if case .locked = error as? StoreError { return true }
            return false
        }
        try store.close()
        let (again, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        try again.close()
    }

    @Test func unfinishedTempFilesAreRemoved() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try store.close()
        }
        writeFile(dir.data + "/ckpt-0000000000000009.snap.tmp", [1, 2, 3])
        writeFile(dir.data + "/wal-0000000000000009.log.tmp", [4, 5])
        let lines = LogLines()
        let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: lines.logger)
        defer { try? store.close() }
        #expect(!fileNames(dir.data).contains { $0.hasSuffix(".tmp") })
        #expect(lines.contains("ckpt-0000000000000009.snap.tmp"))
    }

    @Test func aFileInPlaceOfTheDirectoryIsAClearError() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        writeFile(dir.data, [1])
        #expect {
            _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        } throws: { error in
            "\(error)".contains("not a directory")
        }
    }

    @Test func missingParentsAreCreated() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let nested = dir.path + "/a/b/c"
        let (store, _) = try DurableStore.open(options: smallOptions(nested), logger: LogLines().logger)
        try store.close()
        #expect(fileNames(nested).contains("LOCK"))
    }
}

extension Rooms {
    /// Replays a logged write as recovery would (for building expectations).
    mutating func replay(_ w: WriteRecord) {
        guard case .diff(_, _, _, let ops, _)? = try? FrameDecoder.decode(frame: w.diffFrame) else {
            Issue.record("bad DIFF frame in a test write")
            return
        }
        var r = rooms[w.room] ?? Room(epoch: w.epoch, version: 0, snapshot: RoomSnapshot())
        do { try r.snapshot.apply(ops, limits: .unlimited) } catch { Issue.record("\(error)") }
        r.version = w.version
        rooms[w.room] = r
        writes.append(w)
    }
}

func lastPathComponent(_ path: String) -> String { String(path.split(separator: "/").last ?? "") }

/// Writes `bytes` as the segment and expects the store to refuse to open with `.corrupt` at
/// `offset` of that file, its reason containing every one of `saying`, and to change nothing
/// on disk: no byte cut or repaired, no file created.
private func expectRefusedUnchanged(
    _ dir: TempDirectory, _ segment: String, _ bytes: [UInt8], offset expected: Int, saying: [String],
    sourceLocation: SourceLocation = #_sourceLocation
) {
    writeFile(segment, bytes)
    let before = fileNames(dir.data)
    #expect(sourceLocation: sourceLocation) {
        _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
    } throws: { error in
        guard case .corrupt(let path, let offset, let reason) = error as? StoreError else { return false }
        return path == segment && offset == expected && saying.allSatisfy(reason.contains)
    }
    #expect(readFile(segment) == bytes, "nothing is cut or repaired", sourceLocation: sourceLocation)
    #expect(fileNames(dir.data) == before, "no file is created", sourceLocation: sourceLocation)
}
