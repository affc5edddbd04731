package import SnapSyncModel

/// A room as the store found it on start: the state to serve, and the writes that led to it.
package struct RecoveredRoom: Sendable {
    package var name: String
    package var epoch: UInt64
    package var version: UInt64
    package var snapshot: Snapshot
    /// The most recent writes, oldest first, with consecutive versions ending at `version`
    /// (at most `StoreOptions.historyLimit`; empty when none is known). The daemon serves
    /// CATCHUP from them, so a client that resumes inside this window is caught up rather than
    /// sent the whole snapshot again.
    package var history: [WriteRecord]
    /// The room's TTL in seconds as SET_TTL set it (0: never expires); nil when none was set
    /// (the daemon's `--room-ttl` applies).
    package var ttlSeconds: UInt64? = nil
}
