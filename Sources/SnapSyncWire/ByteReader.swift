import SnapSyncModel

/// Walks one frame body in place (PROTOCOL.md §2), bounds-checking every read against the end
/// of the body so that nothing is allocated for a field before its length is known to fit.
///
/// Works on a borrowed pointer rather than an Array so that reads are plain loads with no
/// per-byte retain, bounds-check trap or copy. Every read is O(1) except byte strings, which
/// are one memcpy of their length.
struct ByteReader {
    /// The primitives (`ByteCursor`, shared with the store); this type names the field.
    private var cursor: ByteCursor
    /// The message being read, for error details ("DIFF.version").
    let message: MessageType
    /// The connection's protocol version (§8.2): version 1 reads no `levels` part and no
    /// version 2 opcode.
    let version: UInt64

    init(_ bytes: UnsafeBufferPointer<UInt8>, message: MessageType, version: UInt64 = ProtocolVersion.unchained) {
        self.cursor = ByteCursor(bytes)
        self.message = message
        self.version = version
    }

    var bytes: UnsafeBufferPointer<UInt8> { cursor.bytes }
    var offset: Int {
        get { cursor.offset }
        set { cursor.offset = newValue }
    }
    var remaining: Int { cursor.remaining }
    var isAtEnd: Bool { cursor.isAtEnd }

    func fail(_ field: StaticString, _ problem: String) -> WireError {
        .malformed("\(problem) in \(message.name).\(field)")
    }

    func truncated(_ field: StaticString) -> WireError {
        .malformed("\(message.name).\(field) runs past the end of the body (truncated field)")
    }

    private func fail(_ field: StaticString, _ problem: ByteCursor.Problem) -> WireError {
        switch problem {
        case .truncated: truncated(field)
        case .varintTooLong: fail(field, "bad varint (longer than 10 bytes)")
        case .varintOverflow: fail(field, "bad varint (overflows 64 bits)")
        case .varintNotMinimal: fail(field, "bad varint (non-minimal: overlong encoding)")
        }
    }

    @inline(__always)
    mutating func u8(_ field: StaticString) throws(WireError) -> UInt8 {
        do { return try cursor.u8() } catch { throw fail(field, error) }
    }

    /// A minimal LEB128 of at most 10 bytes that fits 64 bits.
    @inline(__always)
    mutating func varint(_ field: StaticString) throws(WireError) -> UInt64 {
        do { return try cursor.varint() } catch { throw fail(field, error) }
    }

    /// A `varint` that must fit `Int` (lengths and counts), with each of `count` elements taking
    /// at least `minimumSize` bytes: a count the rest of the body cannot hold is refused before
    /// anything is reserved for it.
    mutating func count(_ field: StaticString, minimumSize: Int) throws(WireError) -> Int {
        let value = try varint(field)
        guard value <= UInt64(remaining / minimumSize) else {
            throw fail(field, "count \(value) cannot fit in the \(remaining) bytes left (truncated field)")
        }
        return Int(value)
    }

    /// The length prefix of a `bytes` field, checked against the rest of the body.
    mutating func length(_ field: StaticString) throws(WireError) -> Int {
        let value = try varint(field)
        guard value <= UInt64(remaining) else {
            throw fail(field, "length \(value) runs past the end of the body (truncated field)")
        }
        return Int(value)
    }

    /// `n` raw bytes, copied out.
    mutating func raw(_ n: Int, _ field: StaticString) throws(WireError) -> [UInt8] {
        do { return Array(try cursor.raw(n)) } catch { throw fail(field, error) }
    }

    /// A `chain` field (version 3): 32 raw bytes.
    mutating func chain(_ field: StaticString) throws(WireError) -> RoomChain {
        let bytes = try raw(RoomChain.byteCount, field)
        return RoomChain(bytes: bytes)!
    }

    mutating func bytesField(_ field: StaticString) throws(WireError) -> [UInt8] {
        let n = try length(field)
        return try raw(n, field)
    }

    /// A `bytes` field with an upper bound on its length, checked before copying.
    mutating func bytesField(_ field: StaticString, max: Int, _ problem: @autoclosure () -> WireError) throws(WireError) -> [UInt8] {
        let n = try length(field)
        guard n <= max else { throw problem() }
        return try raw(n, field)
    }

    /// A `string`: UTF-8 is validated, since an invalid string has no faithful Swift `String`
    /// and would not re-encode to the same bytes (PROTOCOL.md lets receivers reject it).
    mutating func string(_ field: StaticString) throws(WireError) -> String {
        let n = try length(field)
        let slice: UnsafeBufferPointer<UInt8>
        do { slice = try cursor.raw(n) } catch { throw fail(field, error) }
        let string = String(decoding: slice, as: UTF8.self)
        // Decoding repairs invalid sequences with U+FFFD; the round trip differs exactly when the
        // input was invalid. ASCII (the common case) is valid by construction: skip the compare.
        if !slice.allSatisfy({ $0 < 0x80 }) && !string.utf8.elementsEqual(slice) {
            throw fail(field, "invalid UTF-8")
        }
        return string
    }

    /// `opt<T>`'s presence flag.
    mutating func flag(_ field: StaticString) throws(WireError) -> Bool {
        switch try u8(field) {
        case 0x00: return false
        case 0x01: return true
        case let other: throw fail(field, "bad presence flag 0x\(hex(other)) (must be 0x00 or 0x01)")
        }
    }
}

func hex(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
}
