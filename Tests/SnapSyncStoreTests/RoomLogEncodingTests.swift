import Testing
import SnapSyncTestThreads
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Cluster mode's record bytes (#20): the store's payload encodings (docs/persistence.md), so a
// record on the log and one in the local WAL have one shape.

@Suite(.ownThread("unit tests")) struct RoomLogEncodingTests {
    @Test func aWriteRecordRoundTripsAsTheStoresWritePayload() throws {
        let frame = FrameEncoder().encode(
            .diff(room: "todo", epoch: 7, version: 3, ops: [.appendSections([SnapshotElement(Identifier("s"), payload: Payload("p"))])]))
        let record = WriteRecord(room: "todo", epoch: 7, version: 3, writeId: [1, 2, 3], diffFrame: frame)
        let bytes = RoomLogEntry.write(record).encode(room: "todo")
        // kind 0x01, string "todo", varint 7, varint 3, bytes write_id, bytes frame.
        #expect(Array(bytes.prefix(12)) == [0x01, 4, 0x74, 0x6f, 0x64, 0x6f, 7, 3, 3, 1, 2, 3])
        #expect(Array(bytes.suffix(frame.count)) == frame && bytes.count == 12 + 1 + frame.count)
        #expect(try RoomLogEntry(payload: bytes) == .write(record))
    }

    @Test func aTombstoneRoundTripsNamingItsRoom() throws {
        let bytes = RoomLogEntry.tombstone(epoch: 300, version: 2).encode(room: "todo")
        #expect(bytes == [0x04, 4, 0x74, 0x6f, 0x64, 0x6f, 0xac, 0x02, 2])
        #expect(try RoomLogEntry(payload: bytes) == .tombstone(epoch: 300, version: 2))
    }

    @Test func otherKindsAndDamagedRecordsAreRefusedNamingTheProblem() {
        for (bytes, reason) in [
            ([UInt8](), "record kind none is not a write (1) or a tombstone (4)"),
            ([0x05, 0, 1, 1, 60], "record kind 5 is not a write (1) or a tombstone (4)"),
            ([0x04, 0, 1], "version runs past the end"),
            ([0x04, 0, 1, 2, 9], "1 bytes left after the record's fields"),
        ] {
            #expect(throws: StoreError.corrupt(path: "room log record", offset: 0, reason: reason)) { try RoomLogEntry(payload: bytes) }
        }
    }
}
