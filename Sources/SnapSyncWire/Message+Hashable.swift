// Message equality is byte-exact: two messages are equal when they encode to the same body.
//
// Why not synthesized: `RoomSnapshot` is only Equatable, and Swift's `String ==` compares by Unicode
// canonical equivalence, so "é" and "e\u{301}" would be equal although they are different room
// names on the wire. Encoding is canonical (minimal varints, fixed field order, snapshot order),
// so equal encodings mean equal messages. Cost: O(size) and one allocation per side; messages
// are compared in tests and tools, not on the hot path.

extension Message: Hashable {
    public static func == (lhs: Message, rhs: Message) -> Bool {
        guard lhs.type == rhs.type else { return false }
        return lhs.encodedBody == rhs.encodedBody
    }

    public func hash(into hasher: inout Hasher) {
        encodedBody.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    private var encodedBody: [UInt8] {
        var body: [UInt8] = []
        FrameEncoder.appendBody(self, into: &body)
        return body
    }
}
