/// Size limits, checked on every entry point that adds or changes content (apply, diff input
/// validation, decoding). They are parameters, not constants: the daemon takes them from flags
/// and announces them in WELCOME; the client adopts the server's.
public struct SnapshotLimits: Hashable, Sendable {
    /// Longest section or item identifier, in bytes.
    public var maxIdentifierBytes: Int
    /// Largest section or item payload, in bytes.
    public var maxPayloadBytes: Int
    /// Most items in one snapshot (room), across all sections.
    public var maxItems: Int
    /// Most sections in one snapshot (room).
    public var maxSections: Int
    /// Largest canonical encoding of one snapshot (Protocol/PROTOCOL.md §4), in bytes.
    ///
    /// The default leaves 64 KiB under the default 16 MiB `max_frame_bytes`, so that a whole room
    /// always fits in one SNAPSHOT frame together with its header fields (request id, room name,
    /// epoch, version, digest).
    public var maxSnapshotBytes: Int
    /// Levels an outline may have: roots are level 0, so the deepest item sits at level
    /// `maxOutlineDepth - 1`. Bounds the walks up an item's ancestors (cycle checks) and the
    /// recursion a client's tree view does.
    public var maxOutlineDepth: Int

    public static let defaultMaxSnapshotBytes = 16 * 1024 * 1024 - 64 * 1024

    public init(
        maxIdentifierBytes: Int = 256, maxPayloadBytes: Int = 64 * 1024,
        maxItems: Int = 1_000_000, maxSections: Int = 100_000,
        maxSnapshotBytes: Int = SnapshotLimits.defaultMaxSnapshotBytes, maxOutlineDepth: Int = 64
    ) {
        self.maxIdentifierBytes = maxIdentifierBytes
        self.maxPayloadBytes = maxPayloadBytes
        self.maxItems = maxItems
        self.maxSections = maxSections
        self.maxSnapshotBytes = maxSnapshotBytes
        self.maxOutlineDepth = maxOutlineDepth
    }

    public static let `default` = SnapshotLimits()
    /// No practical limit: for tests and tools that only model snapshots.
    public static let unlimited = SnapshotLimits(
        maxIdentifierBytes: .max, maxPayloadBytes: .max, maxItems: .max, maxSections: .max,
        maxSnapshotBytes: .max, maxOutlineDepth: .max)
}
