import SnapSyncModel

/// A windowed member of a room (PROTOCOL.md §9, "Windows"): its effective window and the window
/// snapshot its replica holds, which the next WINDOW_DIFF starts from.
final class MemberWindow {
    let session: Session
    /// The window as last sent (after any re-anchoring).
    var window: [SectionWindow]
    /// `room.snapshot.windowSnapshot(window)` as of the last frame sent to this member.
    var snapshot: RoomSnapshot
    /// Sections whose count changed since the last frame this member got: sent with its next
    /// frame, or by the counts timer (`Hub.flushWindowCounts`).
    var staleCounts = Set<SnapshotIdentifier>()

    init(session: Session, window: [SectionWindow], snapshot: RoomSnapshot) {
        self.session = session
        self.window = window
        self.snapshot = snapshot
    }

    /// Whether a change that touched `touched` items, and placed items into `filledSections`,
    /// may change what this member holds. Conservative (a `true` may end in no frame), never
    /// wrong the other way: a change outside the window moves no row in or out of it unless it
    /// places an item next to one of its items (caught by `touched`, which holds every placed
    /// item's neighbours), or it places an item into a section whose window is not full.
    /// - Complexity: O(touched + sections of the window), expected.
    func mayChange(touched: Set<SnapshotIdentifier>, filledSections: Set<SnapshotIdentifier>) -> Bool {
        for id in touched where snapshot.contains(item: id) { return true }
        for sectionWindow in window where filledSections.contains(sectionWindow.section) {
            let rows = UInt64(snapshot.rootItems(inSection: sectionWindow.section)?.count ?? 0)
            if rows < sectionWindow.size { return true }
        }
        return false
    }
}
