import Testing
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncWire

/// `WriteFingerprint` (Protocol/CLUSTER.md §3, "Write fingerprints"): the worked examples there,
/// computed independently (Python's hashlib over the bytes CLUSTER.md lists), and what tells two
/// writes apart.
@Suite(.ownThread("unit tests")) struct WriteFingerprintTests {
    static let eggs = SnapshotOperation.appendItems([SnapshotElement("eggs", payload: "Buy eggs")], toSection: "today")

    @Test func theWorkedExamplesOfClusterMD() throws {
        // PROTOCOL.md §11.8's MUTATE: expected_version 3, append `eggs` to `today`.
        #expect(WriteFingerprint.mutate([Self.eggs], expectedVersion: 3) == 0xc809_0e04_a466_da8c)
        // A REPLACE of the empty snapshot, without compare-and-set.
        #expect(WriteFingerprint.replace(digest: Snapshot().digest, expectedVersion: nil) == 0x1f5f_3003_fbbb_221c)
        // A REPLACE_SECTION of `today` with the one item `eggs`, without compare-and-set.
        let items = try SectionSnapshot([SnapshotElement("eggs", payload: "Buy eggs")])
        #expect(WriteFingerprint.replaceSection("today", items, expectedVersion: nil) == 0x35b5_1874_1bd1_f101)
    }

    /// Each part of the request counts: its type, the compare-and-set and the content.
    @Test func anyDifferenceInTheRequestChangesIt() throws {
        let base = WriteFingerprint.mutate([Self.eggs], expectedVersion: 3)
        #expect(WriteFingerprint.mutate([Self.eggs], expectedVersion: 3) == base)
        #expect(WriteFingerprint.mutate([Self.eggs], expectedVersion: nil) != base)
        #expect(WriteFingerprint.mutate([Self.eggs], expectedVersion: 4) != base)
        #expect(WriteFingerprint.mutate([Self.eggs, .deleteItems(["eggs"])], expectedVersion: 3) != base)
        #expect(WriteFingerprint.mutate([], expectedVersion: 3) != base)
        let items = try SectionSnapshot([SnapshotElement("eggs", payload: "Buy eggs")])
        let other = try SectionSnapshot([SnapshotElement("eggs", payload: "Buy two eggs")])
        #expect(WriteFingerprint.replaceSection("today", items, expectedVersion: 3) != WriteFingerprint.replaceSection("today", other, expectedVersion: 3))
        #expect(WriteFingerprint.replaceSection("today", items, expectedVersion: 3) != WriteFingerprint.replaceSection("later", items, expectedVersion: 3))
        let snapshot = try Snapshot([(section: SnapshotElement("today", payload: ""), items: [SnapshotElement("eggs", payload: "Buy eggs")])])
        #expect(
            WriteFingerprint.replace(digest: snapshot.digest, expectedVersion: 3) != WriteFingerprint.replace(digest: Snapshot().digest, expectedVersion: 3))
    }
}
