/// A room name as the protocol compares it: by its UTF-8 bytes (PROTOCOL.md §2, "strings are
/// compared byte for byte"), for use as a dictionary key.
///
/// Swift's `String` equality is canonical equivalence: "é" precomposed (C3 A9) equals "e"
/// followed by U+0301 (65 CC 81). Keyed by `String`, two rooms whose names differ in bytes would
/// be one room, and a grant for one name (matched byte for byte) would reach the other's data.
///
/// - Complexity: hashing and `==` are O(name bytes), without copying the name.
package struct RoomName: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    package let string: String

    package init(_ string: String) { self.string = string }
    package init(stringLiteral value: String) { self.init(value) }

    package static func == (a: RoomName, b: RoomName) -> Bool {
        a.string.utf8.elementsEqual(b.string.utf8)
    }

    package func hash(into hasher: inout Hasher) {
        var string = string
        string.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        hasher.combine(string.utf8.count)
    }

    package var description: String { string }
}
