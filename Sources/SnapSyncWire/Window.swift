public import SnapSyncModel

/// One section's item count in a WINDOW_DIFF (version 4, §11.31): a section whose count changed,
/// or that is new to the windowed member.
public struct SectionCount: Hashable, Sendable {
    public var section: SnapshotIdentifier
    public var items: UInt64

    public init(section: SnapshotIdentifier, items: UInt64) {
        self.section = section
        self.items = items
    }
}

/// The `kind` byte of a `section_window` (§9, "Windows").
enum SectionWindowKind: UInt8 {
    case first = 0
    case last = 1
    case around = 2
}

extension [UInt8] {
    /// A `section_window` (§9, "Windows").
    mutating func appendSectionWindow(_ window: SectionWindow) {
        appendBytes(window.section.bytes)
        switch window.range {
        case .first(let count):
            append(SectionWindowKind.first.rawValue)
            appendVarint(count)
        case .last(let count):
            append(SectionWindowKind.last.rawValue)
            appendVarint(count)
        case .around(let anchor, let before, let after):
            append(SectionWindowKind.around.rawValue)
            appendBytes(anchor.bytes)
            appendVarint(before)
            appendVarint(after)
        }
    }

    /// A `window`: `list<section_window>`.
    mutating func appendWindow(_ window: [SectionWindow]) {
        appendVarint(UInt64(window.count))
        for sectionWindow in window { appendSectionWindow(sectionWindow) }
    }
}
