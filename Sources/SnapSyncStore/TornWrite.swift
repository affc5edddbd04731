// Which damage at the end of the log a crash can explain (docs/persistence.md, "Start-up").
//
// A crash cuts a write short in two ways: the process dies inside write(2), leaving a prefix
// of it in the page cache (copied page by page), or the machine stops before the kernel has
// written every sector of it to the disk. Either way the missing part reads as zeros (the log
// is preallocated with posix_fallocate, whose unwritten blocks read as zeros) or lies past the
// end of the file, and it is missing in whole 512-byte sectors of the file: a disk writes a
// sector whole or not at all. So the last record is an unfinished write only when its header or
// body runs past the end of the file, or one of its 512-byte-aligned pieces is all zeros (the
// rule of etcd's WAL, `isTornEntry`). A record lying wholly in the file with no zero sector and
// a bad checksum was complete on disk — it may have been acknowledged — and was damaged later.

enum TornWrite {
    /// The smallest unit a disk writes whole.
    static let sectorSize = 512

    /// Whether the bad record starting at `offset` (with no good record after it) can be an
    /// unfinished write; nil when it can, else why not.
    /// - Complexity: O(length of the record).
    static func whyNotTorn(_ bytes: [UInt8], at offset: Int) -> String? {
        let end = bytes.count
        guard end - offset >= RecordFraming.headerSize else { return nil }
        let header = offset..<offset + RecordFraming.headerSize
        guard Checksum.crc32(bytes, offset..<offset + 8) == bigEndianUInt32(bytes, at: offset + 8) else {
            // The length cannot be trusted: only the header's own sectors can tell.
            return hasZeroSector(bytes, header) ? nil : "the record header's checksum does not match, and no part of it reads as unwritten (zeros)"
        }
        let length = Int(bigEndianUInt32(bytes, at: offset))
        guard length >= 1 else { return "the record header checks but its length is 0" }
        let body = header.upperBound..<header.upperBound + length
        if body.upperBound > end { return nil }
        return hasZeroSector(bytes, body)
            ? nil
            : "the record lies whole in the file, none of its \(length) payload bytes reads as unwritten (a 512-byte sector of zeros), yet its checksum does not match"
    }

    /// Whether the bytes at `offset` (where parsing stopped, with no good record after them)
    /// were never a record the log wrote: space past the log's end that a bit flip or stale
    /// blocks made non-zero. Every record is written with a header whose checksum covers its
    /// length and its payload's checksum, so bytes that are not such a header, nor one with a
    /// single bit flipped, nor one whose checksum alone is damaged (its length and payload still
    /// check), hold no length, and so no write: they can be trimmed without losing one.
    /// - Complexity: O(1) header checks (97 CRCs of 8 bytes), plus one payload checksum.
    static func isNeverWritten(_ bytes: [UInt8], at offset: Int) -> Bool {
        guard bytes.count - offset >= RecordFraming.headerSize else { return false }
        var header = Array(bytes[offset..<offset + RecordFraming.headerSize])
        if isValidHeader(header) { return false }
        for bit in 0..<header.count * 8 {
            header[bit / 8] ^= 1 << UInt8(bit % 8)
            defer { header[bit / 8] ^= 1 << UInt8(bit % 8) }
            if isValidHeader(header) { return false }
        }
        // A damaged header checksum over an intact length and payload.
        let length = Int(bigEndianUInt32(bytes, at: offset))
        let payloadStart = offset + RecordFraming.headerSize
        if length >= 1, length <= bytes.count - payloadStart,
            Checksum.crc32(bytes, payloadStart..<payloadStart + length) == bigEndianUInt32(bytes, at: offset + 4)
        {
            return false
        }
        return true
    }

    /// A 12-byte record header whose checksum matches and whose length is at least 1.
    private static func isValidHeader(_ header: [UInt8]) -> Bool {
        Checksum.crc32(header, 0..<8) == bigEndianUInt32(header, at: 8) && bigEndianUInt32(header, at: 0) >= 1
    }

    /// Whether one of the pieces `range` is cut into at the file's 512-byte boundaries is all zeros.
    static func hasZeroSector(_ bytes: [UInt8], _ range: Range<Int>) -> Bool {
        var start = range.lowerBound
        while start < range.upperBound {
            let stop = min(range.upperBound, (start / sectorSize + 1) * sectorSize)
            if RecordFraming.isAllZero(bytes, from: start, to: stop) { return true }
            start = stop
        }
        return false
    }
}
