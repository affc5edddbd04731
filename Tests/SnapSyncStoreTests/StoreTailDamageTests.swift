// Damage at the end of the log that holds no write, and `snapsyncd repair` for the damage that
// does: bytes after the last record that are not a record the log wrote (a bit flipped in
// preallocated space, stale or junk blocks) are trimmed and saved aside with a warning, so such
// damage never keeps the daemon down; a damaged last record is still refused (it may have been
// acknowledged), with the refusal naming the repair, which saves it aside and truncates.

import Testing
import SnapSyncTestThreads
import SnapSyncTestSupport
import SnapSyncModel
import SnapSyncWire
@testable import SnapSyncStore
#if canImport(Glibc)
    import Glibc
#endif

@Suite(.unitTests) struct StoreTailDamageTests {
    /// A store written and dropped without close, so its newest segment ends in preallocated
    /// zeros; its directory is copied to `saved` to start each case from.
    static func preallocatedLog(in dir: TempDirectory) throws -> (rooms: Rooms, segment: String, saved: String) {
        var rooms = Rooms()
        let segment: String
        do {
            let (store, _) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
            try rooms.writeMany(5, to: store)
            segment = dir.data + "/" + store.activeSegmentName
        }
        let saved = dir.path + "/saved"
        copyDirectory(dir.data, saved)
        return (rooms, segment, saved)
    }

    static func savedAside(_ dir: TempDirectory) -> [String] {
        fileNames(dir.data).filter { $0.hasPrefix("damaged-") }
    }

    /// Every bit of the 12 bytes after the last record flipped in turn (where the next record's
    /// header would go), and a byte further on: each is trimmed with a warning, the rooms come
    /// back whole, and the byte is saved aside.
    @Test func aBitFlippedInSpaceTheLogNeverWroteIsTrimmed() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (rooms, segment, saved) = try Self.preallocatedLog(in: dir)
        let original = readFile(segment)
        let (_, end) = recordOffsets(original)
        #expect(original[end...].allSatisfy { $0 == 0 } && original.count > end + 4096)
        for bit in Array(0..<96) + [8 * 600 + 3] {
            copyDirectory(saved, dir.data)
            var bytes = original
            bytes[end + bit / 8] ^= 1 << UInt8(bit % 8)
            writeFile(segment, bytes)
            let lines = LogLines()
            let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: lines.logger)
            expectSameRooms(recovered, rooms)
            #expect(readFile(segment).count == end, "bit \(bit)")
            if bit < 96 {
                #expect(lines.contains("are not a record the log wrote"), "bit \(bit): \(lines.all)")
                let aside = Self.savedAside(dir)
                #expect(aside == ["damaged-\(lastPathComponent(segment))-at-\(end)"], "bit \(bit)")
                #expect(aside.first.map { readFile(dir.data + "/" + $0) } == Array(bytes[end..<end + bit / 8 + 1]), "bit \(bit)")
            } else {
                // Past the header, the twelve zero bytes read as the end of the log.
                #expect(Self.savedAside(dir).isEmpty)
            }
            try store.close()
        }
    }

    /// Junk after the last record (stale blocks a crash can expose): no length, no write.
    @Test func junkAfterTheLastRecordIsTrimmed() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (rooms, segment, saved) = try Self.preallocatedLog(in: dir)
        let original = readFile(segment)
        let (_, end) = recordOffsets(original)
        var random = SplitMix64(seed: 0x7a11)
        for length in [1, 11, 12, 13, 100, 511, 700, 3000] {
            copyDirectory(saved, dir.data)
            var bytes = original
            for offset in end..<end + length { bytes[offset] = UInt8(truncatingIfNeeded: random.next()) | 1 }
            writeFile(segment, bytes)
            let lines = LogLines()
            let (store, recovered) = try DurableStore.open(options: smallOptions(dir.data), logger: lines.logger)
            expectSameRooms(recovered, rooms)
            #expect(readFile(segment).count == end, "junk of \(length)")
            if length >= 12 {
                #expect(lines.contains("are not a record the log wrote"), "junk of \(length): \(lines.all)")
                #expect(Self.savedAside(dir).map { readFile(dir.data + "/" + $0) } == [Array(bytes[end..<end + length])])
            }
            try store.close()
        }
    }

    /// A damaged last record is refused, the refusal names `snapsyncd repair`; the repair saves
    /// the record aside, truncates before it, and the store opens with the writes before it.
    @Test func aDamagedLastRecordIsRefusedUntilRepaired() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let (rooms, segment) = try writeClosedLog(6, in: dir)
        let original = readFile(segment)
        let (starts, end) = recordOffsets(original)
        var bytes = original
        bytes[starts[5] + 20] ^= 0x10
        writeFile(segment, bytes)
        #expect {
            _ = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        } throws: { error in
            guard case .corrupt(_, starts[5], let reason) = error as? StoreError else { return false }
            return reason.contains("snapsyncd repair \(dir.data)")
        }
        #expect(readFile(segment) == bytes, "nothing changed by the refusal")

        var options = smallOptions(dir.data)
        options.repairsDamagedTail = true
        let lines = LogLines()
        let (store, recovered) = try DurableStore.open(options: options, logger: lines.logger)
        try store.close()
        var expected = Rooms()
        for write in rooms.writes.prefix(5) { expected.replay(write) }
        expectSameRooms(recovered, expected)
        #expect(lines.contains("repair:") && lines.contains("this write is lost"), "\(lines.all)")
        #expect(readFile(segment).count >= starts[5])
        #expect(Array(readFile(segment)[..<starts[5]]) == Array(original[..<starts[5]]))
        #expect(Self.savedAside(dir).map { readFile(dir.data + "/" + $0) } == [Array(bytes[starts[5]..<end])])

        // Then the daemon's own start takes the directory as it is.
        let (again, reopened) = try DurableStore.open(options: smallOptions(dir.data), logger: LogLines().logger)
        defer { try? again.close() }
        expectSameRooms(reopened, expected)
    }
}
