/// Why a batch was rejected: the index of the first operation that broke a rule, and the rule.
///
/// Each violation is one of UIKit's `NSInternalInconsistencyException` conditions (or a limit),
/// answered with a value instead of a crash. The snapshot is unchanged when this is thrown.
/// Each case maps one-to-one onto a wire error code (Protocol/PROTOCOL.md, "Error codes").
public struct BatchError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Index of the failing operation within the batch (0-based).
    public var operationIndex: Int
    public var violation: BatchError.Violation

    public init(operationIndex: Int, violation: BatchError.Violation) {
        self.operationIndex = operationIndex
        self.violation = violation
    }

    public var description: String { "operation \(operationIndex): \(violation)" }
}

extension BatchError {
    public enum Violation: Error, Hashable, Sendable, CustomStringConvertible {
        /// A section with this identifier already exists, or the batch adds it twice.
        case duplicateSection(SnapshotIdentifier)
        /// An item with this identifier already exists somewhere in the snapshot, or the batch adds it twice.
        case duplicateItem(SnapshotIdentifier)
        /// The section to delete, move, update or append to does not exist.
        case sectionNotFound(SnapshotIdentifier)
        /// The item to delete, move or update does not exist.
        case itemNotFound(SnapshotIdentifier)
        /// The section an insert or move is placed relative to does not exist.
        case anchorSectionNotFound(SnapshotIdentifier)
        /// The item an insert or move is placed relative to does not exist.
        case anchorItemNotFound(SnapshotIdentifier)
        /// `appendItems` with no section named, and the snapshot has no sections.
        case noSections
        /// A section or item is moved relative to itself.
        case anchorIsSelf(SnapshotIdentifier)
        /// An identifier is longer than `SnapshotLimits.maxIdentifierBytes`.
        case identifierTooLong(SnapshotIdentifier, limit: Int)
        /// A payload is larger than `SnapshotLimits.maxPayloadBytes`.
        case payloadTooLarge(SnapshotIdentifier, size: Int, limit: Int)
        /// The batch would leave more than `SnapshotLimits.maxItems` items.
        case tooManyItems(limit: Int)
        /// The batch would leave more than `SnapshotLimits.maxSections` sections.
        case tooManySections(limit: Int)
        /// The batch would make the snapshot's canonical encoding larger than
        /// `SnapshotLimits.maxSnapshotBytes` (wire code 32, `snapshot_too_large`).
        case snapshotTooLarge(limit: Int)
        /// `appendChildren` or `moveItemToParent` names a parent item that does not exist.
        case parentNotFound(SnapshotIdentifier)
        /// An item would be moved under or next to one of its own descendants, or under itself
        /// (UIKit's section snapshot crashes on the cycle). Names the moved item.
        case moveIntoOwnSubtree(SnapshotIdentifier)
        /// An item would sit at level `limit` or deeper (`SnapshotLimits.maxOutlineDepth`). Names the item
        /// the operation places: the first child appended, or the moved item.
        case outlineTooDeep(SnapshotIdentifier, limit: Int)

        /// The identifier the violation is about, if any.
        public var identifier: SnapshotIdentifier? {
            switch self {
            case .duplicateSection(let id), .duplicateItem(let id), .sectionNotFound(let id),
                .itemNotFound(let id), .anchorSectionNotFound(let id), .anchorItemNotFound(let id),
                .anchorIsSelf(let id), .identifierTooLong(let id, _), .payloadTooLarge(let id, _, _),
                .parentNotFound(let id), .moveIntoOwnSubtree(let id), .outlineTooDeep(let id, _):
                return id
            case .noSections, .tooManyItems, .tooManySections, .snapshotTooLarge:
                return nil
            }
        }

        public var description: String {
            switch self {
            case .duplicateSection(let id): return "section \(id) already exists"
            case .duplicateItem(let id): return "item \(id) already exists"
            case .sectionNotFound(let id): return "section \(id) does not exist"
            case .itemNotFound(let id): return "item \(id) does not exist"
            case .anchorSectionNotFound(let id): return "anchor section \(id) does not exist"
            case .anchorItemNotFound(let id): return "anchor item \(id) does not exist"
            case .noSections: return "cannot append items: the snapshot has no sections"
            case .anchorIsSelf(let id): return "\(id) cannot be placed relative to itself"
            case .identifierTooLong(let id, let limit): return "identifier \(id) is \(id.count) bytes, over the limit of \(limit)"
            case .payloadTooLarge(let id, let size, let limit): return "payload of \(id) is \(size) bytes, over the limit of \(limit)"
            case .tooManyItems(let limit): return "the snapshot would hold more than \(limit) items"
            case .tooManySections(let limit): return "the snapshot would hold more than \(limit) sections"
            case .snapshotTooLarge(let limit): return "the snapshot's encoding would exceed \(limit) bytes"
            case .parentNotFound(let id): return "parent item \(id) does not exist"
            case .moveIntoOwnSubtree(let id): return "\(id) cannot be moved under or next to its own descendants"
            case .outlineTooDeep(let id, let limit): return "\(id) would sit deeper than the outline limit of \(limit) levels"
            }
        }
    }
}
