internal import SnapSyncWire

// The framing shared by log segments and checkpoint files (docs/persistence.md, "Records"):
//
//   u32 payload length N (big-endian, 1 ... maxPayload)
//   u32 crc32(payload)
//   u32 crc32(the 8 bytes above)
//   N bytes of payload
//
// The header has a checksum of its own so that a damaged length is caught before it is used,
// and so that scanning for "is there any good record after this damage?" costs O(1) per
// candidate offset instead of a checksum over a made-up length. An all-zero header is never a
// record (N is at least 1), which is how the zero-filled, preallocated tail of a segment reads:
// as the end of the data.

enum RecordFraming {
    static let headerSize = 12

    /// Appends one framed record holding `payload`.
    /// - Complexity: O(payload), one CRC pass over it.
    static func append(payload: [UInt8], to out: inout [UInt8]) {
        let payloadCRC = Checksum.crc32(payload)
        let start = out.count
        out.appendBigEndian(UInt32(payload.count))
        out.appendBigEndian(payloadCRC)
        let headerCRC = Checksum.crc32(out, start..<start + 8)
        out.appendBigEndian(headerCRC)
        out.append(contentsOf: payload)
    }

    static func framedSize(payloadCount: Int) -> Int { headerSize + payloadCount }

    enum Parsed: Equatable {
        /// A whole, checksummed record: its payload is `bytes[payload]`; the next one starts at `next`.
        case record(payload: Range<Int>, next: Int)
        /// Twelve zero bytes, or nothing at all: the end of the written data.
        case end
        /// Anything else, with why.
        case damaged(String)
    }

    /// Parses the record at `offset` of `bytes[..<end]`.
    /// - Complexity: O(1) for the header, plus O(N) for the payload checksum when the header is good.
    static func parse(_ bytes: [UInt8], at offset: Int, end: Int, maxPayload: Int) -> Parsed {
        bytes.withUnsafeBytes { parse($0, at: offset, end: end, maxPayload: maxPayload) }
    }

    static func parse(_ p: UnsafeRawBufferPointer, at offset: Int, end: Int, maxPayload: Int) -> Parsed {
        if offset == end { return .end }
        guard end - offset >= headerSize else {
            return allZero(p, offset, end) ? .end : .damaged("a record header is cut short (\(end - offset) of \(headerSize) bytes)")
        }
        let length = bigEndianUInt32(p, at: offset)
        let payloadCRC = bigEndianUInt32(p, at: offset + 4)
        let headerCRC = bigEndianUInt32(p, at: offset + 8)
        if length == 0 && payloadCRC == 0 && headerCRC == 0 { return .end }
        guard Checksum.crc32(UnsafeRawBufferPointer(rebasing: p[offset..<offset + 8])) == headerCRC else {
            return .damaged("the record header's checksum does not match")
        }
        guard length >= 1, Int(length) <= maxPayload else {
            return .damaged("the record length \(length) is outside 1...\(maxPayload)")
        }
        let start = offset + headerSize
        guard end - start >= Int(length) else {
            return .damaged("the record is cut short (\(end - start) of \(length) payload bytes)")
        }
        let range = start..<start + Int(length)
        guard Checksum.crc32(UnsafeRawBufferPointer(rebasing: p[range])) == payloadCRC else {
            return .damaged("the record's checksum does not match its \(length) payload bytes")
        }
        return .record(payload: range, next: range.upperBound)
    }

    /// The first offset after `offset` where a whole, checksummed record starts, if any. Used
    /// only after damage, to tell a torn tail (nothing good follows) from corruption in the
    /// middle (good records follow). Zero bytes are skipped without computing anything.
    /// - Complexity: O(end - offset) header checks, plus a payload checksum per header that passes.
    static func nextGoodRecord(_ bytes: [UInt8], after offset: Int, end: Int, maxPayload: Int) -> Int? {
        bytes.withUnsafeBytes { p -> Int? in
            var o = offset + 1
            while o + headerSize <= end {
                if p[o] == 0 && p[o + 1] == 0 && p[o + 2] == 0 && p[o + 3] == 0 {
                    o += 1
                    continue
                }
                if case .record = parse(p, at: o, end: end, maxPayload: maxPayload) { return o }
                o += 1
            }
            return nil
        }
    }

    private static func allZero(_ p: UnsafeRawBufferPointer, _ from: Int, _ to: Int) -> Bool {
        var i = from
        while i < to { if p[i] != 0 { return false }; i += 1 }
        return true
    }

    static func isAllZero(_ bytes: [UInt8], from: Int, to: Int) -> Bool {
        bytes.withUnsafeBytes { allZero($0, from, to) }
    }
}
