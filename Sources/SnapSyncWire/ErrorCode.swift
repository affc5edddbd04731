public import SnapSyncModel

/// The error codes of Protocol/PROTOCOL.md §6, one case per row.
///
/// Codes 1–19 travel in ERROR (the connection ends), 20 and up in REJECT (one request failed).
/// Codes 20–32 and 51–53 map one-to-one onto the model's `BatchError.Violation`.
public enum ErrorCode: UInt64, Hashable, Sendable, CaseIterable {
    case malformedFrame = 1
    case frameTooLarge = 2
    case unknownMessageType = 3
    case handshakeRequired = 4
    case unsupportedVersion = 5
    case badMagic = 6
    case tooManyConnections = 7
    case slowConsumer = 8
    case timeout = 9
    case shuttingDown = 10
    case unauthorized = 11
    case inputBudgetExceeded = 12
    case tokenExpired = 13

    case duplicateSection = 20
    case duplicateItem = 21
    case sectionNotFound = 22
    case itemNotFound = 23
    case anchorSectionNotFound = 24
    case anchorItemNotFound = 25
    case noSections = 26
    case anchorIsSelf = 27
    case identifierTooLong = 28
    case payloadTooLarge = 29
    case tooManyItems = 30
    case tooManySections = 31
    case snapshotTooLarge = 32

    case versionMismatch = 40
    case tooManyRooms = 41
    case tooManyRoomsForConnection = 42
    case notJoined = 43
    case invalidRoomName = 44
    case storageFailure = 45
    case writeIDConflict = 46
    case serverFull = 47
    case forbidden = 48
    /// LEFT only: the room was deleted by DROP (§11.19).
    case roomDeleted = 49
    /// LEFT only: the room expired, its time-to-live passed with no member and no write (§11.20).
    case roomExpired = 50
    /// The parent of `append_children` / `move_item_to_parent` does not exist.
    case parentNotFound = 51
    /// An item would be moved under itself or under or next to one of its descendants.
    case moveIntoOwnSubtree = 52
    /// An item would be at a level of `max_outline_depth` or more.
    case outlineTooDeep = 53
    /// A version 1 connection's JOIN of an outline room (REJECT), or a room that became an
    /// outline while a version 1 connection was a member (LEFT) (§8.2).
    case outlineUnsupported = 54
    /// REJECT only (version 3): a costly request declined for now, nothing done; retry later.
    /// The daemon sends it for a VERIFY of a large room whose digest at that version it has not
    /// computed, within `verifyDigestInterval` of the last such computation for the room.
    case busy = 55
    /// REJECT only: a request that would create a room (its first write, or a SET_TTL of a room
    /// never written) is refused because a quota on new rooms is reached: the server's stored
    /// rooms or data directory bytes, or the principal's room creations per minute. Nothing was
    /// applied; rooms that exist are never refused it.
    case quotaExceeded = 56
    /// REJECT only (version 4): a WINDOW asks for more rows, all its sections together, than
    /// `max_window_rows` (§12). Nothing changed.
    case windowTooLarge = 57

    /// Which message carries a code.
    public enum Kind: Hashable, Sendable {
        /// Sent in ERROR; the server closes the connection after it.
        case error
        /// Sent in REJECT; the request failed and nothing was applied.
        case reject
    }

    public var kind: Kind { rawValue < 20 ? .error : .reject }

    /// The snake_case name of the table (and of the JSON form and the vectors' `error` field).
    public var name: String {
        switch self {
        case .malformedFrame: "malformed_frame"
        case .frameTooLarge: "frame_too_large"
        case .unknownMessageType: "unknown_message_type"
        case .handshakeRequired: "handshake_required"
        case .unsupportedVersion: "unsupported_version"
        case .badMagic: "bad_magic"
        case .tooManyConnections: "too_many_connections"
        case .slowConsumer: "slow_consumer"
        case .timeout: "timeout"
        case .shuttingDown: "shutting_down"
        case .unauthorized: "unauthorized"
        case .inputBudgetExceeded: "input_budget_exceeded"
        case .tokenExpired: "token_expired"
        case .duplicateSection: "duplicate_section"
        case .duplicateItem: "duplicate_item"
        case .sectionNotFound: "section_not_found"
        case .itemNotFound: "item_not_found"
        case .anchorSectionNotFound: "anchor_section_not_found"
        case .anchorItemNotFound: "anchor_item_not_found"
        case .noSections: "no_sections"
        case .anchorIsSelf: "anchor_is_self"
        case .identifierTooLong: "identifier_too_long"
        case .payloadTooLarge: "payload_too_large"
        case .tooManyItems: "too_many_items"
        case .tooManySections: "too_many_sections"
        case .snapshotTooLarge: "snapshot_too_large"
        case .versionMismatch: "version_mismatch"
        case .tooManyRooms: "too_many_rooms"
        case .tooManyRoomsForConnection: "too_many_rooms_for_connection"
        case .notJoined: "not_joined"
        case .invalidRoomName: "invalid_room_name"
        case .storageFailure: "storage_failure"
        case .writeIDConflict: "write_id_conflict"
        case .serverFull: "server_full"
        case .forbidden: "forbidden"
        case .roomDeleted: "room_deleted"
        case .roomExpired: "room_expired"
        case .parentNotFound: "parent_not_found"
        case .moveIntoOwnSubtree: "move_into_own_subtree"
        case .outlineTooDeep: "outline_too_deep"
        case .outlineUnsupported: "outline_unsupported"
        case .busy: "busy"
        case .quotaExceeded: "quota_exceeded"
        case .windowTooLarge: "window_too_large"
        }
    }

    /// The code with this snake_case name, if any.
    public init?(name: String) {
        guard let code = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = code
    }
}

extension ErrorCode {
    /// The wire code of a model violation (codes 20–32 and 51–53).
    public init(_ violation: BatchError.Violation) {
        switch violation {
        case .duplicateSection: self = .duplicateSection
        case .duplicateItem: self = .duplicateItem
        case .sectionNotFound: self = .sectionNotFound
        case .itemNotFound: self = .itemNotFound
        case .anchorSectionNotFound: self = .anchorSectionNotFound
        case .anchorItemNotFound: self = .anchorItemNotFound
        case .noSections: self = .noSections
        case .anchorIsSelf: self = .anchorIsSelf
        case .identifierTooLong: self = .identifierTooLong
        case .payloadTooLarge: self = .payloadTooLarge
        case .tooManyItems: self = .tooManyItems
        case .tooManySections: self = .tooManySections
        case .snapshotTooLarge: self = .snapshotTooLarge
        case .parentNotFound: self = .parentNotFound
        case .moveIntoOwnSubtree: self = .moveIntoOwnSubtree
        case .outlineTooDeep: self = .outlineTooDeep
        }
    }

    /// The model violation a REJECT describes, for codes 20–32 and 51–53; `nil` for other codes, and when
    /// a rule about one identifier arrives without one. SnapshotLimits and sizes are not on the wire:
    /// they are taken from `limits` (the server's, from WELCOME) and the size is reported as 0.
    public func violation(identifier: SnapshotIdentifier?, limits: SnapshotLimits) -> BatchError.Violation? {
        switch self {
        case .duplicateSection: identifier.map { .duplicateSection($0) }
        case .duplicateItem: identifier.map { .duplicateItem($0) }
        case .sectionNotFound: identifier.map { .sectionNotFound($0) }
        case .itemNotFound: identifier.map { .itemNotFound($0) }
        case .anchorSectionNotFound: identifier.map { .anchorSectionNotFound($0) }
        case .anchorItemNotFound: identifier.map { .anchorItemNotFound($0) }
        case .noSections: .noSections
        case .anchorIsSelf: identifier.map { .anchorIsSelf($0) }
        case .identifierTooLong: identifier.map { .identifierTooLong($0, limit: limits.maxIdentifierBytes) }
        case .payloadTooLarge: identifier.map { .payloadTooLarge($0, size: 0, limit: limits.maxPayloadBytes) }
        case .tooManyItems: .tooManyItems(limit: limits.maxItems)
        case .tooManySections: .tooManySections(limit: limits.maxSections)
        case .snapshotTooLarge: .snapshotTooLarge(limit: limits.maxSnapshotBytes)
        case .parentNotFound: identifier.map { .parentNotFound($0) }
        case .moveIntoOwnSubtree: identifier.map { .moveIntoOwnSubtree($0) }
        case .outlineTooDeep: identifier.map { .outlineTooDeep($0, limit: limits.maxOutlineDepth) }
        default: nil
        }
    }
}

extension ErrorCode {
    /// The spelling before identifiers took one form (`ID`) across the package.
    @available(*, deprecated, renamed: "writeIDConflict")
    public static var writeIdConflict: ErrorCode { .writeIDConflict }
}
