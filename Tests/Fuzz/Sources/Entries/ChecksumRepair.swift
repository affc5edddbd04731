@testable import SnapSyncStore

/// Makes every checksum of a store file right, so that a mutation of a length or a payload
/// reaches the parsers behind the CRCs instead of stopping at them (a fuzzer rarely guesses a
/// CRC-32). The targets run each input both as it is and repaired.
enum ChecksumRepair {
    /// A log segment: the header's CRC, then each record's.
    static func segment(_ bytes: inout [UInt8]) {
        guard bytes.count >= LogSegment.headerSize else { return }
        store(Checksum.crc32(bytes, 0..<20), in: &bytes, at: 20)
        records(&bytes, from: LogSegment.headerSize)
    }

    /// A checkpoint file: each record's CRCs, after the 8-byte magic.
    static func checkpoint(_ bytes: inout [UInt8]) {
        records(&bytes, from: CheckpointFile.magic.count)
    }

    /// Walks records by their lengths (as `RecordFraming` lays them out) and rewrites both CRCs
    /// of each, stopping at a zero length or one that runs past the end.
    static func records(_ bytes: inout [UInt8], from start: Int) {
        var offset = start
        while bytes.count - offset >= RecordFraming.headerSize {
            let length = Int(bigEndianUInt32(bytes, at: offset))
            guard length >= 1, length <= bytes.count - offset - RecordFraming.headerSize else { return }
            let payload = offset + RecordFraming.headerSize
            store(Checksum.crc32(bytes, payload..<payload + length), in: &bytes, at: offset + 4)
            store(Checksum.crc32(bytes, offset..<offset + 8), in: &bytes, at: offset + 8)
            offset = payload + length
        }
    }

    static func store(_ value: UInt32, in bytes: inout [UInt8], at offset: Int) {
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (24 - 8 * i)) }
    }
}
