internal import SnapSyncWire

#if canImport(Glibc)
    internal import Glibc
#endif

// MANIFEST: the list of files a data directory must hold (docs/persistence.md, "MANIFEST"),
// so that a checkpoint or log segment that went missing stops the start instead of silently
// losing its room or its writes.
//
//   0  magic "SNAPMAN1" (8 bytes)
//   8  one record (RecordFraming): u8 kind 0x03,
//        varint next_checkpoint   every checkpoint numbered below it was written before this MANIFEST
//        varint first_segment     the log is the segments first_segment ... first_segment+segment_count-1
//        varint segment_count
//        varint checkpoint_count, then that many varint checkpoint sequence numbers, ascending
//        varint removing_count, then that many varint checkpoint sequence numbers: checkpoints
//              this MANIFEST dropped and that may still be on disk (their unlink comes after it)
//   the file ends right after the record.
//
// It is written whole (temp name, fsync, rename, fsync of the directory), so it is either the
// old or the new one, never a mix. Ordering that keeps it true across a crash at any point:
// - a file is created (renamed into place, directory fsynced) before a MANIFEST lists it; so
//   an unlisted checkpoint numbered at or above next_checkpoint, or the segment right after the
//   last listed one, is a file written just before a crash, and is taken in;
// - a file is dropped from the MANIFEST before it is unlinked: an unlisted segment below
//   first_segment, or an unlisted checkpoint in the removing list, is one whose unlink a crash
//   interrupted, and is removed.
// Anything else that does not match is damage: the start is refused, naming the file.

struct Manifest: Equatable {
    static let fileName = "MANIFEST"
    static let magic: [UInt8] = Array("SNAPMAN1".utf8)
    static let kind: UInt8 = 0x03

    var nextCheckpoint: UInt64
    var firstSegment: UInt64
    var segmentCount: UInt64
    /// Checkpoint sequence numbers, ascending.
    var checkpoints: [UInt64]
    /// Checkpoints dropped by this MANIFEST whose files may still exist.
    var removing: [UInt64]

    /// The listed segments, oldest first (empty when every write is in a checkpoint).
    var segments: Range<UInt64> { firstSegment..<firstSegment + segmentCount }

    /// - Complexity: O(checkpoints).
    func encode() -> [UInt8] {
        var payload: [UInt8] = [Self.kind]
        payload.appendVarint(nextCheckpoint)
        payload.appendVarint(firstSegment)
        payload.appendVarint(segmentCount)
        payload.appendVarint(UInt64(checkpoints.count))
        for sequence in checkpoints { payload.appendVarint(sequence) }
        payload.appendVarint(UInt64(removing.count))
        for sequence in removing { payload.appendVarint(sequence) }
        var out = Self.magic
        RecordFraming.append(payload: payload, to: &out)
        return out
    }

    /// Reads a MANIFEST's bytes. Any departure from the layout is `.corrupt`: the file is
    /// renamed into place whole, so damage cannot be an unfinished write.
    static func decode(_ bytes: [UInt8], path: String) throws(StoreError) -> Manifest {
        func corrupt(_ offset: Int, _ reason: String) -> StoreError {
            .corrupt(
                path: path, offset: offset,
                reason: reason + " (the MANIFEST is written whole and renamed into place, so this is damage; the daemon will not start)")
        }
        guard bytes.count >= magic.count, Array(bytes[0..<magic.count]) == magic else {
            throw corrupt(0, "it does not start with \"SNAPMAN1\"")
        }
        let range: Range<Int>
        switch RecordFraming.parse(bytes, at: magic.count, end: bytes.count, maxPayload: Int(UInt32.max)) {
        case .record(let payload, let next):
            guard next == bytes.count else { throw corrupt(next, "\(bytes.count - next) bytes follow the record") }
            range = payload
        case .end: throw corrupt(magic.count, "the record is missing")
        case .damaged(let why): throw corrupt(magic.count, why)
        }
        do throws(FieldReader.Failure) {
            return try bytes.withUnsafeBufferPointer { (p) throws(FieldReader.Failure) -> Manifest in
                var r = FieldReader(p, from: range.lowerBound, to: range.upperBound)
                return try decode(&r)
            }
        } catch {
            throw corrupt(magic.count, error.what)
        }
    }

    /// The MANIFEST record's fields.
    private static func decode(_ r: inout FieldReader) throws(FieldReader.Failure) -> Manifest {
        guard try r.u8("kind") == kind else { throw FieldReader.Failure(what: "the record is not a MANIFEST record") }
        let next = try r.varint("next_checkpoint")
        let first = try r.varint("first_segment")
        let count = try r.varint("segment_count")
        guard first <= UInt64.max - count else { throw FieldReader.Failure(what: "the segment range overflows") }
        func sequences(_ what: String) throws(FieldReader.Failure) -> [UInt64] {
            let n = try r.count(what)
            var out: [UInt64] = []
            out.reserveCapacity(n)
            for _ in 0..<n { out.append(try r.varint(what)) }
            return out
        }
        let checkpoints = try sequences("checkpoint")
        let removing = try sequences("removing")
        guard r.isAtEnd else { throw FieldReader.Failure(what: "bytes left after the last field") }
        return Manifest(
            nextCheckpoint: next, firstSegment: first, segmentCount: count,
            checkpoints: checkpoints, removing: removing)
    }

    /// The directory's MANIFEST, or nil when it has none (a directory from a version without
    /// one, or a new directory).
    static func read(directory: String) throws(StoreError) -> Manifest? {
        let path = directory + "/" + fileName
        let file: PosixFile
        do {
            file = try PosixFile(path: path, flags: O_RDONLY)
        } catch {
            if case .io(_, _, let e) = error, e == ENOENT { return nil }
            throw error
        }
        defer { file.close() }
        return try decode(try file.readAll(), path: path)
    }

    /// Replaces the directory's MANIFEST (temp name, fsync, rename, fsync of the directory).
    /// The directory fsync also makes every earlier create, rename and unlink in it durable.
    func write(directory: String) throws(StoreError) {
        try DurableFile.writeWhole(encode(), directory: directory, name: Self.fileName)
    }
}
