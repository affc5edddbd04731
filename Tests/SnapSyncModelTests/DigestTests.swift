// Canonical encoding (Protocol/PROTOCOL.md §4), its running size, and the SHA-256 digest.

import Testing
import SnapSyncTestThreads
@testable import SnapSyncModel

@Suite(.unitTests) struct DigestTests {
    /// main ("M"): a = "hello", b;  side: c = 200 × "x" (a two-byte length varint, C8 01).
    static func vectorSnapshot() -> RoomSnapshot {
        try! RoomSnapshot([
            (SnapshotElement("main", "M"), [SnapshotElement("a", "hello"), SnapshotElement("b")]),
            (SnapshotElement("side"), [SnapshotElement(SnapshotIdentifier("c"), payload: SnapshotPayload(String(repeating: "x", count: 200)))]),
        ])
    }

    @Test func encodingMatchesTheSpecByteForByte() {
        var bytes: [UInt8] = []
        Self.vectorSnapshot().encodeCanonical(into: &bytes)
        let expectedHead: [UInt8] = [
            0x02,  // 2 sections
            0x04, 0x6D, 0x61, 0x69, 0x6E,  // id "main"
            0x01, 0x4D,  // payload "M"
            0x02,  // 2 items
            0x01, 0x61, 0x05, 0x68, 0x65, 0x6C, 0x6C, 0x6F,  // a = "hello"
            0x01, 0x62, 0x00,  // b, no payload
            0x04, 0x73, 0x69, 0x64, 0x65,  // id "side"
            0x00,  // no payload
            0x01,  // 1 item
            0x01, 0x63, 0xC8, 0x01,  // c, payload of 200 bytes (minimal varint)
        ]
        #expect(Array(bytes.prefix(expectedHead.count)) == expectedHead)
        #expect(bytes.count == expectedHead.count + 200)
        #expect(bytes.suffix(200).allSatisfy { $0 == UInt8(ascii: "x") })
        #expect(Self.vectorSnapshot().canonicalByteCount == bytes.count)
    }

    @Test func encodingAppendsAfterExistingBytes() {
        var bytes: [UInt8] = [0xAA, 0xBB]
        Self.vectorSnapshot().encodeCanonical(into: &bytes)
        #expect(bytes.prefix(2) == [0xAA, 0xBB])
        #expect(bytes.dropFirst(2).elementsEqual(Self.vectorSnapshot().canonicalEncoding))
    }

    @Test func emptySnapshotEncodesAsOneZeroByte() {
        #expect(RoomSnapshot().canonicalEncoding == [0x00])
        #expect(RoomSnapshot().canonicalByteCount == 1)
    }

    // Computed independently with:
    //   python3 -c 'import hashlib; v=lambda n: bytes([n]) if n<128 else bytes([n&127|128])+v(n>>7);
    //     b=lambda x: v(len(x))+x;
    //     e=v(2)+b(b"main")+b(b"M")+v(2)+b(b"a")+b(b"hello")+b(b"b")+b(b"")
    //       +b(b"side")+b(b"")+v(1)+b(b"c")+b(b"x"*200);
    //     print(len(e), hashlib.sha256(e).hexdigest())'
    //   → 231 8b0226affd38d4ccd814af16cf5363da4ed544ad095cbbc152b971ff21bd1419
    @Test func digestMatchesAHandComputedVector() {
        let digest = Self.vectorSnapshot().digest
        #expect(digest.description == "8b0226affd38d4ccd814af16cf5363da4ed544ad095cbbc152b971ff21bd1419")
        #expect(digest.bytes.count == 32)
        #expect(Self.vectorSnapshot().canonicalByteCount == 231)
    }

    // python3 -c 'import hashlib; print(hashlib.sha256(b"\x00").hexdigest())'
    @Test func emptySnapshotDigest() {
        #expect(RoomSnapshot().digest.description == "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d")
    }

    @Test func digestDependsOnOrderAndPayloadButNotOnStorage() throws {
        let a = snapshot([("s", ["1", "2", "3"])])
        let reordered = snapshot([("s", ["1", "3", "2"])])
        #expect(a.digest != reordered.digest)
        var reloaded = a
        try reloaded.reloadItems([SnapshotElement("2", "new")])
        #expect(a.digest != reloaded.digest)
        // Same content reached through different slot layouts: same digest.
        var churned = a
        try churned.apply([.deleteItems(["1", "2"]), .insertItems(["1", "2"], .before("3"))])
        #expect(churned == a)
        #expect(churned.digest == a.digest)
        #expect(churned.canonicalEncoding == a.canonicalEncoding)
    }

    /// The streaming hasher must agree with hashing the materialized encoding, including across
    /// its 64 KiB chunk boundary and for fields larger than a chunk.
    @Test func streamingDigestAgreesWithEncodingAcrossChunks() throws {
        var s = RoomSnapshot()
        try s.appendSections([SnapshotElement("big", "")], limits: .unlimited)
        var items: [SnapshotElement] = []
        for n in 0..<5000 {
            items.append(SnapshotElement(SnapshotIdentifier(uint64: UInt64(n)), payload: SnapshotPayload(Array(repeating: UInt8(n & 0xFF), count: n % 37))))
        }
        items.append(SnapshotElement(SnapshotIdentifier("huge"), payload: SnapshotPayload(Array(repeating: 7, count: 100_000))))
        items.append(SnapshotElement(SnapshotIdentifier("half"), payload: SnapshotPayload(Array(repeating: 9, count: 40_000))))
        try s.appendItems(items, toSection: "big", limits: .unlimited)
        let encoding = s.canonicalEncoding
        #expect(encoding.count == s.canonicalByteCount)
        // One `update` over the whole materialized encoding, versus the chunked walk.
        #expect(s.digest == SnapshotDigest(hashing: encoding))
        #expect(s.digest.description == SnapshotDigest(hashing: encoding).description)
    }

    @Test func digestDescriptionIsLowercaseHex() {
        let d = SnapshotDigest(bytes: Array(0..<32))
        #expect(d.description == "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
    }

    @Test func varintSizesAreMinimal() {
        for (value, size) in [(0, 1), (1, 1), (127, 1), (128, 2), (16383, 2), (16384, 3), (Int.max, 9)] {
            #expect(RoomSnapshot.varintSize(value) == size)
        }
        #expect(RoomSnapshot.varintSize(-1) == 10)  // UInt64.max: the 10-byte maximum
    }
}
