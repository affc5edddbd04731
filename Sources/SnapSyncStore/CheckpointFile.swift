internal import SnapSyncModel
internal import SnapSyncWire

// Checkpoint files: one room's snapshot at one version, so that the log before it can go
// (docs/persistence.md, "Checkpoints"). A file is written whole under a temporary name,
// fsynced, renamed into place and the directory fsynced, so a checkpoint file is either
// complete or absent: any damage in one is corruption, never a torn write.
//
//   0  magic "SNAPCKP1" (8 bytes)
//   8  record: kind 0x09, string room, varint epoch, varint version, digest (32 bytes),
//              varint history_count, chain (32 bytes: the room's chain before the first history
//              record, at version - history_count)
//        or kind 0x02 with the same fields but the chain, as written before checkpoints held
//              one (still read: the chain is then HistoryChain.beforeHistory's)
//      record: the snapshot's canonical encoding (PROTOCOL.md §4)
//      history_count records: log write records (kind 0x01 or 0x06) for the versions just before and
//              up to `version`, oldest first, so that CATCHUP still works after a restart
//              (history_count is at most `version`: no write makes version 0)
//      optional record: the room's TTL (kind 0x05, LifecycleRecord.ttl), when one was set
//      optional record: kind 0x0A, then the canonical encoding of the room's resume base, its
//              state at version - history_count (HistoryBase), when the daemon keeps one
//   the file ends right after the last record.
//
// Files are named ckpt-<16 hex digits>.snap by a sequence number, not by room, because room
// names are up to 128 bytes of any UTF-8 and a file name is not; the room is inside.

struct CheckpointFile {
    static let magic: [UInt8] = Array("SNAPCKP1".utf8)

    var room: String
    var epoch: UInt64
    var version: UInt64
    var snapshot: RoomSnapshot
    var history: [WriteRecord]
    /// The room's TTL as its last SET_TTL set it (its serial and seconds), nil when none was set.
    var ttl: (serial: UInt64, seconds: UInt64)? = nil
    /// The room's chain before `history.first` (at `version - history.count`), as the file holds
    /// it; nil in a file written before checkpoints held one (`HistoryChain.beforeHistory`).
    var chain: RoomChain? = nil
    /// The room's state before `history.first` (at `version - history.count`): its resume base,
    /// nil when the file holds none.
    var base: RoomSnapshot? = nil

    static func fileName(_ sequence: UInt64) -> String { "ckpt-\(hex16(sequence)).snap" }
    static func sequence(ofFileName name: String) -> UInt64? { parseNumbered(name, prefix: "ckpt-", suffix: ".snap") }

    /// The file's bytes: with a header of kind 0x09 carrying `chain` (the chain before
    /// `history.first`), or, when `chain` is nil, of kind 0x02 without one (the layout of
    /// before checkpoints held a chain; cluster mode's checkpoint values still use it).
    /// With `base`, the room's state at `version - history.count`, in a last record.
    /// - Complexity: O(size of the snapshot + history + base): one encoding pass, one checksum
    ///   pass, one SHA-256 pass for the digest.
    static func encode(
        room: String, epoch: UInt64, version: UInt64, snapshot: RoomSnapshot,
        history: [WriteRecord], ttl: (serial: UInt64, seconds: UInt64)? = nil, chain: RoomChain? = nil,
        base: RoomSnapshot? = nil
    ) -> [UInt8] {
        var encoding: [UInt8] = []
        snapshot.encodeCanonical(into: &encoding)
        var header: [UInt8] = [(chain == nil ? PayloadKind.checkpointHeader : PayloadKind.checkpointHeaderWithChain).rawValue]
        header.appendString(room)
        header.appendVarint(epoch)
        header.appendVarint(version)
        header.append(contentsOf: snapshot.digest.bytes)
        header.appendVarint(UInt64(history.count))
        if let chain { header.appendChain(chain) }
        var out = magic
        out.reserveCapacity(
            96 + encoding.count
                + history.reduce(0) {
                    $0 + WriteRecord.payloadSizeUpperBound(room: $1.room, writeID: $1.writeID, frameCount: $1.diffFrame.count)
                        + RecordFraming.headerSize
                })
        RecordFraming.append(payload: header, to: &out)
        RecordFraming.append(payload: encoding, to: &out)
        var scratch: [UInt8] = []
        for write in history {
            scratch.removeAll(keepingCapacity: true)
            write.encodePayload(into: &scratch)
            RecordFraming.append(payload: scratch, to: &out)
        }
        if let ttl {
            scratch.removeAll(keepingCapacity: true)
            LifecycleRecord.ttl(room: room, epoch: epoch, serial: ttl.serial, seconds: ttl.seconds).encodePayload(into: &scratch)
            RecordFraming.append(payload: scratch, to: &out)
        }
        if let base {
            scratch.removeAll(keepingCapacity: true)
            scratch.reserveCapacity(1 + base.canonicalByteCount)
            scratch.append(PayloadKind.resumeBase.rawValue)
            base.encodeCanonical(into: &scratch)
            RecordFraming.append(payload: scratch, to: &out)
        }
        return out
    }

    /// Reads a whole checkpoint file. Any departure from the layout is `.corrupt`, and so is a
    /// snapshot whose digest differs from the one recorded.
    static func decode(_ bytes: [UInt8], path: String) throws(StoreError) -> CheckpointFile {
        var reader = try CheckpointReader(bytes, path: path)
        let header = try reader.header()
        let (room, epoch, version) = (header.room, header.epoch, header.version)
        let snapshotStart = reader.offset
        let snapshotRange = try reader.nextRecord()
        let snapshot: RoomSnapshot
        do {
            snapshot = try SnapshotDecoding.decode(bytes, range: snapshotRange)
        } catch {
            throw reader.corrupt(snapshotStart, "snapshot of room \(room): \(error.what)")
        }
        guard snapshot.digest.bytes == header.digest else {
            throw reader.corrupt(snapshotStart, "the snapshot of room \(room) does not match its recorded digest")
        }
        var history: [WriteRecord] = []
        var expected = version - header.historyCount + 1
        for _ in 0..<header.historyCount {
            let start = reader.offset
            let range = try reader.nextRecord()
            let write: WriteRecord
            do { write = try WriteRecord(payload: bytes, range: range) } catch {
                throw reader.corrupt(start, "history record: \(error.what)")
            }
            guard write.room == room, write.epoch == epoch, write.version == expected else {
                throw reader.corrupt(
                    start, "history record for \(write.room) at \(write.epoch)/\(write.version) does not belong to \(room) at \(epoch)/\(expected)")
            }
            history.append(write)
            expected &+= 1
        }
        let ttl = try reader.ttl(room: room, epoch: epoch)
        var base: RoomSnapshot?
        if let (start, range) = try reader.optionalRecord(kind: PayloadKind.resumeBase.rawValue) {
            do {
                base = try SnapshotDecoding.decode(bytes, range: range.dropFirst())
            } catch {
                throw reader.corrupt(start, "resume base of room \(room): \(error.what)")
            }
        }
        try reader.end()
        return CheckpointFile(
            room: room, epoch: epoch, version: version, snapshot: snapshot, history: history, ttl: ttl, chain: header.chain,
            base: base)
    }
}

/// Reads a snapshot's canonical encoding (PROTOCOL.md §4) back into a `RoomSnapshot`.
///
/// Checkpoints are read with no content limits: what the daemon accepted once must load again
/// even if an operator has since lowered a limit.
enum SnapshotDecoding {
    /// - Complexity: O(n) in the size of the encoding, plus hashing to build the indexes.
    static func decode(_ bytes: [UInt8], range: Range<Int>) throws(FieldReader.Failure) -> RoomSnapshot {
        try bytes.withUnsafeBufferPointer { (p) throws(FieldReader.Failure) -> RoomSnapshot in
            try decode(p, range: range)
        }
    }

    /// The structure is read by the wire's own code (`CanonicalSnapshot`: one reader of §4 for
    /// SNAPSHOTs and checkpoints); the room is then built without limits (a checkpoint holds
    /// what a room once accepted).
    static func decode(_ bytes: UnsafeBufferPointer<UInt8>, range: Range<Int>) throws(FieldReader.Failure) -> RoomSnapshot {
        let sections: [(section: SnapshotElement, items: [SnapshotElement])]
        let levels: [Int]?
        do {
            (sections, levels) = try CanonicalSnapshot.structure(UnsafeBufferPointer(rebasing: bytes[range]))
        } catch {
            throw FieldReader.Failure(what: "it is not a snapshot's canonical encoding: \(error.detail)")
        }
        var snapshot: RoomSnapshot
        do {
            snapshot = try RoomSnapshot(sections, limits: .unlimited)
        } catch {
            throw FieldReader.Failure(what: "it breaks a snapshot rule: \(error)")
        }
        if let levels {
            do {
                try snapshot.setOutlineLevels(levels, maxOutlineDepth: .max)
            } catch {
                throw FieldReader.Failure(what: "its levels do not describe an outline: \(error)")
            }
        }
        return snapshot
    }
}
