extension SnapshotOperation {
    /// Where an insert or a move lands, relative to an anchor of the same kind
    /// (a section relative to a section, an item relative to an item).
    public enum Placement: Hashable, Sendable {
        case before(SnapshotIdentifier)
        case after(SnapshotIdentifier)

        @inlinable public var anchor: SnapshotIdentifier {
            switch self {
            case .before(let id), .after(let id): return id
            }
        }
    }
}

extension SnapshotOperation {
    /// How a payload update should be shown, after UIKit: `reload` replaces the cell,
    /// `reconfigure` (iOS 15) keeps the cell and refreshes its content.
    public enum UpdateKind: UInt8, Hashable, Sendable {
        case reload = 0
        case reconfigure = 1
    }
}

/// One change to a snapshot. This closed set is what every layer speaks: the wire carries it
/// (Protocol/PROTOCOL.md, "Operations"), the daemon validates and applies it, the client replays it.
///
/// Every operation names what it touches by identifier, never by index, as UIKit's snapshot
/// mutators do: that is what keeps a batch meaningful when writers act concurrently.
///
/// In an outline (items with parents, `NSDiffableDataSourceSectionSnapshot`) a section is an
/// ordered forest kept in depth-first order, and the flat operations act on whole subtrees:
/// `appendItems` appends roots; `insertItems(.before(a))` inserts siblings of `a` (same parent)
/// just before it, `.after(a)` just after `a`'s whole subtree; `deleteItems` removes each item
/// with its descendants; `moveItem` makes the item, with its subtree, a sibling of the anchor,
/// placed as `insertItems` places; `moveItemToSection` makes it the section's last root. On a
/// flat section each of these is exactly its flat meaning.
public enum SnapshotOperation: Hashable, Sendable {
    // MARK: Sections
    /// `appendSections(_:)`: append new sections, in order, after the last one.
    case appendSections([SnapshotElement])
    /// `insertSections(_:beforeSection:)` / `insertSections(_:afterSection:)`.
    case insertSections([SnapshotElement], SnapshotOperation.Placement)
    /// `deleteSections(_:)`: removes each section together with its items.
    case deleteSections([SnapshotIdentifier])
    /// `moveSection(_:beforeSection:)` / `moveSection(_:afterSection:)`. Items travel with it.
    case moveSection(SnapshotIdentifier, SnapshotOperation.Placement)
    /// Replace section payloads (`reloadSections(_:)`).
    case updateSections([SnapshotElement])

    // MARK: Items
    /// `appendItems(_:toSection:)`: `nil` means the last section.
    case appendItems([SnapshotElement], toSection: SnapshotIdentifier?)
    /// `insertItems(_:beforeItem:)` / `insertItems(_:afterItem:)`.
    case insertItems([SnapshotElement], SnapshotOperation.Placement)
    /// `deleteItems(_:)`.
    case deleteItems([SnapshotIdentifier])
    /// `deleteAllItems()`: removes every item and every section, as UIKit does.
    case deleteAllItems
    /// `moveItem(_:beforeItem:)` / `moveItem(_:afterItem:)`; may cross sections.
    case moveItem(SnapshotIdentifier, SnapshotOperation.Placement)
    /// Move an item to the end of a section, which may be empty (UIKit has no such call; it
    /// keeps the item's identity where a delete and append would not).
    case moveItemToSection(SnapshotIdentifier, section: SnapshotIdentifier)
    /// Replace item payloads; `kind` says whether the client should reload or reconfigure.
    case updateItems([SnapshotElement], SnapshotOperation.UpdateKind)

    // MARK: Outlines (protocol version 2)
    /// `append(_:to: parent)` of a section snapshot: the items become the parent's last children.
    case appendChildren([SnapshotElement], toParent: SnapshotIdentifier)
    /// Move an item with its subtree to the end of `parent`'s children (parent may be in another section).
    case moveItemToParent(SnapshotIdentifier, parent: SnapshotIdentifier)
}

extension SnapshotOperation {
    /// Whether the operation exists only with outlines (protocol version 2, PROTOCOL.md §5):
    /// the one place that says so for the client, the daemon and their version 1 rules.
    @inlinable public var isOutlineOperation: Bool {
        switch self {
        case .appendChildren, .moveItemToParent: true
        default: false
        }
    }
}
