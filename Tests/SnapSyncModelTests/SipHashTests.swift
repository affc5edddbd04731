import SnapSyncTestSupport
import Testing
import SnapSyncTestThreads

@testable import SnapSyncModel

/// The item index's tag function against the SipHash reference implementation's vectors
/// (SipHash-2-4, key 00 01 … 0f, the message 00 01 … cut at lengths from 0 to 63, around each
/// 8-byte block's end; the paper's Appendix A is length 15). SipHash-1-3, what the index uses,
/// is the same code with fewer rounds.
@Suite(.unitTests) struct SipHashTests {
    static let key: (UInt64, UInt64) = (0x0706_0504_0302_0100, 0x0F0E_0D0C_0B0A_0908)
    static let vectors: [Int: UInt64] = [
        0: 0x726f_db47_dd0e_0e31, 1: 0x74f8_39c5_93dc_67fd, 2: 0x0d6c_8009_d9a9_4f5a,
        7: 0xab02_00f5_8b01_d137, 8: 0x93f5_f579_9a93_2462, 9: 0x9e00_82df_0ba9_e4b0,
        15: 0xa129_ca61_49be_45e5, 16: 0x3f2a_cc7f_57c2_9bdb, 31: 0x32d8_92fa_d841_c342,
        32: 0x7127_512f_72f2_7cce, 63: 0x958a_324c_eb06_4572,
    ]

    @Test(arguments: vectors.keys.sorted())
    func matchesTheReferenceVectors(length: Int) {
        let message = (0..<length).map { UInt8($0) }
        let hash = message.withUnsafeBytes { SipHash.hash($0, key: Self.key, compressionRounds: 2, finalizationRounds: 4) }
        #expect(hash == Self.vectors[length])
    }

    @Test func tagsDependOnEveryByteAndTheLength() {
        // A tag is SipHash-1-3 under the process key, the same for the same bytes wherever they are.
        let id: [UInt8] = Array("card-42".utf8)
        let tag = id.withUnsafeBytes { SlotIndex.tag(of: $0) }
        #expect(tag == SlotIndex.tag(of: SnapshotIdentifier(id)))
        #expect(tag == UInt32(truncatingIfNeeded: id.withUnsafeBytes { SipHash.hash($0, key: SipHash.key, compressionRounds: 1, finalizationRounds: 3) }))
        var tags: Set<UInt32> = [tag]
        for k in id.indices {
            var changed = id
            changed[k] ^= 1
            tags.insert(changed.withUnsafeBytes { SlotIndex.tag(of: $0) })
        }
        tags.insert((id + [0]).withUnsafeBytes { SlotIndex.tag(of: $0) })
        #expect(tags.count == id.count + 2)
    }
}
