/// Makes untrusted bytes safe to put in a log line: one line, printable ASCII only, bounded.
///
/// After Redis's protocol-error log, which shows "a printable sample" of the bad buffer: a
/// client can send anything, and none of it may forge log lines (newlines), drive a terminal
/// (escape sequences) or flood the journal (size).
package enum LogEscaping {
    /// Printable ASCII as is (backslash and double quote escaped), everything else as `\xNN`,
    /// at most `limit` input bytes; a cut sample ends with `…(+N bytes)`.
    /// - Complexity: O(min(bytes.count, limit)).
    package static func sample(_ bytes: some Collection<UInt8>, limit: Int = 64) -> String {
        var out = ""
        out.reserveCapacity(min(bytes.count, limit) * 2)
        var taken = 0
        for byte in bytes {
            if taken == limit { break }
            taken += 1
            appendEscaped(byte, to: &out)
        }
        if bytes.count > taken { out += "…(+\(bytes.count - taken) bytes)" }
        return out
    }

    /// A text made safe for one log line: control and invisible format characters as `\xNN`
    /// (their UTF-8 bytes), `\n`, `\t`, `\r`; double quotes escaped (values may be quoted).
    /// Printable text (é, 😀) and backslashes are kept as they are, so a `sample` embedded in a
    /// message or value reads the same in the log.
    package static func line(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") }) {
            return text
        }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\"": out += "\\\""
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value)
                    || scalar.properties.generalCategory == .format || scalar.value == 0x2028 || scalar.value == 0x2029
                {
                    for byte in String(scalar).utf8 { appendHex(byte, to: &out) }
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    private static func appendEscaped(_ byte: UInt8, to out: inout String) {
        switch byte {
        case UInt8(ascii: "\\"): out += "\\\\"
        case UInt8(ascii: "\""): out += "\\\""
        case 0x20..<0x7F: out.unicodeScalars.append(Unicode.Scalar(byte))
        default: appendHex(byte, to: &out)
        }
    }

    private static func appendHex(_ byte: UInt8, to out: inout String) {
        let digits: [Character] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f"]
        out += "\\x"
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0F)])
    }
}
