// Big-endian integers and LEB128 varints for the storage formats (docs/persistence.md). The
// varint rules are the wire's (Protocol/PROTOCOL.md §2): minimal, at most 10 bytes, fit in 64
// bits, so a record reads back as exactly one value or not at all.

extension Array where Element == UInt8 {
    @inline(__always) mutating func appendBigEndian(_ value: UInt32) {
        append(UInt8(truncatingIfNeeded: value >> 24))
        append(UInt8(truncatingIfNeeded: value >> 16))
        append(UInt8(truncatingIfNeeded: value >> 8))
        append(UInt8(truncatingIfNeeded: value))
    }

    @inline(__always) mutating func appendBigEndian(_ value: UInt64) {
        appendBigEndian(UInt32(truncatingIfNeeded: value >> 32))
        appendBigEndian(UInt32(truncatingIfNeeded: value))
    }

    /// - Complexity: O(1), at most 10 bytes.
    @inline(__always) mutating func appendVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        append(UInt8(v))
    }

    mutating func appendBytesField(_ bytes: some Collection<UInt8>) {
        appendVarint(UInt64(bytes.count))
        append(contentsOf: bytes)
    }
}

/// Reads a storage payload front to back; every read checks bounds, and a failure says what
/// was being read, for the "damaged at byte N" message.
struct ByteReader {
    struct Failure: Error { var what: String }

    let bytes: [UInt8]
    private(set) var offset: Int
    let end: Int

    init(_ bytes: [UInt8], from start: Int = 0, to end: Int? = nil) {
        self.bytes = bytes
        self.offset = start
        self.end = end ?? bytes.count
    }

    var isAtEnd: Bool { offset == end }
    var remaining: Int { end - offset }

    mutating func u8(_ what: String) throws(Failure) -> UInt8 {
        guard offset < end else { throw Failure(what: "\(what) runs past the end") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u32(_ what: String) throws(Failure) -> UInt32 {
        guard remaining >= 4 else { throw Failure(what: "\(what) runs past the end") }
        defer { offset += 4 }
        return bigEndianUInt32(bytes, at: offset)
    }

    mutating func u64(_ what: String) throws(Failure) -> UInt64 {
        let hi = try u32(what), lo = try u32(what)
        return UInt64(hi) << 32 | UInt64(lo)
    }

    mutating func varint(_ what: String) throws(Failure) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        for index in 0..<10 {
            let byte = try u8(what)
            if index == 9 && byte > 1 { throw Failure(what: "\(what) does not fit in 64 bits") }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                if byte == 0 && index > 0 { throw Failure(what: "\(what) is not minimally encoded") }
                return value
            }
            shift += 7
        }
        throw Failure(what: "\(what) is longer than 10 bytes")
    }

    mutating func count(_ what: String) throws(Failure) -> Int {
        let n = try varint(what)
        guard n <= UInt64(remaining) else { throw Failure(what: "\(what) (\(n)) runs past the end") }
        return Int(n)
    }

    mutating func bytesField(_ what: String) throws(Failure) -> [UInt8] {
        let n = try count(what)
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }

    mutating func raw(_ n: Int, _ what: String) throws(Failure) -> ArraySlice<UInt8> {
        guard remaining >= n else { throw Failure(what: "\(what) runs past the end") }
        defer { offset += n }
        return bytes[offset..<offset + n]
    }

    mutating func string(_ what: String) throws(Failure) -> String {
        let b = try bytesField(what)
        guard let s = String(validating: b, as: UTF8.self) else { throw Failure(what: "\(what) is not UTF-8") }
        return s
    }
}

@inline(__always) func bigEndianUInt32(_ bytes: [UInt8], at i: Int) -> UInt32 {
    UInt32(bytes[i]) << 24 | UInt32(bytes[i + 1]) << 16 | UInt32(bytes[i + 2]) << 8 | UInt32(bytes[i + 3])
}

@inline(__always) func bigEndianUInt32(_ p: UnsafeRawBufferPointer, at i: Int) -> UInt32 {
    UInt32(p[i]) << 24 | UInt32(p[i + 1]) << 16 | UInt32(p[i + 2]) << 8 | UInt32(p[i + 3])
}
