/// The daemon's counters, answered to STATS (names snake_case, PROTOCOL.md §3 STATS_REPLY).
///
/// `frames_out` counts a DIFF once per member it is queued for; `bytes_out` counts bytes the
/// kernel accepted. Rates are over the last whole second (`tick`, driven by a 1 s timer).
/// `loop_pass_p99_us` and `loop_pass_max_us` are over the last 10-20 s (`PassTimeWindow`): a
/// sample is a pass's flush, timed from when the pass queued its first output to the end of
/// its commit and sends, or a one-second maintenance run (checkpoints, segment switches).
package struct ServerStats {
    var framesIn: UInt64 = 0
    var framesOut: UInt64 = 0
    package var bytesIn: UInt64 = 0
    package var bytesOut: UInt64 = 0
    package var connectionsAccepted: UInt64 = 0
    /// Refused with ERROR too_many_connections (STATS `connections_refused`).
    package var connectionsRefused: UInt64 = 0
    /// Refused with ERROR shutting_down, accepted after shutdown began (metrics only).
    package var connectionsRefusedShuttingDown: UInt64 = 0
    package var slowConsumerDisconnects: UInt64 = 0
    package var protocolErrors: UInt64 = 0
    package var writesApplied: UInt64 = 0
    package var writesRejected: UInt64 = 0
    /// HELLOs and AUTHs whose token was refused (each closed with ERROR unauthorized).
    package var authRefused: UInt64 = 0
    /// Requests answered REJECT busy: AUTHs past a connection's verification burst, VERIFYs of
    /// a large room hashed less than a second before.
    package var requestsBusy: UInt64 = 0
    /// Times a connection's input slice for a loop pass ended with frames left, which wait for
    /// its next turn (the server's `InputSlice`): a client pipelining more than a slice.
    package var inputYields: UInt64 = 0
    /// Loop passes whose sends were spread over the IO threads (`--io-threads`): passes with
    /// more connections to write than one `--io-thread-batch`.
    package var ioPassesSpread: UInt64 = 0
    /// Presence (Hub+Presence.swift): PRESENCE and PRESENCE_DIFF frames queued (a shared
    /// PRESENCE_DIFF once per watcher), the changes PRESENCE_DIFFs carried (once per frame
    /// encoded), SET_PRESENCE requests applied and those refused for the rate.
    package var presenceFramesOut: UInt64 = 0
    package var presenceChanges: UInt64 = 0
    package var presenceUpdates: UInt64 = 0
    package var presenceUpdatesRefused: UInt64 = 0
    /// Windows (Hub+Windows.swift): windowed members now, and windows rebuilt and diffed because
    /// a change may have reached them (the costly path; the others cost a few hash lookups).
    package var windowedMembers: UInt64 = 0
    package var windowRebuilds: UInt64 = 0
    /// Requests refused with REJECT forbidden (not counted in `writesRejected`).
    package var forbidden: UInt64 = 0
    /// Sessions closed with ERROR token_expired.
    package var tokensExpired: UInt64 = 0
    /// Rooms deleted by a DROP request.
    package var roomsDeleted: UInt64 = 0
    /// Rooms removed because their time-to-live ran out with no members and no writes.
    package var roomsExpired: UInt64 = 0
    /// Requests refused quota_exceeded because they would have created a room, by reason.
    package var roomsRefused: [RoomCreationRefusal: UInt64] = [:]
    /// Rooms evicted from memory to sleep on disk, and sleeping rooms loaded back.
    package var roomsEvicted: UInt64 = 0
    package var roomsWoken: UInt64 = 0
    /// Resumes answered with one folded DIFF (PROTOCOL.md §11.12), and resumes of a large room
    /// replayed because `Hub.maxFoldsInFlight` other folds were running off the loop (or, with
    /// no worker, one had been computed less than `foldInterval` before).
    package var foldedCatchups: UInt64 = 0
    package var foldsDeferred: UInt64 = 0
    /// Cluster mode: records every replica skipped as void (nats-server 2.9's stale
    /// expectations, Protocol/CLUSTER.md §3), and follows of a room that failed (lost, a gap,
    /// damage, a log that cannot be reached); both stay 0 on a single node.
    package var clusterVoidRecords: UInt64 = 0
    package var clusterFollowFailures: UInt64 = 0
    /// Records this node proposed, and the writes they carried (several per record when writes
    /// wait for the one in flight).
    package var clusterRecordsProposed: UInt64 = 0
    package var clusterWritesProposed: UInt64 = 0
    /// Proposals validated and proposed again: another node's record won the room's next
    /// sequence, or the record at the stored sequence was not this one.
    package var clusterProposalsRetried: UInt64 = 0
    /// Times a replica here was found on another history than the log's (a record that follows
    /// another chain), and loaded again.
    package var clusterDivergences: UInt64 = 0
    /// Cluster mode's presence exchange (SnapSyncCluster's `PresenceExchange`): other nodes
    /// heard and not lost now; nodes declared lost (not heard for the presence timeout);
    /// re-syncs asked of a node after a gap in its messages; presence messages sent and
    /// received; received ones ignored as malformed or of an unknown format.
    package var clusterPresenceNodes: UInt64 = 0
    package var clusterPresenceNodesLost: UInt64 = 0
    package var clusterPresenceResyncs: UInt64 = 0
    package var clusterPresenceMessagesOut: UInt64 = 0
    package var clusterPresenceMessagesIn: UInt64 = 0
    package var clusterPresenceMessagesIgnored: UInt64 = 0
    package var passTimes = PassTimeWindow()

    private(set) var framesInPerSecond: UInt64 = 0
    private(set) var framesOutPerSecond: UInt64 = 0
    private var lastFramesIn: UInt64 = 0
    private var lastFramesOut: UInt64 = 0
    private var lastTick: ContinuousClock.Instant?

    /// Recomputes the per-second rates from the counters' growth since the previous tick.
    package mutating func tick(now: ContinuousClock.Instant) {
        if let lastTick {
            let elapsed = now - lastTick
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            if seconds > 0 {
                framesInPerSecond = UInt64((Double(framesIn - lastFramesIn) / seconds).rounded())
                framesOutPerSecond = UInt64((Double(framesOut - lastFramesOut) / seconds).rounded())
            }
        }
        lastTick = now
        passTimes.tick(now: now)
        lastFramesIn = framesIn
        lastFramesOut = framesOut
    }

    /// The STATS_REPLY entries, given the live gauges.
    /// `rooms` counts resident rooms (in memory); `sleepingRooms` those kept on disk only.
    /// `storedRooms`: rooms the store holds; `dataBytes`: the data directory's size, last measured.
    func entries(
        connections: Int, rooms: Int, sleepingRooms: Int, storedRooms: Int, dataBytes: Int, items: Int, uptime: Duration
    ) -> [(String, UInt64)] {
        let passes = passTimes.merged
        return [
            ("connections", UInt64(connections)),
            ("rooms", UInt64(rooms)),
            ("rooms_sleeping", UInt64(sleepingRooms)),
            ("rooms_stored", UInt64(storedRooms)),
            ("rooms_refused", roomsRefused.values.reduce(0, +)),
            ("data_bytes", UInt64(dataBytes)),
            ("rooms_evicted", roomsEvicted),
            ("rooms_woken", roomsWoken),
            ("catchups_folded", foldedCatchups),
            ("catchup_folds_deferred", foldsDeferred),
            ("rooms_deleted", roomsDeleted),
            ("rooms_expired", roomsExpired),
            ("items", UInt64(items)),
            ("frames_in", framesIn),
            ("frames_out", framesOut),
            ("bytes_in", bytesIn),
            ("bytes_out", bytesOut),
            ("frames_in_per_second", framesInPerSecond),
            ("frames_out_per_second", framesOutPerSecond),
            ("slow_consumer_disconnects", slowConsumerDisconnects),
            ("connections_accepted", connectionsAccepted),
            ("connections_refused", connectionsRefused),
            ("protocol_errors", protocolErrors),
            ("writes_applied", writesApplied),
            ("writes_rejected", writesRejected),
            ("auth_refused", authRefused),
            ("requests_busy", requestsBusy),
            ("input_yields", inputYields),
            ("io_passes_spread", ioPassesSpread),
            ("forbidden", forbidden),
            ("presence_frames_out", presenceFramesOut),
            ("presence_changes", presenceChanges),
            ("presence_updates", presenceUpdates),
            ("presence_updates_refused", presenceUpdatesRefused),
            ("windowed_members", windowedMembers),
            ("window_rebuilds", windowRebuilds),
            ("tokens_expired", tokensExpired),
            ("uptime_seconds", UInt64(max(0, uptime.components.seconds))),
            ("loop_pass_p99_us", passes.quantile(0.99)),
            ("loop_pass_max_us", passes.max),
        ]
    }
}
