/// SipHash (Aumasson and Bernstein) of a byte string under this process's random key: the item
/// index's tags (`SlotIndex.tag(of:)`).
///
/// Why not `Hasher`: it is the same function (SipHash-1-3 under a random per-process key), but
/// behind three calls into the standard library (`init`, `combine(bytes:)`, `finalize()`) that
/// cannot be inlined and carry a 72-byte buffered state. For the short identifiers of a room
/// those calls were most of a tag's cost: a tenth of a 100,000-item diff's time, and up to a
/// third of a lookup's (docs/benchmarks.md, "Tags without `Hasher`"). Here the rounds are
/// inlined into the lookup.
///
/// Why keyed: identifiers are chosen by clients. An attacker who could predict the tags could
/// send a room of identifiers that share a home bucket and make every lookup walk them all. The
/// key is drawn from the system's random generator once per process and never leaves it (tags
/// are not persisted or sent).
/// - Complexity: O(count): a round per 8 bytes, one for the last block and three to finish.
@usableFromInline enum SipHash {
    @usableFromInline static let key: (UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next())
    }()

    /// SipHash-1-3 of `bytes` under the process's key.
    @inlinable static func hash13(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        hash(bytes, key: key, compressionRounds: 1, finalizationRounds: 3)
    }

    /// SipHash-c-d of `bytes` under `key` (k0, k1: the key's two little-endian halves). Takes
    /// the rounds as arguments so that the tests can check it against the reference
    /// implementation's SipHash-2-4 vectors; calls pass constants, which the optimizer unrolls.
    @inlinable @inline(__always) static func hash(
        _ bytes: UnsafeRawBufferPointer, key: (UInt64, UInt64), compressionRounds: Int, finalizationRounds: Int
    ) -> UInt64 {
        var v0: UInt64 = 0x736f_6d65_7073_6575 ^ key.0
        var v1: UInt64 = 0x646f_7261_6e64_6f6d ^ key.1
        var v2: UInt64 = 0x6c79_6765_6e65_7261 ^ key.0
        var v3: UInt64 = 0x7465_6462_7974_6573 ^ key.1
        @inline(__always) func round() {
            v0 &+= v1
            v1 = v1.rotatedLeft(13) ^ v0
            v0 = v0.rotatedLeft(32)
            v2 &+= v3
            v3 = v3.rotatedLeft(16) ^ v2
            v0 &+= v3
            v3 = v3.rotatedLeft(21) ^ v0
            v2 &+= v1
            v1 = v1.rotatedLeft(17) ^ v2
            v2 = v2.rotatedLeft(32)
        }
        @inline(__always) func compress(_ m: UInt64) {
            v3 ^= m
            for _ in 0..<compressionRounds { round() }
            v0 ^= m
        }
        let count = bytes.count
        var offset = 0
        while offset + 8 <= count {
            compress(UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            offset += 8
        }
        // The last block: the remaining bytes, little-endian, and the length's low byte on top.
        var last = UInt64(truncatingIfNeeded: count) << 56
        var shift: UInt64 = 0
        while offset < count {
            last |= UInt64(bytes[offset]) << shift
            shift += 8
            offset += 1
        }
        compress(last)
        v2 ^= 0xff
        for _ in 0..<finalizationRounds { round() }
        return v0 ^ v1 ^ v2 ^ v3
    }
}

extension UInt64 {
    @inlinable @inline(__always) func rotatedLeft(_ n: UInt64) -> UInt64 { (self << n) | (self >> (64 - n)) }
}
