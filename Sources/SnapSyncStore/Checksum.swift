internal import CZlib

/// CRC-32 (IEEE 802.3, zlib's `crc32()`), the checksum of every log and checkpoint record.
///
/// Why zlib's CRC-32 rather than CRC-32C or a hash of our own: zlib is on every Debian machine
/// (zlib1g-dev, already a build dependency of half the toolchain), is one of the most heavily
/// used C libraries there is, and its table-driven ("braided") crc32 runs at well over 1 GB/s,
/// far above what fsync lets a log write. What a record checksum must catch here is a torn
/// write or a flipped bit: any CRC-32 detects every error burst up to 32 bits and all but
/// 2^-32 of random damage. CRC-32C's better Hamming distance on long messages and its SSE4.2
/// instruction would matter at memory speed, not at disk speed, and Debian's packaged CRC-32C
/// library (libcrc32c) is far less exercised than zlib.
enum Checksum {
    /// - Complexity: O(n)
    @inline(__always)
    static func crc32(_ bytes: UnsafeRawBufferPointer, seed: UInt32 = 0) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return seed }
        // zlib takes uInt lengths; records are far below 4 GiB, but stay correct above it.
        var crc = UInt(seed)
        var p = base.assumingMemoryBound(to: UInt8.self)
        var left = bytes.count
        while left > 0 {
            let n = Swift.min(left, Int(UInt32.max >> 1))
            crc = CZlib.crc32(crc, p, uInt(n))
            p += n
            left -= n
        }
        return UInt32(truncatingIfNeeded: crc)
    }

    static func crc32(_ bytes: [UInt8], _ range: Range<Int>) -> UInt32 {
        bytes.withUnsafeBytes { crc32(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 { crc32(bytes, bytes.indices) }
}
