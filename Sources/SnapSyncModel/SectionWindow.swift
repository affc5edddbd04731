/// Which rows of one section a windowed member holds (Protocol/PROTOCOL.md §9, "Windows").
///
/// A section's **rows** are its roots (level-0 items) in order, each standing for its whole
/// subtree; a flat section's rows are its items. A window is a list of section windows, at most
/// one per section, and what it holds is a function of the room's state alone
/// (`RoomSnapshot.windowRows(_:)`), so that a server, a replica and a second implementation
/// agree on it exactly.
public struct SectionWindow: Hashable, Sendable {
    /// Which rows, by their place in the section.
    public enum Range: Hashable, Sendable {
        /// The first `count` rows.
        case first(UInt64)
        /// The last `count` rows.
        case last(UInt64)
        /// The anchor's row, with up to `before` rows before it and `after` rows after it. The
        /// anchor must be a root of the section; once it is not, the window moves to another
        /// anchor (`RoomSnapshot.reanchored(_:previousRows:)`).
        case around(anchor: SnapshotIdentifier, before: UInt64, after: UInt64)
    }

    public var section: SnapshotIdentifier
    public var range: Range

    public init(section: SnapshotIdentifier, range: Range) {
        self.section = section
        self.range = range
    }

    /// The rows it asks for: `count`, or `before + 1 + after` (saturating), what
    /// `max_window_rows` bounds.
    public var size: UInt64 {
        switch range {
        case .first(let count), .last(let count): count
        case .around(_, let before, let after):
            before >= .max - after ? .max : before + after + 1
        }
    }

    /// The anchor of an `around` window, else nil.
    public var anchor: SnapshotIdentifier? {
        if case .around(let anchor, _, _) = range { return anchor }
        return nil
    }
}

extension SectionWindow: CustomStringConvertible {
    public var description: String {
        switch range {
        case .first(let count): "\(section) first \(count)"
        case .last(let count): "\(section) last \(count)"
        case .around(let anchor, let before, let after): "\(section) around \(anchor) before \(before) after \(after)"
        }
    }
}
