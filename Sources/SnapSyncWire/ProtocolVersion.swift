/// The protocol versions this codec speaks (PROTOCOL.md §8.2): one place for the daemon that
/// answers HELLO, the client that sends it, and the tools.
public enum ProtocolVersion {
    /// The version PROTOCOL.md describes: version 3 plus presence.
    /// A WELCOME to a client that offers it names it.
    public static let current: UInt64 = 4
    /// Every version spoken, highest first: what a HELLO offers (the server takes the highest
    /// it speaks, whatever the order).
    public static let supported: [UInt64] = [4, 3, 2, 1]
    /// The newest version without the `chain` field: the layout of the DIFF frames a chain is
    /// computed over, which logs, checkpoints and the cluster's records hold, and from which a
    /// version 3 member's frame is made (`RoomChain.chainedDiffFrame`). What a decoder reads
    /// unless told the connection's version.
    public static let unchained: UInt64 = 2

    /// The version a server chooses for a HELLO offering `offered`: the highest of the list it
    /// speaks (§8.2), or `nil` (ERROR `unsupported_version`).
    public static func chosen(from offered: [UInt64]) -> UInt64? {
        offered.filter { supported.contains($0) }.max()
    }

    /// Whether `version` has outlines: the `levels` part, `append_children`,
    /// `move_item_to_parent` and REPLACE_SECTION (version 2 and later).
    public static func hasOutlines(_ version: UInt64) -> Bool { version >= 2 }

    /// Whether `version` has the room's chain: a `chain` field in SNAPSHOT (before `snapshot`),
    /// at the end of DIFF and of JOIN's resume position, and VERIFY / DIGEST (version 3 and
    /// later).
    public static func hasChain(version: UInt64) -> Bool { version >= 3 }

    /// Whether `version` has presence: PRESENCE_WATCH, PRESENCE_LIST, SET_PRESENCE, PRESENCE,
    /// PRESENCE_DIFF and the limit keys 10 and 11 (version 4 and later).
    public static func hasPresence(_ version: UInt64) -> Bool { version >= 4 }
}
