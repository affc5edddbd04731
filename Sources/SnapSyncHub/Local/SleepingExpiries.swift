import HeapModule
import SnapSyncWire

/// When each sleeping room with a time-to-live expires (LocalRoomEngine+Lifecycle.swift): a binary min-heap
/// of (deadline, room), and the current deadline of each room, swept by the one-second timer.
///
/// Why a heap and not a scan: a daemon may hold a million rooms asleep, all with a TTL when
/// `--room-ttl` is set; the sweep then pays O(1) when nothing is due and O(log n) per entry it
/// pops, instead of O(rooms) a second. A room that wakes is only removed from `current`; its
/// heap entry is skipped when popped (its deadline is no longer the room's), and the heap is
/// rebuilt from `current` when it holds more than twice as many entries, so that rooms waking
/// and sleeping again cannot grow it without bound.
struct SleepingExpiries {
    private struct Entry: Comparable {
        let deadline: ContinuousClock.Instant
        let room: RoomName

        static func < (a: Entry, b: Entry) -> Bool {
            a.deadline < b.deadline || (a.deadline == b.deadline && a.room.string < b.room.string)
        }
    }

    /// swift-collections' min-max heap.
    private var heap = Heap<Entry>()
    private var current: [RoomName: ContinuousClock.Instant] = [:]

    var count: Int { current.count }

    /// `room` sleeps and expires at `deadline` (replacing any earlier deadline). O(log n).
    mutating func set(_ room: RoomName, deadline: ContinuousClock.Instant) {
        current[room] = deadline
        heap.insert(Entry(deadline: deadline, room: room))
        if heap.count > 2 * current.count + 64 {
            heap = Heap(current.map { Entry(deadline: $0.value, room: $0.key) })
        }
    }

    /// `room` no longer sleeps (woken, or ended). O(1).
    mutating func remove(_ room: RoomName) {
        current[room] = nil
    }

    /// Removes and returns a room whose deadline is at or before `now`, if any. O(log n) per
    /// entry popped.
    mutating func popDue(now: ContinuousClock.Instant) -> RoomName? {
        while let first = heap.min, first.deadline <= now {
            _ = heap.popMin()
            if current[first.room] == first.deadline {
                current[first.room] = nil
                return first.room
            }
        }
        return nil
    }
}
