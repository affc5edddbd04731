internal import SnapSyncStore

/// How much of a room's history a checkpoint value keeps when the whole of it is over the
/// servers' `max_payload` (Protocol/CLUSTER.md, "Checkpoints"): the newest records. The history
/// is also the room's write-id window, so dropping all of it would let a node that loads the
/// checkpoint apply a retried write a second time; the oldest records matter least.
///
/// Sizes follow the value's layout (§7): each history record is framed (a u32 length and two u32
/// CRCs) around a §3 write record, and the header's `history_count` is a varint.
enum CheckpointHistoryCut {
    /// The framing of one record in a checkpoint file (docs/persistence.md, "Records").
    static let framingSize = 12

    /// How many of the oldest records of `history` to drop so that the value, `valueSize` bytes
    /// with the whole `history`, is at most `limit` bytes: 0 when it fits already,
    /// `history.count` when only the snapshot fits, nil when not even the snapshot does.
    /// - Complexity: O(history.count); no record is encoded.
    static func oldestToDrop(valueSize: Int, history: [WriteRecord], limit: Int) -> Int? {
        if valueSize <= limit { return 0 }
        var sizes: [Int] = []
        sizes.reserveCapacity(history.count)
        var historySize = 0
        for record in history {
            let size = framedSize(record)
            sizes.append(size)
            historySize += size
        }
        let bare = valueSize - historySize - varintSize(UInt64(history.count)) + varintSize(0)
        guard bare <= limit else { return nil }
        var size = bare
        var kept = 0
        for recordSize in sizes.reversed() {
            // history_count's varint may grow with the count kept.
            let next = size + recordSize - varintSize(UInt64(kept)) + varintSize(UInt64(kept + 1))
            if next > limit { break }
            size = next
            kept += 1
        }
        return history.count - kept
    }

    /// The bytes `record` adds to a checkpoint value: its framing and its payload
    /// (u8 kind, string room, varint epoch, varint version, bytes write_id, bytes diff_frame).
    static func framedSize(_ record: WriteRecord) -> Int {
        framingSize + 1 + fieldSize(record.room.utf8.count) + varintSize(record.epoch) + varintSize(record.version)
            + fieldSize(record.writeID.count) + fieldSize(record.diffFrame.count)
    }

    /// A length-prefixed field of `count` bytes.
    private static func fieldSize(_ count: Int) -> Int { varintSize(UInt64(count)) + count }

    /// Bytes of `value` as a minimal unsigned LEB128 varint.
    static func varintSize(_ value: UInt64) -> Int {
        var size = 1
        var rest = value >> 7
        while rest != 0 {
            size += 1
            rest >>= 7
        }
        return size
    }
}
