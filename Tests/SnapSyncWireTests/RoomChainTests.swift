import SnapSyncModel
import SnapSyncWire
import Testing

/// The room's chain on the wire (PROTOCOL.md §9, "The room's chain"; §11.11, §11.13): the spec's
/// example, byte for byte, and the version 3 layouts against the older ones.
struct RoomChainTests {
    static func hex(_ text: String) -> [UInt8] {
        text.split(separator: " ").map { UInt8($0, radix: 16)! }
    }

    static let epoch: UInt64 = 2_246_800_662_264_969_608
    static let chain0 = hex("3e d7 b8 af 33 34 41 52 29 42 db 1e 58 6f d9 bd d2 e8 da 26 f7 41 d0 a6 d4 76 bd dc f7 0d f8 25")
    static let chain1 = hex("89 f3 56 fc 10 c0 e4 bd e1 0c e9 cc 79 d8 0a d5 43 24 11 02 9d d7 54 a1 a5 c8 d5 6e c4 42 ae 9f")
    static let diffV2 = hex("00 00 00 1f 22 04 74 6f 64 6f 88 f3 a9 db c5 a9 8f 97 1f 01 01 01 01 05 74 6f 64 61 79 05 54 6f 64 61 79")
    static let ops: [SnapshotOperation] = [.appendSections([SnapshotElement("today", payload: SnapshotPayload(Array("Today".utf8)))])]

    @Test func theSpecsExampleComputesAndEncodes() throws {
        #expect(RoomChain.start(epoch: Self.epoch).bytes == Self.chain0)
        #expect(FrameEncoder().encode(.diff(room: "todo", epoch: Self.epoch, version: 1, ops: Self.ops)) == Self.diffV2)
        let chain1 = RoomChain.start(epoch: Self.epoch).next(frame: Self.diffV2)
        #expect(chain1.bytes == Self.chain1)
        let diffV3 = FrameEncoder().encode(.diff(room: "todo", epoch: Self.epoch, version: 1, ops: Self.ops, chain: chain1))
        #expect(diffV3 == [0, 0, 0, 0x3f] + Self.diffV2[4...] + Self.chain1)
        #expect(diffV3 == Self.diffV2.withUnsafeBytes { RoomChain.chainedDiffFrame($0, chain: chain1) })
    }

    @Test func version3ReadsTheChainAndOlderVersionsDoNot() throws {
        let chain = try #require(RoomChain(bytes: Self.chain1))
        let diffV3 = FrameEncoder().encode(.diff(room: "todo", epoch: Self.epoch, version: 1, ops: Self.ops, chain: chain))
        let decoded = try FrameDecoder.decode(frame: diffV3, accepting: .server, version: 3)
        #expect(decoded == .diff(room: "todo", epoch: Self.epoch, version: 1, ops: Self.ops, chain: chain))
        // The chain is 32 trailing bytes to a version 2 reader, and a version 3 reader needs it.
        #expect(throws: WireError.self) { try FrameDecoder.decode(frame: diffV3, accepting: .server, version: 2) }
        #expect(throws: WireError.self) { try FrameDecoder.decode(frame: Self.diffV2, accepting: .server, version: 3) }
        #expect(
            try FrameDecoder.decode(frame: Self.diffV2, accepting: .server, version: 2) == .diff(room: "todo", epoch: Self.epoch, version: 1, ops: Self.ops))

        // SNAPSHOT: the chain sits before the snapshot field, whose levels part runs to the end.
        let snapshot = try RoomSnapshot([
            (
                SnapshotElement("today", payload: SnapshotPayload(Array("Today".utf8))),
                [SnapshotElement("milk", payload: SnapshotPayload(Array("Buy milk".utf8)))]
            )
        ])
        let message = Message.snapshot(
            requestID: 1, room: "todo", epoch: Self.epoch, version: 1, reason: .initial, digest: snapshot.digest, snapshot: snapshot, chain: chain)
        let frame = FrameEncoder().encode(message)
        #expect(try FrameDecoder.decode(frame: frame, accepting: .server, version: 3) == message)
        #expect(throws: WireError.self) { try FrameDecoder.decode(frame: frame, accepting: .server, version: 2) }
        // Every byte of the chain cut off: truncated, at each length.
        for cut in 1...RoomChain.byteCount {
            var truncated = Array(diffV3.dropLast(cut))
            let length = UInt32(truncated.count - 4)
            for index in 0..<4 { truncated[index] = UInt8(truncatingIfNeeded: length >> (24 - 8 * UInt32(index))) }
            #expect(throws: WireError.self) { try FrameDecoder.decode(frame: truncated, accepting: .server, version: 3) }
        }
    }
}
