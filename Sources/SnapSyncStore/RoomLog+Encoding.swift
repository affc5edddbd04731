internal import SnapSyncWire

// A room log record's bytes (Protocol/CLUSTER.md, "Records"). What a node writes:
//
//   chained writes  u8 0x07, string room, varint epoch, varint first_version, chain_before (32),
//                   varint count (≥ 1), count × { bytes write_id, u8 0 | 1 then u64 fingerprint,
//                   bytes diff_frame }, chain_after (32)
//   tombstone       u8 0x08, string room, varint epoch, varint version, chain (32)
//
// and what nodes wrote before records carried the room's chain, still read: the store's own
// payloads (docs/persistence.md), a write of kind 0x01 or 0x06 (`WriteRecord.encodePayload`), a
// tombstone of kind 0x04 (`LifecycleRecord.tombstone`).

extension RoomLogEntry {
    static let chainedWritesKind: UInt8 = 0x07
    static let chainedTombstoneKind: UInt8 = 0x08

    /// The record's payload. `room` is the subject's room (a tombstone's payload names it; a
    /// write's names its own).
    /// - Complexity: O(size of the DIFF frames), one copy.
    package func encode(room: String) -> [UInt8] {
        var out: [UInt8] = []
        switch self {
        case .writes(let writes):
            out.reserveCapacity(
                writes.records.reduce(64 + room.utf8.count + 2 * RoomChain.byteCount) { size, record in
                    size + 24 + record.writeID.count + record.diffFrame.count
                })
            out.append(Self.chainedWritesKind)
            out.appendString(writes.records[0].room)
            out.appendVarint(writes.epoch)
            out.appendVarint(writes.firstVersion)
            out.appendChain(writes.chainBefore)
            out.appendVarint(UInt64(writes.records.count))
            for record in writes.records {
                out.appendBytes(record.writeID)
                if let fingerprint = record.fingerprint {
                    out.append(1)
                    out.appendBigEndian(fingerprint)
                } else {
                    out.append(0)
                }
                out.appendBytes(record.diffFrame)
            }
            out.appendChain(writes.chainAfter)
        case .chainedTombstone(let epoch, let version, let chain):
            out.append(Self.chainedTombstoneKind)
            out.appendString(room)
            out.appendVarint(epoch)
            out.appendVarint(version)
            out.appendChain(chain)
        case .write(let record):
            out.reserveCapacity(WriteRecord.payloadSizeUpperBound(room: record.room, writeID: record.writeID, frameCount: record.diffFrame.count))
            record.encodePayload(into: &out)
        case .tombstone(let epoch, let version):
            LifecycleRecord.tombstone(room: room, epoch: epoch, version: version).encodePayload(into: &out)
        }
        return out
    }

    /// Decodes a record's payload (any kind above); anything else, or a damaged payload, is
    /// `.corrupt` naming the field. Whether a chained record's chain_after is its chain_before
    /// advanced by its frames is not checked here: the replica checks it before applying.
    package init(payload: [UInt8]) throws(StoreError) {
        let range = 0..<payload.count
        do throws(FieldReader.Failure) {
            switch payload.first {
            case Self.chainedWritesKind?:
                self = try Self.decodeChainedWrites(payload)
            case Self.chainedTombstoneKind?:
                self = try payload.withUnsafeBufferPointer { (p) throws(FieldReader.Failure) -> RoomLogEntry in
                    var r = FieldReader(p, from: 1, to: p.count)
                    _ = try r.string("room")
                    let epoch = try r.varint("epoch")
                    let version = try r.varint("version")
                    let chain = try r.chain("chain")
                    guard r.isAtEnd else { throw FieldReader.Failure(what: "\(r.remaining) bytes left after the record's fields") }
                    return .chainedTombstone(epoch: epoch, version: version, chain: chain)
                }
            default:
                switch LifecycleRecord.kind(of: payload, payload: range) {
                case .write, .writeWithFingerprint:
                    self = .write(try WriteRecord(payload: payload, range: range))
                case .tombstone:
                    guard case .tombstone(_, let epoch, let version) = try LifecycleRecord(payload: payload, range: range) else {
                        throw FieldReader.Failure(what: "a tombstone that is not one")
                    }
                    self = .tombstone(epoch: epoch, version: version)
                default:
                    throw FieldReader.Failure(
                        what: "record kind \(payload.first.map(String.init) ?? "none") is not a write (1, 6 or 7) or a tombstone (4 or 8)")
                }
            }
        } catch {
            throw StoreError.corrupt(path: "room log record", offset: 0, reason: error.what)
        }
    }

    private static func decodeChainedWrites(_ payload: [UInt8]) throws(FieldReader.Failure) -> RoomLogEntry {
        try payload.withUnsafeBufferPointer { (p) throws(FieldReader.Failure) -> RoomLogEntry in
            var r = FieldReader(p, from: 1, to: p.count)
            let room = try r.string("room")
            let epoch = try r.varint("epoch")
            let first = try r.varint("first_version")
            let before = try r.chain("chain_before")
            // Each write takes at least 3 bytes: the count cannot ask for more than are left.
            let count = try r.count("count")
            guard count > 0 else { throw FieldReader.Failure(what: "count is 0") }
            guard first <= UInt64.max - UInt64(count) else { throw FieldReader.Failure(what: "the versions overflow") }
            var records: [WriteRecord] = []
            records.reserveCapacity(count)
            for index in 0..<count {
                let writeID = try r.bytesField("write_id")
                guard writeID.count <= 32 else { throw FieldReader.Failure(what: "write_id is \(writeID.count) bytes, over 32") }
                var fingerprint: UInt64?
                switch try r.u8("fingerprint presence") {
                case 0: break
                case 1:
                    guard !writeID.isEmpty else { throw FieldReader.Failure(what: "a fingerprint without a write_id") }
                    fingerprint = try r.u64("fingerprint")
                case let other: throw FieldReader.Failure(what: "fingerprint presence is \(other), not 0 or 1")
                }
                let frame = try r.bytesField("diff_frame")
                records.append(
                    WriteRecord(
                        room: room, epoch: epoch, version: first + UInt64(index), writeID: writeID, fingerprint: fingerprint,
                        diffFrame: frame))
            }
            let after = try r.chain("chain_after")
            guard r.isAtEnd else { throw FieldReader.Failure(what: "\(r.remaining) bytes left after the record's fields") }
            return .writes(ChainedWrites(records: records, chainBefore: before, chainAfter: after))
        }
    }
}

extension FieldReader {
    /// A chain value: 32 bytes.
    mutating func chain(_ what: String) throws(FieldReader.Failure) -> RoomChain {
        guard let chain = RoomChain(bytes: try raw(RoomChain.byteCount, what)) else { throw FieldReader.Failure(what: what) }
        return chain
    }
}
