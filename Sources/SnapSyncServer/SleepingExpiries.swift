import SnapSyncWire

/// When each sleeping room with a time-to-live expires (Hub+Lifecycle.swift): a binary min-heap
/// of (deadline, room), and the current deadline of each room, swept by the one-second timer.
///
/// Why a heap and not a scan: a daemon may hold a million rooms asleep, all with a TTL when
/// `--room-ttl` is set; the sweep then pays O(1) when nothing is due and O(log n) per entry it
/// pops, instead of O(rooms) a second. A room that wakes is only removed from `current`; its
/// heap entry is skipped when popped (its deadline is no longer the room's), and the heap is
/// rebuilt from `current` when it holds more than twice as many entries, so that rooms waking
/// and sleeping again cannot grow it without bound.
struct SleepingExpiries {
    private struct Entry {
        let deadline: ContinuousClock.Instant
        let room: RoomName
    }

    private var heap: [Entry] = []
    private var current: [RoomName: ContinuousClock.Instant] = [:]

    var count: Int { current.count }

    /// `room` sleeps and expires at `deadline` (replacing any earlier deadline). O(log n).
    mutating func set(_ room: RoomName, deadline: ContinuousClock.Instant) {
        current[room] = deadline
        push(Entry(deadline: deadline, room: room))
        if heap.count > 2 * current.count + 64 { rebuild() }
    }

    /// `room` no longer sleeps (woken, or ended). O(1).
    mutating func remove(_ room: RoomName) {
        current[room] = nil
    }

    /// Removes and returns a room whose deadline is at or before `now`, if any. O(log n) per
    /// entry popped.
    mutating func popDue(now: ContinuousClock.Instant) -> RoomName? {
        while let first = heap.first, first.deadline <= now {
            popFirst()
            if current[first.room] == first.deadline {
                current[first.room] = nil
                return first.room
            }
        }
        return nil
    }

    private mutating func push(_ entry: Entry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func popFirst() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(from: 0)
    }

    /// The heap again from `current` alone. O(n).
    private mutating func rebuild() {
        heap = current.map { Entry(deadline: $0.value, room: $0.key) }
        var index = heap.count / 2
        while index > 0 {
            index -= 1
            siftDown(from: index)
        }
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            var smallest = left
            if left + 1 < heap.count && heap[left + 1].deadline < heap[left].deadline { smallest = left + 1 }
            guard heap[smallest].deadline < heap[parent].deadline else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
