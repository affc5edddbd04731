import SnapSyncModel
import SnapSyncWire

/// The memory of all rooms together, bounded by `--max-room-total-bytes` (PROTOCOL.md §12,
/// `server_full`).
///
/// A room is counted as its canonical snapshot bytes, plus its resume base's once it has parted
/// from the snapshot (`Room.resumeBaseBytes`), plus its DIFF history bytes, plus
/// `bytesPerRememberedID` for each DIFF frame and write id it remembers (the objects, index
/// entries and arena slack around them). Those are the parts of a room that writes grow; what the
/// daemon holds in memory for them is a measured multiple of this count (README, "Memory").
///
/// A room asks `admit` before a write changes it, once when the write's answer is known not to
/// be a retry or a version mismatch (a write id may be remembered) and once more when its DIFF
/// is encoded: every byte a write adds to the snapshot is carried by its DIFF, and the DIFF
/// itself joins the history, so the write can grow the room by at most twice the DIFF frame plus
/// one remembered frame and id. A write that could take the total past the limit is refused,
/// and the room is left unchanged, unless its exact growth (a REPLACE's target size less the
/// room's; a refused MUTATE that deletes or updates is applied to learn it, then undone if it is
/// still refused) plus its DIFF and the remembered frame and id is not positive: a write that
/// shrinks the count is always admitted, so that a full server can be emptied by writes. The
/// server calls `update` after every write and restore.
///
/// Complexity: O(1) per call (one dictionary lookup in `update`).
final class RoomMemoryBudget {
    /// Counted per remembered DIFF frame and per remembered write id: a 32-byte id in its own
    /// array (64–80 bytes with malloc's header), its dictionary and queue entries, a chunk object.
    static let bytesPerRememberedID = 128

    let limit: Int
    /// Bytes of all rooms, as last counted by `update`.
    private(set) var total = 0
    private var counted: [ObjectIdentifier: Int] = [:]

    init(limit: Int) {
        self.limit = limit
    }

    /// What `room` counts for now.
    static func bytes(of room: Room) -> Int {
        room.snapshot.canonicalByteCount + room.resumeBaseBytes + room.historyBytes
            + bytesPerRememberedID * (room.historyCount + room.writeIDCount)
    }

    /// `nil` when `room` may grow by `growth` bytes (plus one remembered frame and write id):
    /// the total stays within the limit, or the write does not grow it at all (`growth` may be
    /// negative); otherwise the REJECT `server_full` that refuses the write.
    func admit(growth: Int, to room: Room) -> Rejection? {
        let bound = growth + 2 * Self.bytesPerRememberedID
        guard total + bound > limit, bound > 0 else { return nil }
        return Rejection(
            .serverFull,
            "room \(room.name) cannot grow: the rooms hold \(total) bytes, and this write could add \(bound) more, past --max-room-total-bytes \(ConfigurationValue.describe(byteCount: limit))"
        )
    }

    /// Stops counting `room`: it ended, or left memory (it sleeps on disk, LocalRoomEngine+Sleep.swift).
    func release(_ room: Room) {
        total -= counted.removeValue(forKey: ObjectIdentifier(room)) ?? 0
    }

    /// Brings `total` in step with `room` after a write, or when the room was restored.
    func update(_ room: Room) {
        let now = Self.bytes(of: room)
        let before = counted.updateValue(now, forKey: ObjectIdentifier(room)) ?? 0
        total += now - before
    }
}

extension SnapshotOperation {
    /// Whether the op can make a snapshot smaller (a delete, or a payload replaced by a shorter
    /// one): only a batch holding one is worth applying to learn its growth when the room budget
    /// refuses it by its bound. (A move that flattens an outline drops its `levels` part, a few
    /// bytes; PROTOCOL.md §7.1 counts only deletes and updates, and so does this.)
    var canShrink: Bool {
        switch self {
        case .deleteSections, .deleteItems, .deleteAllItems, .updateSections, .updateItems: return true
        case .appendSections, .insertSections, .moveSection, .appendItems, .insertItems, .moveItem,
            .moveItemToSection, .appendChildren, .moveItemToParent:
            return false
        }
    }
}
