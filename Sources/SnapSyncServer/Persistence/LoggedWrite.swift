public import SnapSyncModel

/// One accepted write, as the write-ahead log holds it: enough to replay it (the DIFF frame's
/// operations), to serve it again from history (the DIFF frame, byte for byte), and to keep
/// idempotent retries idempotent after a restart (the write_id).
public struct LoggedWrite: Sendable, Hashable {
    public var room: String
    public var epoch: UInt64
    /// The room's version after this write (the previous version + 1).
    public var version: UInt64
    /// The MUTATE/REPLACE's write_id (0–32 bytes; empty: none).
    public var writeId: [UInt8]
    /// The DIFF frame the daemon encoded once for the room's members, length prefix included
    /// (PROTOCOL.md §1, §3). For a REPLACE it is the diff from the old snapshot to the new one.
    public var diffFrame: [UInt8]

    public init(room: String, epoch: UInt64, version: UInt64, writeId: [UInt8], diffFrame: [UInt8]) {
        self.room = room
        self.epoch = epoch
        self.version = version
        self.writeId = writeId
        self.diffFrame = diffFrame
    }
}

/// A room as the storage found it on start: the state to serve, and the writes that led to it.
public struct RecoveredRoom: Sendable {
    public var name: String
    public var epoch: UInt64
    public var version: UInt64
    public var snapshot: Snapshot
    /// The most recent writes, oldest first, with consecutive versions ending at `version`
    /// (at most `StorageOptions.historyLimit`; empty when none is known). The daemon serves
    /// CATCHUP from them, so a client that resumes inside this window is caught up rather than
    /// sent the whole snapshot again.
    public var history: [LoggedWrite]
}

/// What `DurableStore.maintain` asks the daemon for when it checkpoints a room: the room's
/// current state. It must include every write appended for the room so far.
public struct RoomImage {
    public var epoch: UInt64
    public var version: UInt64
    public var snapshot: Snapshot
    /// The room's recent DIFF frames (length prefix included), oldest first, the last one being
    /// the DIFF to `version`: kept in the checkpoint so that CATCHUP works across a restart even
    /// after the log holding them is deleted. May be empty.
    public var history: [[UInt8]]

    public init(epoch: UInt64, version: UInt64, snapshot: Snapshot, history: [[UInt8]] = []) {
        self.epoch = epoch
        self.version = version
        self.snapshot = snapshot
        self.history = history
    }
}

// MARK: - Payload encodings (docs/persistence.md)

enum PayloadKind: UInt8 {
    /// A log record: one accepted write.
    case write = 0x01
    /// A checkpoint's first record: which room, at which position, with which digest.
    case checkpointHeader = 0x02
}

extension LoggedWrite {
    /// kind 0x01, string room, varint epoch, varint version, bytes write_id, bytes diff_frame.
    /// - Complexity: O(size of the DIFF frame), one copy.
    func encodePayload(into out: inout [UInt8]) {
        diffFrame.withUnsafeBytes { frame in
            Self.encodePayload(room: room, epoch: epoch, version: version, writeId: writeId, diffFrame: frame, into: &out)
        }
    }

    static func encodePayload(
        room: String, epoch: UInt64, version: UInt64, writeId: [UInt8],
        diffFrame: UnsafeRawBufferPointer, into out: inout [UInt8]
    ) {
        out.append(PayloadKind.write.rawValue)
        out.appendBytesField(room.utf8)
        out.appendVarint(epoch)
        out.appendVarint(version)
        out.appendBytesField(writeId)
        out.appendBytesField(diffFrame)
    }

    /// The framed size of this write's record, for space accounting.
    var payloadSizeUpperBound: Int { 1 + 10 + room.utf8.count + 10 + 10 + 10 + writeId.count + 10 + diffFrame.count }

    init(payload bytes: [UInt8], range: Range<Int>) throws(ByteReader.Failure) {
        var r = ByteReader(bytes, from: range.lowerBound, to: range.upperBound)
        let kind = try r.u8("kind")
        guard kind == PayloadKind.write.rawValue else { throw ByteReader.Failure(what: "unknown record kind \(kind)") }
        let room = try r.string("room")
        let epoch = try r.varint("epoch")
        let version = try r.varint("version")
        let writeId = try r.bytesField("write_id")
        guard writeId.count <= 32 else { throw ByteReader.Failure(what: "write_id is \(writeId.count) bytes, over 32") }
        let frame = try r.bytesField("diff_frame")
        guard r.isAtEnd else { throw ByteReader.Failure(what: "\(r.remaining) bytes left after the record's fields") }
        self.init(room: room, epoch: epoch, version: version, writeId: writeId, diffFrame: frame)
    }
}
