// The canonical encoding (Protocol/PROTOCOL.md §4) and the digest over it.
//
// Replicas compare digests to prove they hold the same room, so the encoding must be a pure
// function of the content: sections and items in snapshot order, minimal LEB128 varints, then,
// only when some item has a parent, the `levels` part: one varint per item, in the same order.
// A flat snapshot's bytes are therefore exactly protocol version 1's.
// Decoding is the Wire module's job; the model only produces bytes.

import Crypto

/// SHA-256 of a snapshot's canonical encoding (Protocol/PROTOCOL.md §4): 32 bytes.
public struct SnapshotDigest: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 32

    public let bytes: [UInt8]

    /// Wraps 32 digest bytes, for example ones read from a SNAPSHOT frame.
    /// - Precondition: `bytes.count == 32`; the wire field is fixed-width, so a decoder always has 32.
    public init(bytes: [UInt8]) {
        precondition(bytes.count == Self.byteCount, "a snapshot digest is 32 bytes, got \(bytes.count)")
        self.bytes = bytes
    }

    /// SHA-256 of `bytes` in one call. Internal: tests use it to check the chunked walk in `digest`.
    init(hashing bytes: [UInt8]) {
        var hasher = SHA256()
        bytes.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        self.init(bytes: hasher.finalize().withUnsafeBytes { Array($0) })
    }

    /// Lowercase hex, 64 characters.
    public var description: String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(2 * bytes.count)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

extension RoomSnapshot {
    /// Length of `encodeCanonical(into:)`'s output.
    /// - Complexity: O(1): kept as a running count by every mutation.
    public var canonicalByteCount: Int { Self.varintSize(numberOfSections) + encodedBodyBytes + levelsPartBytes }

    /// Appends the canonical encoding (`list<section> [levels]`, Protocol/PROTOCOL.md §4) to `buffer`:
    /// exactly `canonicalByteCount` bytes.
    /// - Complexity: O(n + total bytes of identifiers and payloads); one reallocation at most,
    ///   since the size is known up front.
    public func encodeCanonical(into buffer: inout [UInt8]) {
        let start = buffer.count
        let total = canonicalByteCount
        // Zero-filling first and writing through a pointer beats appending field by field:
        // `append` re-checks capacity and uniqueness for every varint and byte string.
        buffer.append(contentsOf: repeatElement(0, count: total))
        buffer.withUnsafeMutableBufferPointer { out in
            var sink = PointerSink(cursor: out.baseAddress! + start)
            writeCanonical(to: &sink)
            precondition(
                sink.cursor == out.baseAddress! + start + total,
                "canonical encoding wrote \(sink.cursor - (out.baseAddress! + start)) bytes, expected \(total)")
        }
    }

    /// The canonical encoding as a new array. See `encodeCanonical(into:)`.
    /// - Complexity: O(n + total bytes).
    public var canonicalEncoding: [UInt8] {
        var bytes: [UInt8] = []
        encodeCanonical(into: &bytes)
        return bytes
    }

    /// SHA-256 of the canonical encoding.
    ///
    /// Streams the encoding through a 64 KiB scratch buffer, so a 16 MiB room is hashed without
    /// materializing its encoding.
    /// - Complexity: O(n + total bytes).
    public var digest: SnapshotDigest {
        var sink = HashSink()
        writeCanonical(to: &sink)
        return SnapshotDigest(bytes: sink.finalize())
    }

    /// The one walk both outputs share, so the digest can never disagree with the encoding.
    func writeCanonical<Sink: CanonicalSink>(to sink: inout Sink) {
        sink.varint(numberOfSections)
        withItems { items in
            var s = firstSection
            while s != Self.none {
                let section = sectionNodes[Int(s)]
                section.id.bytes.withUnsafeBytes { sink.bytes($0) }
                section.payload.bytes.withUnsafeBytes { sink.bytes($0) }
                sink.varint(section.itemCount)
                var i = section.firstItem
                while i != Self.none {
                    // An item's record is its canonical encoding already.
                    sink.raw(items.recordBytes(i))
                    i = items[Int(i)].next
                }
                s = section.next
            }
            guard nestedItemCount > 0 else { return }
            s = firstSection
            while s != Self.none {
                var i = sectionNodes[Int(s)].firstItem
                while i != Self.none {
                    sink.varint(Int(outline[Int(i)].level))
                    i = items[Int(i)].next
                }
                s = sectionNodes[Int(s)].next
            }
        }
    }
}

/// Where the canonical walk writes: varints, length-prefixed byte strings, and bytes already
/// encoded (an item's record).
protocol CanonicalSink {
    mutating func varint(_ value: Int)
    mutating func raw(_ bytes: UnsafeRawBufferPointer)
}

extension CanonicalSink {
    /// A length-prefixed byte string.
    mutating func bytes(_ bytes: UnsafeRawBufferPointer) {
        varint(bytes.count)
        raw(bytes)
    }
}

/// Writes through a raw pointer into memory the caller sized with `canonicalByteCount`.
struct PointerSink: CanonicalSink {
    var cursor: UnsafeMutablePointer<UInt8>

    mutating func varint(_ value: Int) {
        var v = UInt64(truncatingIfNeeded: value)
        while v >= 0x80 {
            cursor.pointee = UInt8(truncatingIfNeeded: v) | 0x80
            cursor += 1
            v >>= 7
        }
        cursor.pointee = UInt8(truncatingIfNeeded: v)
        cursor += 1
    }

    mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        if let base = bytes.baseAddress { UnsafeMutableRawPointer(cursor).copyMemory(from: base, byteCount: bytes.count) }
        cursor += bytes.count
    }
}

/// Feeds SHA-256 in chunks: small fields are gathered into a scratch buffer (one `update` per
/// 64 KiB instead of one per field), large ones go to the hasher directly.
struct HashSink: CanonicalSink {
    static let capacity = 1 << 16
    var hasher = SHA256()
    var scratch = [UInt8](repeating: 0, count: HashSink.capacity)
    var used = 0

    mutating func flush() {
        guard used > 0 else { return }
        scratch.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<used])) }
        used = 0
    }

    mutating func varint(_ value: Int) {
        if used + 10 > Self.capacity { flush() }
        var v = UInt64(truncatingIfNeeded: value)
        scratch.withUnsafeMutableBufferPointer { out in
            while v >= 0x80 {
                out[used] = UInt8(truncatingIfNeeded: v) | 0x80
                used += 1
                v >>= 7
            }
            out[used] = UInt8(truncatingIfNeeded: v)
            used += 1
        }
    }

    mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        if bytes.count > Self.capacity - used {
            flush()
            if bytes.count > Self.capacity / 2 {
                hasher.update(bufferPointer: bytes)
                return
            }
        }
        let at = used
        scratch.withUnsafeMutableBytes { out in
            if let base = bytes.baseAddress { (out.baseAddress! + at).copyMemory(from: base, byteCount: bytes.count) }
        }
        used += bytes.count
    }

    mutating func finalize() -> [UInt8] {
        flush()
        return hasher.finalize().withUnsafeBytes { Array($0) }
    }
}
