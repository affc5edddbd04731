/// The protocol versions this codec speaks (PROTOCOL.md §8.2): one place for the daemon that
/// answers HELLO, the client that sends it, and the tools.
public enum ProtocolVersion {
    /// The version PROTOCOL.md describes: version 1 plus outlines and REPLACE_SECTION. A WELCOME
    /// to a client that offers it names it.
    public static let current: UInt64 = 2
    /// Every version spoken, most preferred first: what a HELLO offers.
    public static let supported: [UInt64] = [2, 1]

    /// The version a server chooses for a HELLO offering `offered`: the highest of the list it
    /// speaks (§8.2), or `nil` (ERROR `unsupported_version`).
    public static func chosen(from offered: [UInt64]) -> UInt64? {
        offered.filter { supported.contains($0) }.max()
    }

    /// Whether `version` has outlines: the `levels` part, `append_children`,
    /// `move_item_to_parent` and REPLACE_SECTION (version 2 and later).
    public static func hasOutlines(_ version: UInt64) -> Bool { version >= 2 }
}
