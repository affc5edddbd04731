extension Snapshot {
    /// A text dump for debugging, after UIKit's `visualDescription()`:
    /// ```
    /// Snapshot: 2 sections, 3 items
    /// ├─ section main (2) = "payload"
    /// │  ├─ a = "hello"
    /// │  └─ b
    /// └─ section side (1)
    ///    └─ c
    /// ```
    /// Payloads print as text when they are printable UTF-8 (cut at 40 characters), else as a size.
    /// - Complexity: O(n)
    public func visualDescription() -> String {
        var out = "Snapshot: \(numberOfSections) section\(numberOfSections == 1 ? "" : "s"), \(numberOfItems) item\(numberOfItems == 1 ? "" : "s")\n"
        var s = firstSection
        while s != Self.none {
            let section = sectionNodes[Int(s)]
            let lastSection = section.next == Self.none
            out += (lastSection ? "└─ " : "├─ ") + "section \(section.id) (\(section.itemCount))" + Self.describe(section.payload) + "\n"
            var i = section.firstItem
            while i != Self.none {
                let item = itemNodes[Int(i)]
                out +=
                    (lastSection ? "   " : "│  ") + (item.next == Self.none ? "└─ " : "├─ ") + "\(itemIdentifier(at: i))" + Self.describe(itemPayload(at: i))
                    + "\n"
                i = item.next
            }
            s = section.next
        }
        return out
    }

    static func describe(_ payload: Payload) -> String {
        if payload.isEmpty { return "" }
        if let text = payload.string, text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) {
            let cut = text.count > 40 ? String(text.prefix(40)) + "…" : text
            return " = \"\(cut)\""
        }
        return " = <\(payload.count) bytes>"
    }
}

extension Snapshot: CustomStringConvertible {
    public var description: String { visualDescription() }
}
