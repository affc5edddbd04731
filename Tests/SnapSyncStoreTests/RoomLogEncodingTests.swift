import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Cluster mode's record bytes: the store's payload encodings (docs/persistence.md), so a
// record on the log and one in the local WAL have one shape.

@Suite(.unitTests) struct RoomLogEncodingTests {
    @Test func aWriteRecordRoundTripsAsTheStoresWritePayload() throws {
        let frame = FrameEncoder().encode(
            .diff(room: "todo", epoch: 7, version: 3, ops: [.appendSections([SnapshotElement(Identifier("s"), payload: Payload("p"))])]))
        let record = WriteRecord(room: "todo", epoch: 7, version: 3, writeID: [1, 2, 3], diffFrame: frame)
        let bytes = RoomLogEntry.write(record).encode(room: "todo")
        // kind 0x01, string "todo", varint 7, varint 3, bytes write_id, bytes frame.
        #expect(Array(bytes.prefix(12)) == [0x01, 4, 0x74, 0x6f, 0x64, 0x6f, 7, 3, 3, 1, 2, 3])
        #expect(Array(bytes.suffix(frame.count)) == frame && bytes.count == 12 + 1 + frame.count)
        #expect(try RoomLogEntry(payload: bytes) == .write(record))
    }

    /// A write id with its fingerprint is kind 0x06: the fingerprint (big-endian) comes after the
    /// write id. Without a write id there is no fingerprint to keep, and the record is kind 0x01;
    /// a kind 0x01 record with a write id (written before fingerprints were kept) has none.
    @Test func aWriteRecordKeepsItsFingerprintAsKind6() throws {
        let frame: [UInt8] = [0xde, 0xad, 0xbe]
        let record = WriteRecord(room: "lobby", epoch: 1, version: 1, writeID: [0xab, 0xcd], fingerprint: 0xc809_0e04_a466_da8c, diffFrame: frame)
        let bytes = RoomLogEntry.write(record).encode(room: "lobby")
        // The worked example of CLUSTER.md §3.
        #expect(bytes == [0x06, 5, 0x6c, 0x6f, 0x62, 0x62, 0x79, 1, 1, 2, 0xab, 0xcd, 0xc8, 0x09, 0x0e, 0x04, 0xa4, 0x66, 0xda, 0x8c, 3, 0xde, 0xad, 0xbe])
        #expect(try RoomLogEntry(payload: bytes) == .write(record))

        let anonymous = WriteRecord(room: "lobby", epoch: 1, version: 1, writeID: [], fingerprint: 7, diffFrame: frame)
        #expect(anonymous.fingerprint == nil)
        #expect(RoomLogEntry.write(anonymous).encode(room: "lobby").first == 0x01)

        let legacy: [UInt8] = [0x01, 5, 0x6c, 0x6f, 0x62, 0x62, 0x79, 1, 1, 2, 0xab, 0xcd, 3, 0xde, 0xad, 0xbe]
        guard case .write(let old) = try RoomLogEntry(payload: legacy) else {
            Issue.record("not a write")
            return
        }
        #expect(old.writeID == [0xab, 0xcd] && old.fingerprint == nil && old.diffFrame == frame)
    }

    @Test func aTombstoneRoundTripsNamingItsRoom() throws {
        let bytes = RoomLogEntry.tombstone(epoch: 300, version: 2).encode(room: "todo")
        #expect(bytes == [0x04, 4, 0x74, 0x6f, 0x64, 0x6f, 0xac, 0x02, 2])
        #expect(try RoomLogEntry(payload: bytes) == .tombstone(epoch: 300, version: 2))
    }

    @Test func otherKindsAndDamagedRecordsAreRefusedNamingTheProblem() {
        for (bytes, reason) in [
            ([UInt8](), "record kind none is not a write (1 or 6) or a tombstone (4)"),
            ([0x05, 0, 1, 1, 60], "record kind 5 is not a write (1 or 6) or a tombstone (4)"),
            // A fingerprint must go with a write id.
            ([0x06, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0], "a fingerprint without a write_id"),
            ([0x06, 0, 1, 1, 1, 0xaa, 0, 0, 0, 0], "fingerprint runs past the end"),
            ([0x04, 0, 1], "version runs past the end"),
            ([0x04, 0, 1, 2, 9], "1 bytes left after the record's fields"),
        ] {
            #expect(throws: StoreError.corrupt(path: "room log record", offset: 0, reason: reason)) { try RoomLogEntry(payload: bytes) }
        }
    }
}
