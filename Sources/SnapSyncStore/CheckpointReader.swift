internal import SnapSyncWire

/// Reads a checkpoint file's records in order (layout: CheckpointFile.swift): the magic, the
/// header record, then whatever the caller reads, then the optional TTL and resume base records
/// and the end of the file. What `CheckpointFile.decode` (the whole room) and `CheckpointFile.decodeHeader`
/// (a room left asleep) share. Every error is `.corrupt` at the record's offset: checkpoints
/// are written whole and renamed into place, so damage is never an unfinished write.
struct CheckpointReader {
    struct Header {
        var room: String
        var epoch: UInt64
        var version: UInt64
        var digest: [UInt8]
        var historyCount: UInt64
        /// The chain before the history (kind 0x09); nil in a header of kind 0x02.
        var chain: RoomChain?
    }

    let bytes: [UInt8]
    let path: String
    private(set) var offset: Int

    /// Checks the magic.
    init(_ bytes: [UInt8], path: String) throws(StoreError) {
        self.bytes = bytes
        self.path = path
        offset = 0
        guard bytes.count >= CheckpointFile.magic.count, bytes[0..<CheckpointFile.magic.count].elementsEqual(CheckpointFile.magic)
        else {
            throw corrupt(0, "it does not start with \"SNAPCKP1\"")
        }
        offset = CheckpointFile.magic.count
    }

    func corrupt(_ offset: Int, _ reason: String) -> StoreError {
        .corrupt(
            path: path, offset: offset,
            reason: reason + " (checkpoints are written whole and renamed into place, so this is damage, not an unfinished write)")
    }

    /// The next record's payload, its checksum checked.
    mutating func nextRecord() throws(StoreError) -> Range<Int> {
        switch RecordFraming.parse(bytes, at: offset, end: bytes.count, maxPayload: Int(UInt32.max)) {
        case .record(let payload, let next):
            offset = next
            return payload
        case .end: throw corrupt(offset, "a record is missing: the file ends early")
        case .damaged(let why): throw corrupt(offset, why)
        }
    }

    /// The header record (the first).
    mutating func header() throws(StoreError) -> Header {
        let start = offset
        let range = try nextRecord()
        do throws(FieldReader.Failure) {
            return try bytes.withUnsafeBufferPointer { (p) throws(FieldReader.Failure) -> Header in
                var r = FieldReader(p, from: range.lowerBound, to: range.upperBound)
                let kind = try r.u8("kind")
                guard kind == PayloadKind.checkpointHeader.rawValue || kind == PayloadKind.checkpointHeaderWithChain.rawValue else {
                    throw FieldReader.Failure(what: "the first record is not a checkpoint header")
                }
                var header = Header(
                    room: try r.string("room"), epoch: try r.varint("epoch"), version: try r.varint("version"),
                    digest: try r.raw(32, "digest"), historyCount: try r.varint("history_count"), chain: nil)
                if kind == PayloadKind.checkpointHeaderWithChain.rawValue { header.chain = try r.chain("chain") }
                guard r.isAtEnd else { throw FieldReader.Failure(what: "bytes left after the header's fields") }
                // The history is the writes that made versions version-count+1 ... version, and
                // no write makes version 0.
                guard header.historyCount <= header.version else {
                    throw FieldReader.Failure(
                        what: "history_count \(header.historyCount) is more than the version \(header.version) (no write makes version 0)")
                }
                return header
            }
        } catch {
            throw corrupt(start, "checkpoint header: \(error.what)")
        }
    }

    /// The optional TTL record of `room` at `epoch` (nil when the file has none).
    mutating func ttl(room: String, epoch: UInt64) throws(StoreError) -> (serial: UInt64, seconds: UInt64)? {
        guard let (start, range) = try optionalRecord(kind: PayloadKind.ttl.rawValue) else { return nil }
        let record: LifecycleRecord
        do { record = try LifecycleRecord(payload: bytes, range: range) } catch {
            throw corrupt(start, "TTL record: \(error.what)")
        }
        guard case .ttl(let ttlRoom, let ttlEpoch, let serial, let seconds) = record, ttlRoom == room, ttlEpoch == epoch else {
            throw corrupt(start, "the TTL record does not belong to \(room) at epoch \(epoch)")
        }
        return (serial, seconds)
    }

    /// The next record when its payload starts with `kind` (its offset and payload), nil when
    /// the file ends here or the next record is of another kind (left to be read).
    mutating func optionalRecord(kind: UInt8) throws(StoreError) -> (start: Int, payload: Range<Int>)? {
        guard offset < bytes.count else { return nil }
        let start = offset
        let range = try nextRecord()
        guard !range.isEmpty, bytes[range.lowerBound] == kind else {
            offset = start
            return nil
        }
        return (start, range)
    }

    /// The end of the file: nothing may follow the records read.
    mutating func end() throws(StoreError) {
        guard offset == bytes.count else {
            throw corrupt(
                offset,
                "\(bytes.count - offset) bytes follow the last record a checkpoint holds (its history, then the room's TTL and resume base, each optional)")
        }
    }
}
