// The reading side of PROTOCOL.md §2's primitives, shared by the wire decoder (`ByteReader`,
// which names the message field) and the store's file formats (SnapSyncStore's `FieldReader`,
// which names what it was reading for its "damaged at byte N" messages): one implementation of
// the varint rules, so that the log and the wire cannot drift apart.

/// Reads big-endian integers, minimal LEB128 varints and byte runs front to back over borrowed
/// bytes, bounds-checking every read. A failure says which rule broke (`Problem`), never where:
/// the caller knows the field.
///
/// Works on a borrowed pointer so that reads are plain loads with no per-byte retain,
/// bounds-check trap or copy. Every read is O(1) except `raw`, which borrows.
package struct ByteCursor {
    package let bytes: UnsafeBufferPointer<UInt8>
    package var offset: Int

    /// Why a read failed.
    package enum Problem: Error, Equatable, Sendable {
        /// The value runs past the end of the bytes.
        case truncated
        /// A varint with a continuation bit in its 10th byte.
        case varintTooLong
        /// A varint whose 10th byte holds more than bit 63.
        case varintOverflow
        /// A varint with a trailing zero byte (an overlong encoding).
        case varintNotMinimal
    }

    package init(_ bytes: UnsafeBufferPointer<UInt8>, offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    package var remaining: Int { bytes.count - offset }
    package var isAtEnd: Bool { offset == bytes.count }

    @inline(__always)
    package mutating func u8() throws(Problem) -> UInt8 {
        guard offset < bytes.count else { throw .truncated }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// A big-endian u32.
    package mutating func u32() throws(Problem) -> UInt32 {
        guard remaining >= 4 else { throw .truncated }
        defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
            | UInt32(bytes[offset + 3])
    }

    /// A big-endian u64.
    package mutating func u64() throws(Problem) -> UInt64 {
        guard remaining >= 8 else { throw .truncated }
        let hi = try u32(), lo = try u32()
        return UInt64(hi) << 32 | UInt64(lo)
    }

    /// A minimal LEB128 of at most 10 bytes that fits 64 bits.
    @inline(__always)
    package mutating func varint() throws(Problem) -> UInt64 {
        // Fast path: most lengths, counts and small numbers are one byte.
        if offset < bytes.count, bytes[offset] < 0x80 {
            defer { offset += 1 }
            return UInt64(bytes[offset])
        }
        return try varintSlow()
    }

    private mutating func varintSlow() throws(Problem) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        for index in 0..<10 {
            guard offset < bytes.count else { throw .truncated }
            let byte = bytes[offset]
            offset += 1
            if index == 9 {
                // The 10th byte holds bit 63 only.
                if byte & 0x80 != 0 { throw .varintTooLong }
                if byte > 0x01 { throw .varintOverflow }
            }
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                if byte == 0 && index > 0 { throw .varintNotMinimal }
                return result
            }
            shift += 7
        }
        preconditionFailure("unreachable: the 10th byte always ends the loop")
    }

    /// The next `n` bytes, borrowed (valid as long as `bytes` is).
    @inline(__always)
    package mutating func raw(_ n: Int) throws(Problem) -> UnsafeBufferPointer<UInt8> {
        guard n >= 0, n <= remaining else { throw .truncated }
        defer { offset += n }
        return UnsafeBufferPointer(rebasing: bytes[offset..<offset + n])
    }
}
