extension RoomSnapshot {
    /// A text dump for debugging, after UIKit's `visualDescription()`:
    /// ```
    /// RoomSnapshot: 2 sections, 3 items
    /// ├─ section main (2) = "payload"
    /// │  ├─ a = "hello"
    /// │  └─ b
    /// └─ section side (1)
    ///    └─ c
    /// ```
    /// Children print under their parent, one level further in. Payloads print as text when they
    /// are printable UTF-8 (cut at 40 characters), else as a size.
    /// - Complexity: O(n)
    public func visualDescription() -> String {
        var out = "RoomSnapshot: \(numberOfSections) section\(numberOfSections == 1 ? "" : "s"), \(numberOfItems) item\(numberOfItems == 1 ? "" : "s")\n"
        var s = firstSection
        while s != Self.none {
            let section = sectionNodes[Int(s)]
            let lastSection = section.next == Self.none
            out += (lastSection ? "└─ " : "├─ ") + "section \(section.id) (\(section.itemCount))" + Self.describe(section.payload) + "\n"
            out += describeItems(ofSectionSlot: s, indent: lastSection ? "   " : "│  ")
            s = section.next
        }
        return out
    }

    /// One line per item of a section, children indented under their parent, each line after
    /// `indent`. O(items in the section)
    func describeItems(ofSectionSlot s: Slot, indent: String) -> String {
        var slots: [Slot] = []
        var i = sectionNodes[Int(s)].firstItem
        while i != Self.none {
            slots.append(i)
            i = itemNodes[Int(i)].next
        }
        // Walking back: an item has a later sibling when an item of its level came after it
        // with no shallower item between.
        var hasLaterSibling = [Bool](repeating: false, count: slots.count)
        var pending: [Bool] = []
        for k in slots.indices.reversed() {
            let level = levelOfSlot(slots[k])
            if pending.count <= level { pending += repeatElement(false, count: level + 1 - pending.count) }
            hasLaterSibling[k] = pending[level]
            pending[level] = true
            pending.removeSubrange((level + 1)...)
        }
        var out = ""
        // For each level above the current item: whether that ancestor has a later sibling.
        var rails: [Bool] = []
        for (k, slot) in slots.enumerated() {
            let level = levelOfSlot(slot)
            rails.removeSubrange(level...)
            out += indent + rails.map { $0 ? "│  " : "   " }.joined() + (hasLaterSibling[k] ? "├─ " : "└─ ")
            out += "\(itemIdentifier(at: slot))" + Self.describe(itemPayload(at: slot)) + "\n"
            rails.append(hasLaterSibling[k])
        }
        return out
    }

    static func describe(_ payload: SnapshotPayload) -> String {
        if payload.isEmpty { return "" }
        if let text = payload.string, text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) {
            let cut = text.count > 40 ? String(text.prefix(40)) + "…" : text
            return " = \"\(cut)\""
        }
        return " = <\(payload.count) bytes>"
    }
}

extension RoomSnapshot: CustomStringConvertible {
    public var description: String { visualDescription() }
}
