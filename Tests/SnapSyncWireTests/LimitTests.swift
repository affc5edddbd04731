import Testing
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncWire

/// Each limit at 0, 1, max and max + 1, with the default limits (the vectors' limits.json does the
/// same with small ones).
@Suite(.unitTests) struct LimitTests {
    let encoder = FrameEncoder()

    func decode(_ message: Message, limits: WireLimits = .default) throws(WireError) -> Message {
        try FrameDecoder.decode(frame: encoder.encode(message), limits: limits)
    }

    func code(_ message: Message, limits: WireLimits = .default) -> ErrorCode? {
        do {
            _ = try decode(message, limits: limits)
            return nil
        } catch {
            return error.code
        }
    }

    /// A frame whose body is exactly `length` bytes: a MUTATE whose payload fills it (MUTATE
    /// content is not limit-checked by the decoder).
    func frame(bodyLength length: Int) -> [UInt8] {
        var n = max(0, length - 20)
        while true {
            let f = encoder.encode(
                .mutate(
                    requestID: 1, room: "r", expectedVersion: nil, writeID: [],
                    ops: [.updateItems([SnapshotElement("a", payload: SnapshotPayload([UInt8](repeating: 0x70, count: n)))], .reload)]))
            if f.count - 4 == length { return f }
            precondition(f.count - 4 < length, "cannot hit \(length)")
            n += 1
        }
    }

    @Test(arguments: [0, 1, 16 * 1024 * 1024, 16 * 1024 * 1024 + 1])
    func maxFrameBytes(length: Int) throws {
        let max = WireLimits.default.maxFrameBytes
        var decoder = FrameDecoder()
        switch length {
        case 0:
            decoder.append([0, 0, 0, 0] as [UInt8])
            #expect(throws: WireError(.malformedFrame, "frame body length 0 (at least the type byte is required)")) { try decoder.nextMessage() }
        case 1:
            decoder.append([0, 0, 0, 1, 0x13] as [UInt8])  // STATS with its request id missing
            #expect { try decoder.nextMessage() } throws: { ($0 as? WireError)?.code == .malformedFrame }
        case max:
            let f = frame(bodyLength: max)
            #expect(try FrameDecoder.decode(frame: f).type == .mutate)
            // Announced length exactly at the limit: waits for the body rather than failing.
            decoder.append(f.prefix(4))
            #expect(try decoder.nextMessage() == nil)
            decoder.append(f.dropFirst(4))
            #expect(try decoder.nextMessage()?.type == .mutate)
        default:
            // Refused from the prefix alone, before any body byte is buffered.
            decoder.append([0x01, 0x00, 0x00, 0x01] as [UInt8])
            #expect { try decoder.nextMessage() } throws: { ($0 as? WireError)?.code == .frameTooLarge }
            #expect(decoder.bufferedByteCount == 4)
        }
    }

    @Test func smallFrameLimit() throws {
        for max in [1, 2, 100] {
            let limits = WireLimits(maxFrameBytes: max)
            let ping = encoder.encode(.ping(nonce: 5))  // body 2 bytes
            if max >= 2 {
                #expect(try FrameDecoder.decode(frame: ping, limits: limits) == .ping(nonce: 5))
            } else {
                #expect { try FrameDecoder.decode(frame: ping, limits: limits) } throws: { ($0 as? WireError)?.code == .frameTooLarge }
            }
        }
    }

    /// DIFF identifiers are checked by the decoder; MUTATE identifiers are not (the server's
    /// apply answers with REJECT and op_index).
    @Test(arguments: [0, 1, 256, 257])
    func maxIdentifierBytes(length: Int) throws {
        let id = SnapshotIdentifier([UInt8](repeating: 0x69, count: length))
        let expected: ErrorCode? = length > 256 ? .identifierTooLong : nil
        #expect(code(.diff(room: "r", epoch: 1, version: 1, ops: [.appendSections([SnapshotElement(id)])])) == expected)
        #expect(code(.diff(room: "r", epoch: 1, version: 1, ops: [.moveItem("x", .before(id))])) == expected)
        #expect(code(.diff(room: "r", epoch: 1, version: 1, ops: [.appendItems([], toSection: id)])) == expected)
        #expect(code(.diff(room: "r", epoch: 1, version: 1, ops: [.deleteSections([id])])) == expected)
        #expect(code(.mutate(requestID: 1, room: "r", expectedVersion: nil, writeID: [], ops: [.appendSections([SnapshotElement(id)])])) == nil)
        let snapshot = try RoomSnapshot([(section: SnapshotElement(id), items: [])], limits: .unlimited)
        let replace = Message.replace(requestID: 9, room: "r", expectedVersion: nil, writeID: [], snapshot: snapshot)
        #expect(code(replace) == expected)
        if expected != nil {
            do {
                _ = try decode(replace)
            } catch {
                // A content error of a whole REPLACE carries what a REJECT needs.
                #expect(error.requestID == 9)
                #expect(error.identifier == id)
            }
        }
    }

    @Test(arguments: [0, 1, 64 * 1024, 64 * 1024 + 1])
    func maxPayloadBytes(size: Int) throws {
        let payload = SnapshotPayload([UInt8](repeating: 0x70, count: size))
        let expected: ErrorCode? = size > 64 * 1024 ? .payloadTooLarge : nil
        #expect(code(.diff(room: "r", epoch: 1, version: 1, ops: [.updateItems([SnapshotElement("i", payload: payload)], .reload)])) == expected)
        #expect(
            code(.mutate(requestID: 1, room: "r", expectedVersion: nil, writeID: [], ops: [.updateSections([SnapshotElement("s", payload: payload)])])) == nil)
        let snapshot = try RoomSnapshot([(section: SnapshotElement("s", payload: payload), items: [])], limits: .unlimited)
        #expect(code(.replace(requestID: 1, room: "r", expectedVersion: nil, writeID: [], snapshot: snapshot)) == expected)
    }

    @Test(arguments: [0, 1, 3, 4])
    func maxItemsPerRoom(count: Int) throws {
        let limits = WireLimits(model: SnapshotLimits(maxItems: 3))
        let items = (0..<count).map { SnapshotElement(SnapshotIdentifier(uint64: UInt64($0))) }
        let snapshot = try RoomSnapshot([(section: SnapshotElement("s"), items: items)], limits: .unlimited)
        let message = Message.snapshot(requestID: 1, room: "r", epoch: 1, version: 1, reason: .initial, digest: snapshot.digest, snapshot: snapshot)
        #expect(code(message, limits: limits) == (count > 3 ? .tooManyItems : nil))
    }

    @Test(arguments: [0, 1, 3, 4])
    func maxSectionsPerRoom(count: Int) throws {
        let limits = WireLimits(model: SnapshotLimits(maxSections: 3))
        let snapshot = try RoomSnapshot((0..<count).map { (section: SnapshotElement(SnapshotIdentifier(uint64: UInt64($0))), items: []) }, limits: .unlimited)
        #expect(
            code(.replace(requestID: 1, room: "r", expectedVersion: nil, writeID: [], snapshot: snapshot), limits: limits)
                == (count > 3 ? .tooManySections : nil))
    }

    @Test func maxSnapshotBytes() throws {
        let snapshot = try RoomSnapshot([(section: SnapshotElement("s", payload: "0123456789"), items: [SnapshotElement("i")])], limits: .unlimited)
        let size = snapshot.canonicalByteCount
        for (limit, expected) in [(size - 1, ErrorCode.snapshotTooLarge), (size, nil)] as [(Int, ErrorCode?)] {
            var limits = WireLimits.default
            limits.model.maxSnapshotBytes = limit
            #expect(code(.replace(requestID: 1, room: "r", expectedVersion: nil, writeID: [], snapshot: snapshot), limits: limits) == expected)
        }
        var zero = WireLimits.default
        zero.model.maxSnapshotBytes = 1
        #expect(code(.replace(requestID: 1, room: "r", expectedVersion: nil, writeID: [], snapshot: RoomSnapshot()), limits: zero) == nil)
    }

    @Test(arguments: [0, 1, 32, 33])
    func writeIDBytes(length: Int) {
        let writeID = [UInt8](repeating: 7, count: length)
        let expected: ErrorCode? = length > 32 ? .malformedFrame : nil
        #expect(code(.mutate(requestID: 1, room: "r", expectedVersion: nil, writeID: writeID, ops: [])) == expected)
        #expect(code(.replace(requestID: 1, room: "r", expectedVersion: nil, writeID: writeID, snapshot: RoomSnapshot())) == expected)
    }

    /// A list count the rest of the body cannot hold is refused without reserving memory for it.
    @Test func hugeCountsAreRefusedBeforeAllocating() {
        var body: [UInt8] = [0x22, 0x01, 0x72, 0x01, 0x01]  // DIFF "r" epoch 1 version 1
        body.appendVarintForTest(UInt64.max >> 1)  // ops count ~2^63
        #expect { try FrameDecoder.decode(body: body) } throws: { ($0 as? WireError)?.code == .malformedFrame }
        var bytes: [UInt8] = [0x11, 0x01]  // LEAVE, room length 2^40
        bytes.appendVarintForTest(1 << 40)
        #expect { try FrameDecoder.decode(body: bytes) } throws: { ($0 as? WireError)?.code == .malformedFrame }
    }
}

extension Array where Element == UInt8 {
    mutating func appendVarintForTest(_ value: UInt64) {
        var v = value
        while v >= 0x80 { append(UInt8(v & 0x7F) | 0x80); v >>= 7 }
        append(UInt8(v))
    }
}
