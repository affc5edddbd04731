// The one JSON writer of snapsync-bench: every subcommand prints one JSON object per case per
// line on stdout (so results can be piped into jq or appended to a log), fields in the order
// given. Without Foundation, whose JSONEncoder neither keeps field order nor fixes decimals.

enum JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral {
    case string(String)
    case int(Int)
    case bool(Bool)
    case null
    /// Exactly `digits` decimals ("1.500").
    case double(Double, digits: Int)
    /// At most `digits` decimals, trailing zeros dropped ("1.5", "12").
    case decimal(Double, digits: Int)
    case array([JSONValue])
    case object([(String, JSONValue)])

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .int(value) }
    init(floatLiteral value: Double) { self = .double(value, digits: 3) }
    init(booleanLiteral value: Bool) { self = .bool(value) }

    static func number(_ value: Double, digits: Int = 3) -> JSONValue { .double(value, digits: digits) }

    /// `.null` for nil.
    static func optional(_ value: JSONValue?) -> JSONValue { value ?? .null }

    var json: String {
        switch self {
        case .int(let n): return String(n)
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        case .double(let x, let digits): return JSONValue.fixed(x, digits: digits) ?? "null"
        case .decimal(let x, let digits): return JSONValue.trimmed(x, digits: digits) ?? "null"
        case .array(let values): return "[" + values.map(\.json).joined(separator: ", ") + "]"
        case .object(let fields):
            return "{" + fields.map { JSONValue.string($0.0).json + ": " + $0.1.json }.joined(separator: ", ") + "}"
        case .string(let s):
            var out = "\""
            for scalar in s.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case "\t": out += "\\t"
                case _ where scalar.value < 0x20: out += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
    }

    /// Fixed decimals without Foundation: scale, round, split. Nil for infinities and NaN.
    static func fixed(_ x: Double, digits: Int) -> String? {
        guard x.isFinite else { return nil }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = (abs(x) * scale).rounded()
        let whole = Int(scaled / scale)
        var fraction = String(Int(scaled) - whole * Int(scale))
        while fraction.count < digits { fraction = "0" + fraction }
        let sign = x < 0 && scaled > 0 ? "-" : ""
        return sign + String(whole) + (digits > 0 ? "." + fraction : "")
    }

    /// `fixed` without the trailing zeros (and point) it would print.
    static func trimmed(_ x: Double, digits: Int) -> String? {
        guard var text = fixed(x, digits: digits) else { return nil }
        guard digits > 0 else { return text }
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }
}

extension Bench {
    /// Prints one JSON object on one line, fields in the given order.
    static func printJSON(_ fields: KeyValuePairs<String, JSONValue>) {
        printJSON(fields.map { ($0.key, $0.value) })
    }

    static func printJSON(_ fields: [(String, JSONValue)]) {
        print(JSONValue.object(fields).json)
    }

    /// A number for text next to the JSON: at most `digits` decimals, as `.decimal` prints it.
    static func decimal(_ x: Double, digits: Int) -> String {
        JSONValue.trimmed(x, digits: digits) ?? "n/a"
    }
}
