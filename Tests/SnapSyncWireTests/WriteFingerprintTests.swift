import Testing
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncWire

/// `WriteFingerprint` (Protocol/CLUSTER.md §3, "Write fingerprints"): the worked examples there,
/// computed independently (Python's hashlib over the bytes CLUSTER.md lists), and what tells two
/// writes apart.
@Suite(.unitTests) struct WriteFingerprintTests {
    static let eggs = SnapshotOperation.appendItems([SnapshotElement("eggs", payload: "Buy eggs")], toSection: "today")

    @Test func theWorkedExamplesOfClusterMD() throws {
        // Left holding what was hashed: the MUTATE's bytes of CLUSTER.md.
        var scratch: [UInt8] = [0xff]
        // PROTOCOL.md §11.8's MUTATE: expected_version 3, append `eggs` to `today`.
        #expect(WriteFingerprint.mutate([Self.eggs], expectedVersion: 3, scratch: &scratch) == 0xc809_0e04_a466_da8c)
        #expect(scratch == [0x12, 1, 3, 1, 0x10, 1, 5] + Array("today".utf8) + [1, 4] + Array("eggs".utf8) + [8] + Array("Buy eggs".utf8))
        // A REPLACE of the empty snapshot, without compare-and-set.
        #expect(WriteFingerprint.replace(digest: RoomSnapshot().digest, expectedVersion: nil, scratch: &scratch) == 0x1f5f_3003_fbbb_221c)
        // A REPLACE_SECTION of `today` with the one item `eggs`, without compare-and-set.
        let items = try SectionSnapshot([SnapshotElement("eggs", payload: "Buy eggs")])
        #expect(WriteFingerprint.replaceSection("today", items, expectedVersion: nil, scratch: &scratch) == 0x35b5_1874_1bd1_f101)
    }

    /// Each part of the request counts: its type, the compare-and-set and the content.
    @Test func anyDifferenceInTheRequestChangesIt() throws {
        var scratch: [UInt8] = []
        let base = WriteFingerprint.mutate([Self.eggs], expectedVersion: 3, scratch: &scratch)
        #expect(WriteFingerprint.mutate([Self.eggs], expectedVersion: 3, scratch: &scratch) == base)
        #expect(WriteFingerprint.mutate([Self.eggs], expectedVersion: nil, scratch: &scratch) != base)
        #expect(WriteFingerprint.mutate([Self.eggs], expectedVersion: 4, scratch: &scratch) != base)
        #expect(WriteFingerprint.mutate([Self.eggs, .deleteItems(["eggs"])], expectedVersion: 3, scratch: &scratch) != base)
        #expect(WriteFingerprint.mutate([], expectedVersion: 3, scratch: &scratch) != base)
        let items = try SectionSnapshot([SnapshotElement("eggs", payload: "Buy eggs")])
        let other = try SectionSnapshot([SnapshotElement("eggs", payload: "Buy two eggs")])
        #expect(
            WriteFingerprint.replaceSection("today", items, expectedVersion: 3, scratch: &scratch)
                != WriteFingerprint.replaceSection("today", other, expectedVersion: 3, scratch: &scratch))
        #expect(
            WriteFingerprint.replaceSection("today", items, expectedVersion: 3, scratch: &scratch)
                != WriteFingerprint.replaceSection("later", items, expectedVersion: 3, scratch: &scratch))
        let snapshot = try RoomSnapshot([(section: SnapshotElement("today", payload: ""), items: [SnapshotElement("eggs", payload: "Buy eggs")])])
        #expect(
            WriteFingerprint.replace(digest: snapshot.digest, expectedVersion: 3, scratch: &scratch)
                != WriteFingerprint.replace(digest: RoomSnapshot().digest, expectedVersion: 3, scratch: &scratch))
    }
}
