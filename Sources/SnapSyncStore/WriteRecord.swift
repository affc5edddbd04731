internal import SnapSyncWire

/// One accepted write, as the store keeps it: enough to replay it (the DIFF frame's operations),
/// to serve it again from history (the DIFF frame, byte for byte), and to keep idempotent
/// retries idempotent after a restart (the write_id). The one shape of a write record: a log
/// record, a checkpoint's history entry, and a recovered room's history are all this.
package struct WriteRecord: Sendable, Hashable {
    package var room: String
    package var epoch: UInt64
    /// The room's version after this write (the previous version + 1).
    package var version: UInt64
    /// The MUTATE/REPLACE's write_id (0–32 bytes; empty: none).
    package var writeID: [UInt8]
    /// `WriteFingerprint` of the request that used `writeID`; nil when it has none, and for
    /// records written before fingerprints were kept (kind 0x01 with a write id).
    package var fingerprint: UInt64?
    /// The DIFF frame the daemon encoded once for the room's members, length prefix included
    /// (PROTOCOL.md §1, §3): the log record and the wire frame are the same bytes, so recovery
    /// rebuilds history without re-encoding. For a REPLACE it is the diff from the old snapshot
    /// to the new one.
    package var diffFrame: [UInt8]

    package init(room: String, epoch: UInt64, version: UInt64, writeID: [UInt8], fingerprint: UInt64? = nil, diffFrame: [UInt8]) {
        self.room = room
        self.epoch = epoch
        self.version = version
        self.writeID = writeID
        self.fingerprint = writeID.isEmpty ? nil : fingerprint
        self.diffFrame = diffFrame
    }
}

// MARK: - SnapshotPayload encoding (docs/persistence.md)

enum PayloadKind: UInt8 {
    /// A log record: one accepted write, without a write id or with one whose fingerprint is
    /// not known.
    case write = 0x01
    /// A log record: one accepted write with its write id and that write's fingerprint.
    case writeWithFingerprint = 0x06
    /// A checkpoint's first record: which room, at which position, with which digest.
    case checkpointHeader = 0x02
    /// A checkpoint's first record, with the room's chain before its history (the header of a
    /// checkpoint written since checkpoints hold the chain).
    case checkpointHeaderWithChain = 0x09
    /// A log record: a room ended (DROP or expiry); `LifecycleRecord.tombstone`.
    case tombstone = 0x04
    /// A log record, and a checkpoint's optional last record: a room's TTL; `LifecycleRecord.ttl`.
    case ttl = 0x05
    /// A checkpoint's optional last record: the room's resume base, its state before the
    /// history (`HistoryBase`), as the snapshot's canonical encoding after the kind.
    case resumeBase = 0x0A
}

extension WriteRecord {
    /// kind 0x01, string room, varint epoch, varint version, bytes write_id, bytes diff_frame;
    /// or, for a write id with its fingerprint, kind 0x06 with `u64 fingerprint` (big-endian)
    /// after write_id.
    /// - Complexity: O(size of the DIFF frame), one copy.
    func encodePayload(into out: inout [UInt8]) {
        diffFrame.withUnsafeBytes { frame in
            Self.encodePayload(
                room: room, epoch: epoch, version: version, writeID: writeID, fingerprint: fingerprint, diffFrame: frame,
                into: &out)
        }
    }

    /// The payload of a write whose DIFF frame the caller owns (the daemon's shared output
    /// chunk): the frame is borrowed, and copied once, into `out`.
    static func encodePayload(
        room: String, epoch: UInt64, version: UInt64, writeID: [UInt8], fingerprint: UInt64?,
        diffFrame: UnsafeRawBufferPointer, into out: inout [UInt8]
    ) {
        let fingerprint = writeID.isEmpty ? nil : fingerprint
        out.append(fingerprint == nil ? PayloadKind.write.rawValue : PayloadKind.writeWithFingerprint.rawValue)
        out.appendString(room)
        out.appendVarint(epoch)
        out.appendVarint(version)
        out.appendBytes(writeID)
        if let fingerprint { out.appendBigEndian(fingerprint) }
        out.appendBytes(diffFrame)
    }

    /// An upper bound of the payload's size, for reserving capacity.
    static func payloadSizeUpperBound(room: String, writeID: [UInt8], frameCount: Int) -> Int {
        1 + 10 + room.utf8.count + 10 + 10 + 10 + writeID.count + 8 + 10 + frameCount
    }

    /// Decodes the payload `bytes[range]` of a log record (or a checkpoint's history record).
    init(payload bytes: [UInt8], range: Range<Int>) throws(FieldReader.Failure) {
        self = try bytes.withUnsafeBufferPointer { (p) throws(FieldReader.Failure) -> WriteRecord in
            var r = FieldReader(p, from: range.lowerBound, to: range.upperBound)
            let kind = try r.u8("kind")
            let withFingerprint = kind == PayloadKind.writeWithFingerprint.rawValue
            guard withFingerprint || kind == PayloadKind.write.rawValue else {
                throw FieldReader.Failure(what: "unknown record kind \(kind)")
            }
            let room = try r.string("room")
            let epoch = try r.varint("epoch")
            let version = try r.varint("version")
            let writeID = try r.bytesField("write_id")
            guard writeID.count <= 32 else { throw FieldReader.Failure(what: "write_id is \(writeID.count) bytes, over 32") }
            var fingerprint: UInt64?
            if withFingerprint {
                guard !writeID.isEmpty else { throw FieldReader.Failure(what: "a fingerprint without a write_id") }
                fingerprint = try r.u64("fingerprint")
            }
            let frame = try r.bytesField("diff_frame")
            guard r.isAtEnd else { throw FieldReader.Failure(what: "\(r.remaining) bytes left after the record's fields") }
            return WriteRecord(room: room, epoch: epoch, version: version, writeID: writeID, fingerprint: fingerprint, diffFrame: frame)
        }
    }
}
