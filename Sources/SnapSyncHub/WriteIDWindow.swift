import DequeModule

/// The write ids a room remembers, so that a retried MUTATE or REPLACE is not applied twice
/// (PROTOCOL.md §10, `write_id`): a repeated id is answered with the ACK of the version its
/// original write produced, and nothing is applied. With each id goes the fingerprint of the
/// write that used it (`WriteFingerprint`), so that another write reusing the id is refused
/// (`write_id_conflict`) rather than acknowledged and dropped. The store's records and the
/// cluster's keep it with the id; an id restored from a record written before they did has
/// none, and any write with such an id is taken as its retry.
///
/// The window is the room's history window (PROTOCOL.md: "at least the versions it keeps for
/// resume"), kept exactly:
/// - the id of a write that made a version is forgotten when that version leaves history (a
///   client retrying that late must resync anyway); history holds at most `maxCount` versions,
///   so these are bounded too;
/// - writes that changed nothing make no version and no history, so their ids have a FIFO of
///   their own, capped at `maxCount`, and they also leave with the version they were acked at.
///   A flood of no-op writes therefore never pushes out the id of a write still in history.
///
/// Complexity: lookups and `remember` O(1) expected (hashing an id of at most 32 bytes);
/// `forget` amortized O(1) per id forgotten.
struct WriteIDWindow {
    let maxCount: Int
    /// What is remembered of one write: the version it was acknowledged at, and its fingerprint.
    struct Entry: Hashable {
        var version: UInt64
        var fingerprint: UInt64?
    }
    private var versions: [[UInt8]: Entry] = [:]
    /// IDs in the order they were remembered (versions never decrease along each queue).
    private var applied = Deque<(id: [UInt8], version: UInt64)>()
    private var unchanged = Deque<(id: [UInt8], version: UInt64)>()

    init(maxCount: Int) {
        self.maxCount = max(0, maxCount)
    }

    var count: Int { versions.count }

    /// The version and fingerprint of the write with this id, if it is remembered.
    func entry(of id: [UInt8]) -> Entry? {
        versions[id]
    }

    /// Remembers that the write `id` (with `fingerprint`, `nil` when unknown) was acknowledged
    /// at `version` (`changed`: it made that version; otherwise it changed nothing), then forgets
    /// ids older than `oldestVersion`. Only ids not remembered yet are passed (a remembered one
    /// is answered as a duplicate or a conflict).
    mutating func remember(_ id: [UInt8], version: UInt64, fingerprint: UInt64?, changed: Bool = true, oldestVersion: UInt64) {
        guard !id.isEmpty, maxCount > 0,
            versions.updateValue(Entry(version: version, fingerprint: fingerprint), forKey: id) == nil
        else { return }
        if changed {
            applied.append((id, version))
        } else {
            unchanged.append((id, version))
            while unchanged.count > maxCount, let oldest = unchanged.popFirst() { versions[oldest.id] = nil }
        }
        forget(before: oldestVersion)
    }

    /// Drops ids whose version is below `oldestVersion`.
    mutating func forget(before oldestVersion: UInt64) {
        applied.removeFirst(while: { $0.version < oldestVersion }) { versions[$0.id] = nil }
        unchanged.removeFirst(while: { $0.version < oldestVersion }) { versions[$0.id] = nil }
    }

    /// Calls `body` with each remembered id of a write that made a version, and what is
    /// remembered of it, oldest first. O(ids).
    func forEachApplied(_ body: ([UInt8], Entry) -> Void) {
        for (id, _) in applied {
            if let entry = versions[id] { body(id, entry) }
        }
    }
}
