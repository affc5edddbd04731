/// An opaque section or item identifier: a byte string, compared byte for byte.
///
/// Most callers use UTF-8 strings (`"inbox"`), but any bytes fit: a UUID's 16 bytes, or an
/// integer in big-endian order (`SnapshotIdentifier(uint64:)`) so that numeric and byte order agree.
/// Sections and items live in separate namespaces: a section and an item may share bytes.
///
/// Hashing feeds the count, then the bytes in one call (`Hasher.combine(bytes:)`), which is why
/// this wraps `[UInt8]` rather than hashing element by element. The count delimits the bytes, as
/// `Array`'s hashing does, so that values holding several identifiers (`["ab", "c"]` and
/// `["a", "bc"]`, an operation) hash apart: a write's fingerprint relies on it. Complexity:
/// O(count) to hash.
public struct SnapshotIdentifier: Hashable, Sendable, Comparable {
    public let bytes: [UInt8]

    @inlinable public init(_ bytes: [UInt8]) { self.bytes = bytes }
    @inlinable public init<S: Sequence>(bytes: S) where S.Element == UInt8 { self.bytes = Array(bytes) }
    @inlinable public init(_ string: String) { self.bytes = Array(string.utf8) }
    /// Eight bytes, big-endian, so that `SnapshotIdentifier(uint64: 2) < SnapshotIdentifier(uint64: 10)`.
    public init(uint64 value: UInt64) {
        self.bytes = (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
    }

    @inlinable public var count: Int { bytes.count }

    /// The bytes as UTF-8 text, when they are valid UTF-8.
    public var string: String? { String(validating: bytes, as: UTF8.self) }

    @inlinable public static func == (lhs: SnapshotIdentifier, rhs: SnapshotIdentifier) -> Bool { lhs.bytes == rhs.bytes }

    @inlinable public func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.count)
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    /// Lexicographic byte order.
    public static func < (lhs: SnapshotIdentifier, rhs: SnapshotIdentifier) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }
}

/// `"card-\(n)"` is an identifier too: the interpolated text's UTF-8 bytes.
extension SnapshotIdentifier: ExpressibleByStringInterpolation {
    public init(stringLiteral value: String) { self.init(value) }
    public init(stringInterpolation: DefaultStringInterpolation) { self.init(String(stringInterpolation: stringInterpolation)) }
}

extension SnapshotIdentifier: CustomStringConvertible {
    /// Printable UTF-8 as is (quoted when it has spaces), anything else as `0x…` hex, so that
    /// error messages and dumps never emit control bytes.
    public var description: String {
        if let s = string, !s.isEmpty, s.unicodeScalars.allSatisfy({ $0.value >= 0x21 && $0.value != 0x7F && $0 != "\"" }) {
            return s
        }
        if let s = string, s.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F && $0 != "\"" }) {
            return "\"\(s)\""
        }
        return "0x" + bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }
}
