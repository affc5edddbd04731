import SnapSyncModel

/// A windowed member of a room (PROTOCOL.md §9, "Windows"): its effective window and the window
/// snapshot its replica holds, which the next WINDOW_DIFF starts from.
final class MemberWindow {
    let session: Session
    /// The window as last sent (after any re-anchoring).
    var window: [SectionWindow]
    /// `room.snapshot.windowSnapshot(window)` as of the last frame sent to this member.
    var snapshot: RoomSnapshot {
        didSet { unfilledSections = Self.unfilled(window, in: snapshot) }
    }
    /// The sections whose window holds fewer rows than it asks for: an item placed anywhere in
    /// them may come in. Kept with `snapshot` (set with `window` first), so that a write
    /// elsewhere costs this member no count of its rows.
    private(set) var unfilledSections: Set<SnapshotIdentifier>
    /// Sections whose count changed since the last frame this member got: sent with its next
    /// frame, or by the counts timer (`Hub.flushWindowCounts`).
    var staleCounts = Set<SnapshotIdentifier>()

    init(session: Session, window: [SectionWindow], snapshot: RoomSnapshot) {
        self.session = session
        self.window = window
        self.snapshot = snapshot
        unfilledSections = Self.unfilled(window, in: snapshot)
    }

    private static func unfilled(_ window: [SectionWindow], in snapshot: RoomSnapshot) -> Set<SnapshotIdentifier> {
        Set(window.filter { UInt64(snapshot.numberOfRootItems(inSection: $0.section) ?? 0) < $0.size }.map(\.section))
    }
}
