/// A room name as the protocol compares it: by its UTF-8 bytes (PROTOCOL.md §2, "strings are
/// compared byte for byte"), for use as a dictionary key.
///
/// Swift's `String` equality is canonical equivalence: "é" precomposed (C3 A9) equals "e"
/// followed by U+0301 (65 CC 81). Keyed by `String`, two rooms whose names differ in bytes would
/// be one room, and a grant for one name (matched byte for byte) would reach the other's data.
///
/// Every write looks its room up by name (in the hub and in the store), so `==` and `hash(into:)`
/// are inlinable and read the names' contiguous UTF-8 in place, 8 bytes at a time: the generic
/// `utf8.elementsEqual` cost about 300 instructions per lookup (callgrind, docs/benchmarks.md).
/// - Complexity: O(name bytes), without copying the name.
package struct RoomName: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    package let string: String

    @inlinable package init(_ string: String) { self.string = string }
    package init(stringLiteral value: String) { self.init(value) }

    @inlinable package static func == (a: RoomName, b: RoomName) -> Bool {
        let x = a.string.utf8
        let y = b.string.utf8
        guard x.count == y.count else { return false }
        let inPlace = x.withContiguousStorageIfAvailable { p in
            y.withContiguousStorageIfAvailable { q in bytesEqual(UnsafeRawBufferPointer(p), UnsafeRawBufferPointer(q)) }
        }
        // Bridged or otherwise non-contiguous strings (not on Linux, rarely elsewhere).
        return (inPlace ?? nil) ?? x.elementsEqual(y)
    }

    @inlinable package func hash(into hasher: inout Hasher) {
        let utf8 = string.utf8
        if utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil {
            for byte in utf8 { hasher.combine(byte) }
        }
        hasher.combine(utf8.count)
    }

    /// Two buffers of the same length compared 8 bytes at a time.
    @inlinable static func bytesEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        let count = a.count
        guard count > 0, let p = a.baseAddress, let q = b.baseAddress else { return true }
        var offset = 0
        while offset + 8 <= count {
            if p.loadUnaligned(fromByteOffset: offset, as: UInt64.self) != q.loadUnaligned(fromByteOffset: offset, as: UInt64.self) {
                return false
            }
            offset += 8
        }
        while offset < count {
            if p.load(fromByteOffset: offset, as: UInt8.self) != q.load(fromByteOffset: offset, as: UInt8.self) { return false }
            offset += 1
        }
        return true
    }

    package var description: String { string }
}
