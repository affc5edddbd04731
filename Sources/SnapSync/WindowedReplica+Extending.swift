// Growing a window by rows at one end (`WindowedReplica.extend(section:by:at:)`), within the
// server's `max_window_rows`: pure, so that the prefetcher's decisions and the window they lead
// to are tested without a server.

extension WindowedReplica {
    /// `window` with `added` more rows for `section` at `edge` (see `extend(section:by:at:)`);
    /// `rows` are the section's rows the replica holds now, in order, around which a window too
    /// large to grow slides; `budget` is the server's `max_window_rows`. `window` itself when
    /// nothing is to be asked.
    /// - Complexity: O(sections of the window)
    static func extended(
        _ window: [SectionWindow], section: SnapshotIdentifier, by added: UInt64, at edge: WindowEdge, rows: [SnapshotIdentifier],
        budget: UInt64
    ) -> [SectionWindow] {
        guard added > 0 else { return window }
        let others = window.lazy.filter { $0.section != section }.reduce(UInt64(0)) { sum($0, $1.size) }
        guard budget > others else { return window }
        let room = budget - others
        var result = window
        let index = window.firstIndex { $0.section == section }
        func set(_ range: SectionWindow.Range) -> [SectionWindow] {
            let sectionWindow = SectionWindow(section: section, range: range)
            if let index { result[index] = sectionWindow } else { result.append(sectionWindow) }
            return result
        }
        guard let index else { return set(edge == .end ? .first(min(added, room)) : .last(min(added, room))) }
        let current = window[index]
        switch (current.range, edge) {
        case (.first, .start), (.last, .end):
            // The window already starts (ends) with the section.
            return window
        default:
            break
        }
        if sum(current.size, added) <= room {
            switch current.range {
            case .first(let n): return set(.first(n + added))
            case .last(let n): return set(.last(n + added))
            case .around(let anchor, let before, let after):
                return set(
                    edge == .end ? .around(anchor: anchor, before: before, after: after + added) : .around(anchor: anchor, before: before + added, after: after)
                )
            }
        }
        // Too large to grow: slide around the row at that end, keeping what fits on the other side.
        guard let pivot = edge == .end ? rows.last : rows.first else { return window }
        let beyond = min(added, room - 1)
        let kept = room - 1 - beyond
        return set(edge == .end ? .around(anchor: pivot, before: kept, after: beyond) : .around(anchor: pivot, before: beyond, after: kept))
    }
}

/// `a + b`, saturating.
private func sum(_ a: UInt64, _ b: UInt64) -> UInt64 {
    let (total, overflow) = a.addingReportingOverflow(b)
    return overflow ? .max : total
}
