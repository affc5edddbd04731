import HeapModule

// Date only: FoundationEssentials, not all of Foundation, where it exists.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// When each authenticated session's token runs out: a binary min-heap of (deadline, session
/// id), swept once a second by the daemon's stats timer (`Hub.expireSessions`).
///
/// Why a heap swept by the existing one-second timer, and not a deadline on each connection's
/// timer: requests pay nothing (no clock read, no timer change); a HELLO or AUTH pays one
/// O(log n) push; the sweep pays O(1) when nothing is due and O(log n) per entry it pops; and
/// no event is added to the loop. A connection's one timer already multiplexes the handshake,
/// idle and close deadlines, and the rule stays in the socket-free hub, where it is tested
/// with an injected clock. The cost is resolution: a session ends within a second after its
/// deadline, which the protocol allows ("within about a second").
///
/// Entries are not removed when a session ends or re-authenticates: the sweep skips an entry
/// whose session is gone or has another deadline now. So that re-authentications cannot grow
/// the heap without bound, it is rebuilt from the live sessions when it holds more than twice
/// as many entries as there are sessions (`compact`): O(n), at most once per n pushes.
struct TokenDeadlines {
    struct Entry: Comparable {
        let deadline: Date
        let sessionID: UInt64

        static func < (a: Entry, b: Entry) -> Bool { (a.deadline, a.sessionID) < (b.deadline, b.sessionID) }
    }

    /// swift-collections' min-max heap.
    private var entries = Heap<Entry>()

    var count: Int { entries.count }

    /// The earliest deadline, if any.
    var earliest: Entry? { entries.min }

    /// Adds an entry. O(log n).
    mutating func push(_ deadline: Date, sessionID: UInt64) {
        entries.insert(Entry(deadline: deadline, sessionID: sessionID))
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`. O(log n).
    mutating func popDue(now: Date) -> Entry? {
        guard let first = entries.min, first.deadline <= now else { return nil }
        return entries.popMin()
    }

    /// Keeps only `live` entries, as a heap again. O(n).
    mutating func compact(keeping live: (Entry) -> Bool) {
        entries = Heap(entries.unordered.filter(live))
    }
}
