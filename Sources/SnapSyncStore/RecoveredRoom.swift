package import SnapSyncModel
package import SnapSyncWire

/// A room as the store found it on start (or woke it from its checkpoint): the state to serve,
/// and the writes that led to it.
package struct RecoveredRoom: Sendable {
    package var name: String
    package var epoch: UInt64
    package var version: UInt64
    package var snapshot: RoomSnapshot
    /// The most recent writes, oldest first, with consecutive versions ending at `version`
    /// (at most `StoreOptions.historyLimit`; empty when none is known). The daemon serves
    /// CATCHUP from them, so a client that resumes inside this window is caught up rather than
    /// sent the whole snapshot again.
    package var history: [WriteRecord]
    /// The room's TTL in seconds as SET_TTL set it (0: never expires); nil when none was set
    /// (the daemon's `--room-ttl` applies).
    package var ttlSeconds: UInt64? = nil
    /// The room's chain before `history.first`, i.e. at version `version - history.count`; at
    /// `version` when `history` is empty. The room's chain at `version` is this advanced over
    /// every history record's DIFF frame. Nil when unknown (docs/persistence.md, "Room
    /// chains", says when).
    package var chain: RoomChain? = nil
    /// The room's state before `history.first` (at `version - history.count`), its resume base
    /// (`HistoryBase`); nil when the store keeps none for it (`StoreOptions.keepsResumeBases`,
    /// a checkpoint written without one).
    package var base: RoomSnapshot? = nil

    package init(
        name: String, epoch: UInt64, version: UInt64, snapshot: RoomSnapshot, history: [WriteRecord],
        ttlSeconds: UInt64? = nil, chain: RoomChain? = nil, base: RoomSnapshot? = nil
    ) {
        self.name = name
        self.epoch = epoch
        self.version = version
        self.snapshot = snapshot
        self.history = history
        self.ttlSeconds = ttlSeconds
        self.chain = chain
        self.base = base
    }

    /// The room's chain at `version`: `chain` advanced over the history's DIFF frames; nil when
    /// `chain` is.
    /// - Complexity: O(size of the history's frames), one SHA-256 pass.
    package var chainAtVersion: RoomChain? {
        chain.map { history.reduce($0) { $0.next(frame: $1.diffFrame) } }
    }
}
