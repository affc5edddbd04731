public import SnapSyncModel

/// The keys of WELCOME's `limits` list (Protocol/PROTOCOL.md §3).
public enum LimitKey: UInt64, Hashable, Sendable, CaseIterable {
    case maxFrameBytes = 1
    case maxIdentifierBytes = 2
    case maxPayloadBytes = 3
    case maxItemsPerRoom = 4
    case maxSectionsPerRoom = 5
    case maxRoomsPerConnection = 6
    case maxSnapshotBytes = 7
    case historyCount = 8
    /// Version 2 and later (§12): a version 1 WELCOME does not carry it.
    case maxOutlineDepth = 9
    /// Version 4 and later (§12).
    case maxPresenceBytes = 10
    /// Version 4 and later (§12).
    case presenceView = 11
    /// Version 4 and later (§12).
    case maxWindowRows = 12

    /// Whether a WELCOME of protocol `version` announces this key.
    public func exists(inVersion version: UInt64) -> Bool {
        switch self {
        case .maxOutlineDepth: ProtocolVersion.hasOutlines(version)
        case .maxPresenceBytes, .presenceView, .maxWindowRows: ProtocolVersion.hasPresence(version)
        default: true
        }
    }
}

/// Every limit the protocol announces in WELCOME, with the defaults of PROTOCOL.md's limits table.
/// The content limits are the model's `SnapshotLimits`, carried as is, so one value configures both
/// `RoomSnapshot.apply` and the codec.
public struct WireLimits: Hashable, Sendable {
    /// Largest frame body `L` a receiver accepts (type byte + fields). Default 16 MiB.
    public var maxFrameBytes: Int
    /// SnapshotIdentifier, payload, item and section limits (default `SnapshotLimits.default`).
    public var model: SnapshotLimits
    /// Most rooms one connection may have joined at once. Default 64.
    public var maxRoomsPerConnection: Int
    /// How many recent versions a room keeps for resume and idempotent writes: its resume window,
    /// in versions (the daemon also bounds its bytes, `--history-bytes`). Default 16,384.
    public var historyCount: Int
    /// Largest presence state a member may set (version 4). Default 1 KiB.
    public var maxPresenceBytes: Int
    /// Members of a room's presence view and of a PRESENCE page (version 4). Default 100.
    public var presenceView: Int
    /// Rows a window may ask for, all its sections together (version 4). Default 1,000.
    public var maxWindowRows: Int

    public init(
        maxFrameBytes: Int = 16 * 1024 * 1024, model: SnapshotLimits = .default,
        maxRoomsPerConnection: Int = 64, historyCount: Int = 16_384,
        maxPresenceBytes: Int = 1024, presenceView: Int = 100, maxWindowRows: Int = 1000
    ) {
        self.maxFrameBytes = maxFrameBytes
        self.model = model
        self.maxRoomsPerConnection = maxRoomsPerConnection
        self.historyCount = historyCount
        self.maxPresenceBytes = maxPresenceBytes
        self.presenceView = presenceView
        self.maxWindowRows = maxWindowRows
    }

    public static let `default` = WireLimits()

    /// No limit beyond what the formats allow: for reading back frames a room already accepted
    /// under its limits (a replayed log, a room's history), which must load again after an
    /// operator lowered a limit.
    package static let permissive: WireLimits = {
        var limits = WireLimits()
        limits.maxFrameBytes = Int(UInt32.max)
        limits.model = .unlimited
        return limits
    }()

    /// The limits a server announced: each known key overrides `defaults`; unknown keys are
    /// ignored (§3). Values too large for `Int` saturate at `Int.max`.
    public init(welcome entries: [Message.LimitEntry], defaults: WireLimits = .default) {
        self = defaults
        for entry in entries {
            guard let key = LimitKey(rawValue: entry.key) else { continue }
            self[key] = entry.value > UInt64(Int.max) ? Int.max : Int(entry.value)
        }
    }

    /// The entries a server puts in a WELCOME of the current version: every known key, in key order.
    public var welcomeEntries: [Message.LimitEntry] { welcomeEntries(version: ProtocolVersion.current) }

    /// The entries of a WELCOME of protocol `version`: every key that version has, in key order.
    public func welcomeEntries(version: UInt64) -> [Message.LimitEntry] {
        LimitKey.allCases.filter { $0.exists(inVersion: version) }.map { Message.LimitEntry($0, UInt64(clamping: self[$0])) }
    }

    public subscript(key: LimitKey) -> Int {
        get {
            switch key {
            case .maxFrameBytes: maxFrameBytes
            case .maxIdentifierBytes: model.maxIdentifierBytes
            case .maxPayloadBytes: model.maxPayloadBytes
            case .maxItemsPerRoom: model.maxItems
            case .maxSectionsPerRoom: model.maxSections
            case .maxRoomsPerConnection: maxRoomsPerConnection
            case .maxSnapshotBytes: model.maxSnapshotBytes
            case .historyCount: historyCount
            case .maxOutlineDepth: model.maxOutlineDepth
            case .maxPresenceBytes: maxPresenceBytes
            case .presenceView: presenceView
            case .maxWindowRows: maxWindowRows
            }
        }
        set {
            switch key {
            case .maxFrameBytes: maxFrameBytes = newValue
            case .maxIdentifierBytes: model.maxIdentifierBytes = newValue
            case .maxPayloadBytes: model.maxPayloadBytes = newValue
            case .maxItemsPerRoom: model.maxItems = newValue
            case .maxSectionsPerRoom: model.maxSections = newValue
            case .maxRoomsPerConnection: maxRoomsPerConnection = newValue
            case .maxSnapshotBytes: model.maxSnapshotBytes = newValue
            case .historyCount: historyCount = newValue
            case .maxOutlineDepth: model.maxOutlineDepth = newValue
            case .maxPresenceBytes: maxPresenceBytes = newValue
            case .presenceView: presenceView = newValue
            case .maxWindowRows: maxWindowRows = newValue
            }
        }
    }
}
