import Foundation

/// Unpadded base64url (RFC 7515 §2), for the key file's members. Tokens themselves are split
/// and decoded by jwt-kit; this decoder only names the broken part of a token jwt-kit refused.
enum Base64URL {
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// The bytes, or nil when `text` has padding, a character outside the base64url alphabet,
    /// a length no encoding has, or unused trailing bits that are not zero (RFC 4648 §3.5: such
    /// a text is not the encoding of any bytes, and accepting it would give one key two spellings).
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let isAlphabet = text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default: false
            }
        }
        guard isAlphabet, text.utf8.count % 4 != 1 else { return nil }
        var standard = String(text).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        guard let bytes = Data(base64Encoded: standard).map({ Array($0) }), encode(bytes) == text else { return nil }
        return bytes
    }
}
