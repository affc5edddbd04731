internal import SnapSyncWire

// Reading the store's formats (docs/persistence.md) goes through Wire's `ByteCursor`, and
// writing them through Wire's byte-writer primitives (`appendVarint`, `appendBytes`,
// `appendBigEndian`): the varint rules are the wire's (Protocol/PROTOCOL.md §2: minimal, at most
// 10 bytes, fit in 64 bits), so a record reads back as exactly one value or not at all.

/// Reads a record's payload field by field; a failure says what was being read, for the
/// "damaged at byte N: ..." messages (`StoreError.corrupt`).
///
/// Borrows the bytes: make it inside `withUnsafeBufferPointer` of the file's bytes.
struct FieldReader {
    struct Failure: Error { var what: String }

    private var cursor: ByteCursor

    /// Reads `bytes[start..<end]`.
    init(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int) {
        cursor = ByteCursor(UnsafeBufferPointer(rebasing: bytes[start..<end]))
    }

    var isAtEnd: Bool { cursor.isAtEnd }
    var remaining: Int { cursor.remaining }

    private func failure(_ problem: ByteCursor.Problem, _ what: String) -> Failure {
        switch problem {
        case .truncated: Failure(what: "\(what) runs past the end")
        case .varintTooLong: Failure(what: "\(what) is longer than 10 bytes")
        case .varintOverflow: Failure(what: "\(what) does not fit in 64 bits")
        case .varintNotMinimal: Failure(what: "\(what) is not minimally encoded")
        }
    }

    mutating func u8(_ what: String) throws(Failure) -> UInt8 {
        do { return try cursor.u8() } catch { throw failure(error, what) }
    }

    mutating func u64(_ what: String) throws(Failure) -> UInt64 {
        do { return try cursor.u64() } catch { throw failure(error, what) }
    }

    mutating func varint(_ what: String) throws(Failure) -> UInt64 {
        do { return try cursor.varint() } catch { throw failure(error, what) }
    }

    /// A varint that counts bytes or elements still to come: at most what is left.
    mutating func count(_ what: String) throws(Failure) -> Int {
        let n = try varint(what)
        guard n <= UInt64(remaining) else { throw Failure(what: "\(what) (\(n)) runs past the end") }
        return Int(n)
    }

    /// `n` bytes, copied out.
    mutating func raw(_ n: Int, _ what: String) throws(Failure) -> [UInt8] {
        do { return Array(try cursor.raw(n)) } catch { throw failure(error, what) }
    }

    /// A `bytes` field (varint length, then the bytes), copied out.
    mutating func bytesField(_ what: String) throws(Failure) -> [UInt8] {
        try raw(try count(what), what)
    }

    /// A `string` field: a `bytes` field that must be UTF-8.
    mutating func string(_ what: String) throws(Failure) -> String {
        let b = try bytesField(what)
        guard let s = String(validating: b, as: UTF8.self) else { throw Failure(what: "\(what) is not UTF-8") }
        return s
    }
}

/// The big-endian u32 at `offset` (in bounds: the caller checked), through `ByteCursor`.
@inline(__always) func bigEndianUInt32(_ p: UnsafeRawBufferPointer, at offset: Int) -> UInt32 {
    var cursor = ByteCursor(p.assumingMemoryBound(to: UInt8.self), offset: offset)
    return (try? cursor.u32()) ?? 0
}

@inline(__always) func bigEndianUInt32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
    bytes.withUnsafeBytes { bigEndianUInt32($0, at: offset) }
}
