internal import SnapSyncModel
internal import SnapSyncWire

// A room's history and the chain before it (docs/persistence.md, "Room chains"): wherever the
// store drops the oldest records of a history (the history limit), the chain before the
// history moves forward over each dropped record's DIFF frame, so that it stays the chain at
// version `version - history.count`.

enum HistoryChain {
    /// The chain before `history[dropping...]`, given `chain`, the chain before `history`.
    /// - Complexity: O(size of the dropped frames).
    static func advance(
        _ chain: RoomChain?, over dropped: some Sequence<WriteRecord>
    ) -> RoomChain? {
        chain.map { dropped.reduce($0) { $0.next(frame: $1.diffFrame) } }
    }

    /// The last `limit` records of `history`, and the chain and resume base (`HistoryBase`)
    /// before them, given `chain` and `base`, those before `history`.
    /// - Complexity: O(size of the dropped frames), plus their applies when there is a base.
    static func suffix(
        _ history: [WriteRecord], _ limit: Int, chain: RoomChain?, base: RoomSnapshot? = nil
    ) -> (history: [WriteRecord], chain: RoomChain?, base: RoomSnapshot?) {
        let dropCount = max(0, history.count - max(0, limit))
        guard dropCount > 0 else { return (history, chain, base) }
        let dropped = history[..<dropCount]
        return (Array(history[dropCount...]), advance(chain, over: dropped), HistoryBase.advance(base, over: dropped))
    }

    /// The chain before a checkpoint's history: the one the file holds; for a file written
    /// before checkpoints held one, `RoomChain.start(epoch:)` when its history reaches back to
    /// version 1 (or the room is at version 0: the chain is then known exactly), else
    /// `RoomChain.unknown` (32 zero bytes), so that the chain is known from then on, the
    /// same from the same file at every start.
    static func beforeHistory(of checkpoint: CheckpointFile) -> RoomChain {
        if let chain = checkpoint.chain { return chain }
        if checkpoint.version == UInt64(checkpoint.history.count) { return .start(epoch: checkpoint.epoch) }
        return .unknown
    }
}
