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
            .diff(room: "todo", epoch: 7, version: 3, ops: [.appendSections([SnapshotElement(SnapshotIdentifier("s"), payload: SnapshotPayload("p"))])]))
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
            ([UInt8](), "record kind none is not a write (1, 6 or 7) or a tombstone (4 or 8)"),
            ([0x05, 0, 1, 1, 60], "record kind 5 is not a write (1, 6 or 7) or a tombstone (4 or 8)"),
            // A fingerprint must go with a write id.
            ([0x06, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0], "a fingerprint without a write_id"),
            ([0x06, 0, 1, 1, 1, 0xaa, 0, 0, 0, 0], "fingerprint runs past the end"),
            ([0x04, 0, 1], "version runs past the end"),
            ([0x04, 0, 1, 2, 9], "1 bytes left after the record's fields"),
        ] {
            #expect(throws: StoreError.corrupt(path: "room log record", offset: 0, reason: reason)) { try RoomLogEntry(payload: bytes) }
        }
    }

    /// The worked example of CLUSTER.md §3 (computed there with Python's hashlib): two writes of
    /// lobby, epoch 1, versions 1 and 2, the first with write id ab cd and its fingerprint, the
    /// second anonymous; then the tombstone of version 2.
    @Test func chainedRecordsMatchTheSpecsExample() throws {
        let start = RoomChain.start(epoch: 1)
        #expect(start.description == "b365380cb163b003cbe971a16f1439556d27067b5314c1960d0f62e8fe06851c")
        let first = WriteRecord(room: "lobby", epoch: 1, version: 1, writeID: [0xab, 0xcd], fingerprint: 0xc809_0e04_a466_da8c, diffFrame: [0xde, 0xad, 0xbe])
        let second = WriteRecord(room: "lobby", epoch: 1, version: 2, writeID: [], diffFrame: [0xca, 0xfe])
        let writes = ChainedWrites(records: [first, second], after: start)
        #expect(writes.chainAfter.description == "fe513c174c1b3f3b0a60231fced8fe2a16ba39bcbc52cfa2e9eb3997a665e161")
        let bytes = RoomLogEntry.writes(writes).encode(room: "lobby")
        #expect(
            hex(bytes)
                == "07056c6f6262790101b365380cb163b003cbe971a16f1439556d27067b5314c1960d0f62e8fe06851c0202abcd01c8090e04a466da8c03deadbe000002cafefe513c174c1b3f3b0a60231fced8fe2a16ba39bcbc52cfa2e9eb3997a665e161"
        )
        #expect(try RoomLogEntry(payload: bytes) == .writes(writes))
        let tombstone = RoomLogEntry.chainedTombstone(epoch: 1, version: 2, chain: writes.chainAfter)
        let tombstoneBytes = tombstone.encode(room: "lobby")
        #expect(hex(tombstoneBytes) == "08056c6f6262790102fe513c174c1b3f3b0a60231fced8fe2a16ba39bcbc52cfa2e9eb3997a665e161")
        #expect(try RoomLogEntry(payload: tombstoneBytes) == tombstone)
    }

    @Test func damagedChainedRecordsAreRefusedNamingTheField() {
        let chain = [UInt8](repeating: 7, count: 32)
        let head: [UInt8] = [0x07, 1, 0x72, 1, 1] + chain
        let short = Array(chain.prefix(31))
        var cases: [([UInt8], String)] = []
        cases.append((head + [0] + chain, "count is 0"))
        cases.append((head + [1, 0, 2], "fingerprint presence is 2, not 0 or 1"))
        cases.append((head + [1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 0] + chain, "a fingerprint without a write_id"))
        cases.append((head + [1, 0, 0, 1, 0xaa] + short, "chain_after runs past the end"))
        cases.append((head + [1, 0, 0, 1, 0xaa] + chain + [0], "1 bytes left after the record's fields"))
        cases.append(([0x07, 1, 0x72, 1, 1] + Array(chain.prefix(5)), "chain_before runs past the end"))
        cases.append(([0x08, 1, 0x72, 1, 1] + short, "chain runs past the end"))
        for (bytes, reason) in cases {
            #expect(throws: StoreError.corrupt(path: "room log record", offset: 0, reason: reason)) { try RoomLogEntry(payload: bytes) }
        }
    }

    /// A checkpoint value carries the chain after "SNAPCHN1"; one saved before values carried
    /// it still reads, with no chain, even at sequence 83 (whose varint is "S").
    @Test func aCheckpointValueCarriesTheChainAndOldValuesStillRead() throws {
        let image = RoomImage(room: "r", epoch: 1, version: 0, snapshot: RoomSnapshot())
        let chained = RoomLogCheckpoint(image: image, history: [], sequence: 83, chain: .start(epoch: 1))
        let value = chained.encode()
        #expect(Array(value.prefix(8)) == Array("SNAPCHN1".utf8))
        let read = try RoomLogCheckpoint(value: value, key: "72")
        #expect(read.chain == .start(epoch: 1) && read.sequence == 83 && read.image.version == 0)
        let old = RoomLogCheckpoint(image: image, history: [], sequence: 83, chain: nil).encode()
        #expect(old.first == 83)
        let readOld = try RoomLogCheckpoint(value: old, key: "72")
        #expect(readOld.chain == nil && readOld.sequence == 83)
    }

    /// The chain before the history travels in the embedded checkpoint file (header kind 0x09),
    /// and dropping the oldest records (a value over the servers' max_payload) advances it.
    @Test func aCheckpointValueCarriesTheChainBeforeItsHistory() throws {
        let epoch: UInt64 = 9
        var snapshot = RoomSnapshot()
        var chain = RoomChain.start(epoch: epoch)
        var history: [WriteRecord] = []
        var chains = [chain]
        for version in 1...4 as ClosedRange<UInt64> {
            let ops: [SnapshotOperation] =
                version == 1 ? [.appendSections([SnapshotElement("s")])] : [.appendItems([SnapshotElement("i\(version)")], toSection: "s")]
            try snapshot.apply(ops, limits: .unlimited)
            let frame = FrameEncoder().encode(.diff(room: "r", epoch: epoch, version: version, ops: ops))
            chain = chain.next(frame: frame)
            chains.append(chain)
            history.append(WriteRecord(room: "r", epoch: epoch, version: version, writeID: [], fingerprint: nil, diffFrame: frame))
        }
        let image = RoomImage(room: "r", epoch: epoch, version: 4, snapshot: snapshot, diffFrames: history.map(\.diffFrame), chain: chains[0])
        let checkpoint = RoomLogCheckpoint(image: image, history: history, sequence: 12, chain: chains[4])
        let read = try RoomLogCheckpoint(value: checkpoint.encode(), key: "72")
        #expect(read.image.chain == chains[0] && read.chain == chains[4] && read.history.count == 4)
        let cut = checkpoint.droppingOldest(3)
        #expect(cut.image.chain == chains[3] && cut.history.map(\.version) == [4] && cut.image.diffFrames.count == 1)
        let readCut = try RoomLogCheckpoint(value: cut.encode(), key: "72")
        #expect(readCut.image.chain == chains[3] && readCut.chain == chains[4] && readCut.history.map(\.version) == [4])
    }

    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0 >> 4, radix: 16) + String($0 & 0xf, radix: 16) }.joined()
    }
}
