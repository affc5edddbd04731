/// The write ids a room remembers, so that a retried MUTATE or REPLACE is not applied twice
/// (PROTOCOL.md §3, `write_id`): a repeated id is answered with the ACK of the version its
/// original write produced, and nothing is applied.
///
/// The window is the room's history window: an id is forgotten once the version it produced
/// falls out of history (a client that retries that late must resync anyway), and at most
/// `maxCount` ids are kept, so writes that changed nothing (and so added no history) cannot grow
/// it without bound either.
///
/// Complexity: lookups and `remember` O(1) expected (hashing an id of at most 32 bytes);
/// `forget` amortized O(1) per id forgotten.
struct WriteIdWindow {
    let maxCount: Int
    private var versions: [[UInt8]: UInt64] = [:]
    /// Ids in the order they were remembered (versions never decrease along it).
    private var order: [(id: [UInt8], version: UInt64)] = []
    private var head = 0

    init(maxCount: Int) {
        self.maxCount = max(0, maxCount)
    }

    var count: Int { versions.count }

    /// The version the write with this id produced, if it is remembered.
    func version(of id: [UInt8]) -> UInt64? {
        versions[id]
    }

    /// Remembers that the write `id` was acknowledged at `version`, then drops ids older than
    /// `oldestVersion` and the oldest beyond `maxCount`.
    mutating func remember(_ id: [UInt8], version: UInt64, oldestVersion: UInt64) {
        guard !id.isEmpty, maxCount > 0 else { return }
        if versions.updateValue(version, forKey: id) == nil {
            order.append((id, version))
        }
        forget(before: oldestVersion)
    }

    /// Drops ids whose version is below `oldestVersion`, and the oldest beyond `maxCount`.
    mutating func forget(before oldestVersion: UInt64) {
        while head < order.count && (order[head].version < oldestVersion || versions.count > maxCount) {
            versions[order[head].id] = nil
            head += 1
        }
        if head == order.count {
            order.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= order.count {
            order.removeSubrange(0..<head)
            head = 0
        }
    }
}
