import DequeModule
import SnapSyncWire

/// A room's recent DIFF frames, for resume (CATCHUP) — the encoded frames themselves, the very
/// chunks that were queued to the members, so keeping history costs no copy.
///
/// Bounded twice: at most `maxCount` frames and at most `maxBytes` bytes; the oldest go first
/// (`evictOldest`, which the room calls after each `append` so that its resume base follows).
/// Versions are contiguous: the frame at position i (from the oldest) is the DIFF to version
/// `baseVersion + 1 + i`, and the newest is the DIFF to `lastVersion`, the room's version.
///
/// Complexity: `append` amortized O(1) (plus O(evicted)); `frames(after:)` O(frames returned).
struct RoomHistory {
    let maxCount: Int
    let maxBytes: Int

    /// Kept frames, oldest first. An evicted frame leaves at once, so that its memory goes with
    /// it (the bounds are on memory).
    private var frames = Deque<OutputChunk>()
    /// The room's chain after each kept frame, in the same order (`RoomChain.unknown` where the
    /// room's chain was not known): what a version 3 member's copy of the frame ends with.
    private var chains = Deque<RoomChain>()
    /// The room's chain at `baseVersion`, before the oldest kept frame: what a checkpoint keeps
    /// with these frames (`RoomImage.chain`).
    private(set) var baseChain: RoomChain
    /// Total bytes of the kept frames.
    private(set) var byteCount = 0
    /// The room's version: the newest frame's version, or the version history started at.
    private(set) var lastVersion: UInt64

    init(maxCount: Int, maxBytes: Int, version: UInt64, chain: RoomChain = .unknown) {
        self.maxCount = maxCount
        self.maxBytes = maxBytes
        self.lastVersion = version
        self.baseChain = chain
    }

    /// Frames kept.
    var count: Int { frames.count }

    /// The oldest version a client may resume from: it then receives every kept frame.
    var baseVersion: UInt64 { lastVersion - UInt64(count) }

    /// Records the DIFF that moved the room from `lastVersion` to `version`. The history may
    /// then be over its bounds: the caller evicts with `evictOldest` until it is not.
    mutating func append(_ frame: OutputChunk, version: UInt64, chain: RoomChain) {
        precondition(version == lastVersion + 1, "history versions must be contiguous")
        lastVersion = version
        frames.append(frame)
        chains.append(chain)
        byteCount += frame.count
    }

    /// Removes the oldest frame while the history is over a bound, and returns it with its
    /// version; nil once both bounds hold (a frame larger than `maxBytes` is not kept at all).
    /// - Complexity: O(1).
    mutating func evictOldest() -> (frame: OutputChunk, version: UInt64)? {
        guard count > 0 && (count > maxCount || byteCount > maxBytes) else { return nil }
        let version = baseVersion + 1
        let frame = frames.removeFirst()
        byteCount -= frame.count
        baseChain = chains.removeFirst()
        return (frame, version)
    }

    /// The frames a client at `version` needs to reach `lastVersion`, oldest first; `nil` when
    /// history no longer reaches back to `version` (or `version` is ahead of the room).
    func frames(after version: UInt64) -> [OutputChunk]? {
        guard version >= baseVersion, version <= lastVersion else { return nil }
        return Array(frames.dropFirst(Int(version - baseVersion)))
    }

    /// The chain after the frame of `version`, or before the oldest frame kept when `version` is
    /// `baseVersion`; nil for any other version.
    /// - Complexity: O(1).
    func chain(at version: UInt64) -> RoomChain? {
        if version == baseVersion { return baseChain }
        guard version > baseVersion, version <= lastVersion else { return nil }
        return chains[Int(version - baseVersion) - 1]
    }

    /// The chains after the frames `frames(after: version)` returns, in the same order.
    func chains(after version: UInt64) -> [RoomChain]? {
        guard version >= baseVersion, version <= lastVersion else { return nil }
        return Array(chains.dropFirst(Int(version - baseVersion)))
    }
}
