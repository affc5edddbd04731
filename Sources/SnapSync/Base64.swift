/// Standard base64 (RFC 4648 §4, with padding), for PEM bodies and SPKI pins: a few hundred
/// bytes once per client, so a table-free codec is plenty, and it needs no Foundation.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// `bytes` in base64, padded with `=`. O(bytes).
    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var group = 0
            for (k, byte) in chunk.enumerated() { group |= Int(byte) << (16 - 8 * k) }
            for k in 0..<4 {
                out.append(k <= chunk.count ? alphabet[(group >> (18 - 6 * k)) & 63] : UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes `text` encodes, ignoring ASCII whitespace (PEM wraps its lines); `nil` for a
    /// character outside the alphabet, misplaced padding or a length that is not whole groups.
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var out: [UInt8] = []
        var group = 0, count = 0, padding = 0
        for character in text.utf8 {
            let value: Int
            switch character {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): continue
            case UInt8(ascii: "="):
                padding += 1
                value = 0
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = Int(character - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = Int(character - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = Int(character - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            default: return nil
            }
            // Padding ends the text: nothing but more padding may follow it.
            guard padding == 0 || character == UInt8(ascii: "=") else { return nil }
            group = group << 6 | value
            count += 1
            if count == 4 {
                guard padding <= 2 else { return nil }
                let bytes = [UInt8(group >> 16 & 0xFF), UInt8(group >> 8 & 0xFF), UInt8(group & 0xFF)]
                out.append(contentsOf: bytes[0..<(3 - padding)])
                group = 0
                count = 0
            }
        }
        guard count == 0, padding == 0 || !out.isEmpty else { return nil }
        return out
    }
}
