import SnapSyncModel
import SnapSyncWire

/// A room's presence (PROTOCOL.md §9, "Presence"): its members' entries as its watchers last
/// saw them (`published`), and what changed since (`pending`), which `flush` turns into one
/// PRESENCE_DIFF's changes. Pure data: the hub feeds it membership and state changes, local or
/// (cluster mode) from other nodes, and sends what `flush` returns.
///
/// Why two states: every watcher of the room must see the same sequence of presence states, so
/// a PRESENCE answering a watch or a list is read from `published`, the state the last
/// PRESENCE_DIFF left watchers in, and each flush moves `published` to the live state.
///
/// Complexity: a change is O(1) (a dictionary write); `flush` is O(W log W + P log P) for P
/// pending members and the view's W, plus O(n) (one merge pass over the ids) when members
/// joined or left; a page is O(log n + page). Memory: one entry per member, bounded by its
/// state (`max_presence_bytes`).
struct RoomPresence {
    /// A member's entry before the pending changes (`before`) and after them (`after`, nil once
    /// it left, with `reason`).
    struct Pending {
        var before: PresenceMember?
        var after: PresenceMember?
        var reason: PresenceDeparture = .disconnected
    }

    /// Entries by member id, as published.
    private(set) var published: [UInt64: PresenceMember] = [:]
    /// The published member ids, ascending: the view is a prefix, a page a slice.
    private(set) var order: [UInt64] = []
    /// Changes since the last flush, by member id.
    private(set) var pending: [UInt64: Pending] = [:]

    /// Members, as published.
    var count: Int { order.count }
    /// Whether a flush has anything to say.
    var hasPending: Bool { !pending.isEmpty }

    /// The live entry of `id`: pending if it changed since the last flush, else published.
    func live(_ id: UInt64) -> PresenceMember? {
        if let change = pending[id] { return change.after }
        return published[id]
    }

    /// The ids of the live members. O(n).
    var liveIDs: [UInt64] {
        var ids = order.filter { pending[$0] == nil }
        for (id, change) in pending where change.after != nil { ids.append(id) }
        return ids
    }

    /// `member` joined (or, in cluster mode, was announced): its entry is now `member`.
    mutating func upsert(_ member: PresenceMember) {
        pending[member.memberID, default: Pending(before: published[member.memberID])].after = member
    }

    /// `id` set its state; false when it is not a member.
    @discardableResult
    mutating func setState(_ id: UInt64, _ state: [UInt8]) -> Bool {
        guard var member = live(id) else { return false }
        member.state = state
        upsert(member)
        return true
    }

    /// `id` left for `reason`.
    mutating func remove(_ id: UInt64, reason: PresenceDeparture) {
        guard live(id) != nil else { return }
        pending[id, default: Pending(before: published[id])].after = nil
        pending[id]!.reason = reason
    }

    /// Applies the pending changes to `published`, without computing what changed: for a room
    /// nobody watches, whose changes nobody is owed.
    mutating func applyPending() {
        guard !pending.isEmpty else { return }
        _ = publish()
    }

    /// Applies the pending changes and returns the changes of the view (its first `view`
    /// members) they make, at most one per member (§11.28), and whether the count changed; nil
    /// when watchers would see nothing new.
    mutating func flush(view: Int) -> (count: Int, changes: [PresenceChange])? {
        guard !pending.isEmpty else { return nil }
        let countBefore = order.count
        let oldView = Array(order.prefix(view))
        let changed = publish()
        let newView = order.prefix(view)
        var changes: [PresenceChange] = []
        for id in oldView where !Self.contains(newView, id) {
            if published[id] == nil {
                changes.append(.left(memberID: id, reason: changed[id]!.reason.rawValue))
            } else if let change = changed[id], change.before?.joinedAt != change.after?.joinedAt {
                // It left and joined again, and is now outside the view: for the watcher it left.
                changes.append(.left(memberID: id, reason: change.reason.rawValue))
            } else {
                changes.append(.hidden(memberID: id))
            }
        }
        for id in newView {
            let member = published[id]!
            let change = changed[id]
            let rejoined = change.map { $0.before == nil || $0.before!.joinedAt != member.joinedAt } ?? false
            if !Self.contains(oldView[...], id) {
                changes.append(rejoined ? .joined(member) : .shown(member))
            } else if rejoined {
                // Left and joined again between two frames: `joined` replaces the entry.
                changes.append(.joined(member))
            } else if let change, change.before?.state != member.state {
                changes.append(.state(memberID: id, state: member.state))
            }
        }
        if changes.isEmpty && order.count == countBefore { return nil }
        return (order.count, changes)
    }

    /// Members whose id is above `after`, at most `limit`, as published, and the `next` cursor
    /// (the last id listed when more follow, else 0).
    func page(after: UInt64, limit: Int) -> (members: [PresenceMember], next: UInt64) {
        let start = Self.firstIndex(in: order[...], above: after)
        let end = min(order.count, start + max(0, limit))
        let members = order[start..<end].map { published[$0]! }
        return (members, end < order.count ? (members.last?.memberID ?? after) : 0)
    }

    /// Moves the pending changes into `published` and `order`, and returns them.
    /// - Complexity: O(P log P) for P pending, plus O(n) when ids joined or left: a memmove
    ///   per id for up to `inPlaceChanges` of them, else one pass.
    private mutating func publish() -> [UInt64: Pending] {
        // Handed over whole, not emptied in place: `changed` shares the table, so keeping its
        // capacity would allocate a second one as large, and a join storm's table (about 230 B
        // per member at 1,000 members) would stay with the room until the next storm.
        let changed = pending
        pending = [:]
        var added: [UInt64] = []
        var removed: Set<UInt64> = []
        for (id, change) in changed {
            if let after = change.after {
                if published.updateValue(after, forKey: id) == nil { added.append(id) }
            } else if published.removeValue(forKey: id) != nil {
                removed.insert(id)
            }
        }
        // A few ids (a room nobody watches publishes every join and leave by itself) are
        // found by binary search and moved in place: a pass hashing every id, or a new array,
        // per change cost the loop O(n) hashes (80% of the daemon's CPU for 1,000 joins and
        // 1,000 leaves a second in a room of 11,000, docs/benchmarks.md "Presence").
        if removed.count <= Self.inPlaceChanges {
            for id in removed { order.remove(at: Self.firstIndex(in: order[...], above: id) - 1) }
        } else {
            order.removeAll { removed.contains($0) }
        }
        if !added.isEmpty {
            added.sort()
            if added.count <= Self.inPlaceChanges {
                for id in added { order.insert(id, at: Self.firstIndex(in: order[...], above: id)) }
            } else {
                order = Self.merge(order, added)
            }
        }
        return changed
    }

    /// Up to this many ids joining, or leaving, are moved in `order` one at a time (a binary
    /// search and a memmove each); more are merged or filtered in one pass.
    private static let inPlaceChanges = 16

    /// Two ascending, disjoint id lists as one. O(a + b).
    private static func merge(_ a: [UInt64], _ b: [UInt64]) -> [UInt64] {
        var result: [UInt64] = []
        result.reserveCapacity(a.count + b.count)
        var i = 0
        var j = 0
        while i < a.count && j < b.count {
            if a[i] < b[j] {
                result.append(a[i])
                i += 1
            } else {
                result.append(b[j])
                j += 1
            }
        }
        result.append(contentsOf: a[i...])
        result.append(contentsOf: b[j...])
        return result
    }

    /// The index of the first id above `id` in an ascending slice. O(log n).
    private static func firstIndex(in ids: ArraySlice<UInt64>, above id: UInt64) -> Int {
        var low = ids.startIndex
        var high = ids.endIndex
        while low < high {
            let mid = (low + high) / 2
            if ids[mid] <= id { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private static func contains(_ ids: ArraySlice<UInt64>, _ id: UInt64) -> Bool {
        let index = firstIndex(in: ids, above: id) - 1
        return index >= ids.startIndex && ids[index] == id
    }

    /// The structure's invariants, for tests: `order` is `published`'s keys, ascending; every
    /// pending change's `before` is what `published` holds, and its entry has its id.
    func checkInvariants() throws(InvariantViolation) {
        func fail(_ description: String) -> InvariantViolation { InvariantViolation(description: "presence: " + description) }
        guard order.count == published.count else { throw fail("\(order.count) ids in order, \(published.count) published") }
        for (index, id) in order.enumerated() {
            guard published[id]?.memberID == id else { throw fail("id \(id) in order but not published under its id") }
            guard index == 0 || order[index - 1] < id else { throw fail("order does not ascend at \(index)") }
        }
        for (id, change) in pending {
            guard change.before == published[id] else { throw fail("pending \(id)'s before is not its published entry") }
            guard change.after.map({ $0.memberID == id }) ?? true else { throw fail("pending \(id)'s entry has another id") }
        }
    }
}
