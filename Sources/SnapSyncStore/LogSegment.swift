internal import SnapSyncWire

// Log segment files: naming and the 24-byte header (docs/persistence.md, "Log segments").
//
//   0  magic "SNAPWAL1" (8 bytes; the 1 is the format version)
//   8  u64 segment sequence number (big-endian), the same number as in the file name
//   16 u32 reserved, zero
//   20 u32 crc32 of bytes 0..<20
//   24 records ...

enum LogSegment {
    static let magic: [UInt8] = Array("SNAPWAL1".utf8)
    static let headerSize = 24

    static func fileName(_ sequence: UInt64) -> String { "wal-\(hex16(sequence)).log" }

    /// The sequence number of a segment file name, or nil for any other name.
    static func sequence(ofFileName name: String) -> UInt64? {
        parseNumbered(name, prefix: "wal-", suffix: ".log")
    }

    static func header(sequence: UInt64) -> [UInt8] {
        var out = magic
        out.appendBigEndian(sequence)
        out.appendBigEndian(UInt32(0))
        out.appendBigEndian(Checksum.crc32(out))
        return out
    }

    /// Checks a segment's header; nil when it is good, else why not.
    static func checkHeader(_ bytes: [UInt8], sequence: UInt64) -> String? {
        guard bytes.count >= headerSize else {
            return "the file is \(bytes.count) bytes, shorter than the \(headerSize)-byte segment header"
        }
        guard Array(bytes[0..<8]) == magic else { return "it does not start with \"SNAPWAL1\"" }
        guard Checksum.crc32(bytes, 0..<20) == bigEndianUInt32(bytes, at: 20) else {
            return "the segment header's checksum does not match"
        }
        let seq = bytes.withUnsafeBufferPointer { p in
            var r = FieldReader(p, from: 8, to: 16)
            return (try? r.u64("sequence")) ?? 0
        }
        guard seq == sequence else { return "the header names segment \(seq), the file name \(sequence)" }
        return nil
    }
}

/// Sixteen lowercase hex digits, so that names sort in numeric order.
func hex16(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
}

/// The number in `prefix` + 16 lowercase hex digits + `suffix`, or nil. Read as UTF-8 bytes: a
/// MANIFEST names every checkpoint a mass DROP is removing (hundreds of thousands), and the
/// Character-by-Character version held the loop for seconds there.
func parseNumbered(_ name: String, prefix: String, suffix: String) -> UInt64? {
    let bytes = name.utf8, head = prefix.utf8, tail = suffix.utf8
    guard bytes.count == head.count + 16 + tail.count, bytes.starts(with: head), bytes.reversed().starts(with: tail.reversed()) else {
        return nil
    }
    var value: UInt64 = 0
    for byte in bytes.dropFirst(head.count).prefix(16) {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): value = value << 4 | UInt64(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): value = value << 4 | UInt64(byte - UInt8(ascii: "a") + 10)
        default: return nil
        }
    }
    return value
}
