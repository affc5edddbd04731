internal import CoreMetrics
internal import Prometheus
import SnapSyncWire
import SnapSyncHub
import SnapSyncStore

/// The daemon's Prometheus metrics (README.md, "Metrics"): a swift-prometheus registry whose
/// text exposition is the `/metrics` answer.
///
/// One source of truth: counters and gauges are read from `ServerStats` and the hub at scrape
/// time (`update(from:)`), so the request path counts each thing once, in `ServerStats`, as
/// STATS reports it, and pays nothing for Prometheus. Only the two latency histograms are
/// recorded as things happen (through swift-metrics' `Timer` API, backed by the registry's
/// histograms): an fdatasync of the log, and a write's ACK (`WriteAckTimer`).
///
/// Label values are bounded: message type names, error code names and refusal reasons, each a
/// fixed list; never a room, session or peer.
final class MetricsRegistry {
    let registry = PrometheusCollectorRegistry()
    /// `snapsync_fsync_duration_seconds`: the store's `fsyncObserver` records into it.
    let fsyncTimer: CoreMetrics.Timer
    /// `snapsync_write_ack_duration_seconds`: the hub's `WriteAckTimer` records into it.
    let writeAckTimer: CoreMetrics.Timer

    private let connections: Prometheus.Gauge
    private let connectionsAccepted: Prometheus.Counter
    private let refusedTooMany: Prometheus.Counter
    private let refusedShuttingDown: Prometheus.Counter
    private let roomsResident: Prometheus.Gauge
    private let roomsSleeping: Prometheus.Gauge
    private let roomsStored: Prometheus.Gauge
    private let roomsRefused: [(reason: RoomCreationRefusal, counter: Prometheus.Counter)]
    private let dataBytes: Prometheus.Gauge
    private let dataFreeBytes: Prometheus.Gauge
    private let roomsDeleted: Prometheus.Counter
    private let roomsExpired: Prometheus.Counter
    private let roomsEvicted: Prometheus.Counter
    private let roomsWoken: Prometheus.Counter
    private let catchupsFolded: Prometheus.Counter
    private let catchupFoldsDeferred: Prometheus.Counter
    private let items: Prometheus.Gauge
    private let bytesIn: Prometheus.Counter
    private let bytesOut: Prometheus.Counter
    private let framesIn: [(type: UInt8, frames: Prometheus.Counter, bytes: Prometheus.Counter)]
    private let framesInUnknown: (frames: Prometheus.Counter, bytes: Prometheus.Counter)
    private let framesOut: [(type: UInt8, frames: Prometheus.Counter, bytes: Prometheus.Counter)]
    private let writesApplied: Prometheus.Counter
    private let writesRejected: [(code: ErrorCode, counter: Prometheus.Counter)]
    private let outputQueueBytes: Prometheus.Gauge
    private let slowConsumers: Prometheus.Counter
    private let protocolErrors: Prometheus.Counter
    private let authRefused: Prometheus.Counter
    private let requestsBusy: Prometheus.Counter
    private let inputYields: Prometheus.Counter
    private let ioPassesSpread: Prometheus.Counter
    private let presenceChanges: Prometheus.Counter
    private let presenceUpdates: Prometheus.Counter
    private let presenceUpdatesRefused: Prometheus.Counter
    private let windowedMembers: Prometheus.Gauge
    private let windowRebuilds: Prometheus.Counter
    /// `snapsync_room_members_bucket{le}`, `_count`, `_sum`: the resident rooms by their members
    /// now, as a histogram's cumulative buckets (gauges, since a room's members go down as well
    /// as up; no label per room).
    private let roomMembersBuckets: [(bound: Int, gauge: Prometheus.Gauge)]
    private let roomMembersCount: Prometheus.Gauge
    private let roomMembersSum: Prometheus.Gauge
    static let roomMembersBounds = [0, 1, 2, 5, 10, 100, 1_000, 10_000, 100_000]
    private let tokensExpired: Prometheus.Counter
    private let forbidden: Prometheus.Counter
    private let uptime: Prometheus.Gauge
    private let loopPassP99: Prometheus.Gauge
    private let loopPassMax: Prometheus.Gauge
    private let clusterRooms: [(phase: ReplicatedRoom.Phase, gauge: Prometheus.Gauge)]
    private let clusterVoidRecords: Prometheus.Counter
    private let clusterFollowFailures: Prometheus.Counter
    private let clusterRecordsProposed: Prometheus.Counter
    private let clusterWritesProposed: Prometheus.Counter
    private let clusterProposalsRetried: Prometheus.Counter
    private let clusterDivergences: Prometheus.Counter
    private let clusterPresenceNodes: Prometheus.Gauge
    private let clusterPresenceNodesLost: Prometheus.Counter
    private let clusterPresenceResyncs: Prometheus.Counter
    private let clusterPresenceMessagesOut: Prometheus.Counter
    private let clusterPresenceMessagesIn: Prometheus.Counter
    private let clusterPresenceMessagesIgnored: Prometheus.Counter
    /// `snapsync_tls_certificate_expiry_timestamp_seconds`, made at the first scrape that has a
    /// TLS certificate: without TLS the metric is absent, rather than a 0 that reads as a
    /// certificate expired in 1970.
    private var tlsCertificateExpiry: Prometheus.Gauge?
    static let tlsCertificateExpiryName = "snapsync_tls_certificate_expiry_timestamp_seconds"

    /// Buckets in seconds: an fdatasync takes from tens of microseconds (nothing dirty, a fast
    /// SSD) to seconds (a slow or saturated disk; `everysec` waits for one past 2 s).
    static let fsyncBuckets: [Duration] = [
        .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .microseconds(2500),
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .microseconds(2_500_000), .seconds(5),
    ]
    /// A write's ACK: tens of microseconds in memory or under `everysec`, one fdatasync more
    /// under `always`.
    static let writeAckBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
        .microseconds(2500), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
    ]

    /// - Parameter build: `snapsync_build_info`'s labels (version, libevent, ...).
    init(build: [(String, String)]) {
        let r = registry
        func counter(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> Prometheus.Counter {
            r.makeCounter(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
        }
        func gauge(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> Prometheus.Gauge {
            r.makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), labels: labels)
        }
        func timer(_ name: String, _ help: String, _ buckets: [Duration]) -> CoreMetrics.Timer {
            let histogram = r.makeDurationHistogram(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help), buckets: buckets)
            return CoreMetrics.Timer(label: name, dimensions: [], handler: histogram, factory: PrometheusMetricsFactory(registry: r))
        }

        gauge("snapsync_build_info", "Always 1; the labels describe the running build.", build).set(to: 1.0)
        connections = gauge("snapsync_connections", "Client connections open now (STATS connections).")
        connectionsAccepted = counter("snapsync_connections_accepted_total", "Client connections accepted (STATS connections_accepted).")
        let refused = "Client connections refused at accept with ERROR, by reason (too_many_connections is STATS connections_refused)."
        refusedTooMany = counter("snapsync_connections_refused_total", refused, [("reason", "too_many_connections")])
        refusedShuttingDown = counter("snapsync_connections_refused_total", refused, [("reason", "shutting_down")])
        let rooms = "Rooms by state: resident in memory (STATS rooms), sleeping on disk only (STATS rooms_sleeping)."
        roomsResident = gauge("snapsync_rooms", rooms, [("state", "resident")])
        roomsSleeping = gauge("snapsync_rooms", rooms, [("state", "sleeping")])
        roomsStored = gauge(
            "snapsync_rooms_stored", "Rooms the data directory holds, awake or asleep: what --max-stored-rooms bounds (STATS rooms_stored).")
        let refusedHelp =
            "Requests refused quota_exceeded because they would have created a room, by the quota reached (STATS rooms_refused)."
        roomsRefused = RoomCreationRefusal.allCases.map { ($0, counter("snapsync_rooms_refused_total", refusedHelp, [("reason", $0.rawValue)])) }
        dataBytes = gauge(
            "snapsync_data_directory_bytes", "Disk the data directory takes, measured every 5 s: what --max-data-bytes bounds (STATS data_bytes).")
        dataFreeBytes = gauge(
            "snapsync_data_directory_free_bytes",
            "Free space on the data directory's filesystem, measured every 5 s; below two log segments no room is created.")
        roomsDeleted = counter("snapsync_rooms_deleted_total", "Rooms deleted by DROP (STATS rooms_deleted).")
        roomsExpired = counter("snapsync_rooms_expired_total", "Rooms removed when their time-to-live ran out (STATS rooms_expired).")
        roomsEvicted = counter("snapsync_rooms_evicted_total", "Rooms evicted from memory to sleep on disk (STATS rooms_evicted).")
        roomsWoken = counter("snapsync_rooms_woken_total", "Sleeping rooms loaded back into memory (STATS rooms_woken).")
        catchupsFolded = counter("snapsync_catchups_folded_total", "Resumes answered with one folded DIFF (STATS catchups_folded).")
        catchupFoldsDeferred = counter(
            "snapsync_catchup_folds_deferred_total",
            "Resumes of a large room replayed because the worker was busy with other folds (STATS catchup_folds_deferred).")
        items = gauge("snapsync_items", "Items of all resident rooms together (STATS items).")
        bytesIn = counter("snapsync_received_bytes_total", "Bytes read from client sockets (STATS bytes_in).")
        bytesOut = counter("snapsync_sent_bytes_total", "Bytes the kernel accepted for client sockets (STATS bytes_out).")

        let framesInHelp = "Frames received from clients, by message type (all types: STATS frames_in)."
        let frameBytesInHelp = "Bytes of the frames received, length prefix included, by message type."
        let framesOutHelp = "Frames queued for clients, by message type, a DIFF once per member (all types: STATS frames_out)."
        let frameBytesOutHelp = "Bytes of the frames queued for clients, length prefix included, by message type."
        framesIn = MessageType.allCases.filter { $0.sentBy != .server }.map { type in
            let labels = [("type", type.name)]
            return (
                type.rawValue, counter("snapsync_frames_received_total", framesInHelp, labels),
                counter("snapsync_frame_bytes_received_total", frameBytesInHelp, labels)
            )
        }
        framesInUnknown = (
            counter("snapsync_frames_received_total", framesInHelp, [("type", "unknown")]),
            counter("snapsync_frame_bytes_received_total", frameBytesInHelp, [("type", "unknown")])
        )
        framesOut = MessageType.allCases.filter { $0.sentBy != .client }.map { type in
            let labels = [("type", type.name)]
            return (
                type.rawValue, counter("snapsync_frames_sent_total", framesOutHelp, labels),
                counter("snapsync_frame_bytes_sent_total", frameBytesOutHelp, labels)
            )
        }
        writesApplied = counter("snapsync_writes_applied_total", "MUTATEs and REPLACEs applied (STATS writes_applied).")
        let rejected =
            "MUTATEs and REPLACEs answered with REJECT, by error code (all codes: STATS writes_rejected; forbidden is snapsync_forbidden_total)."
        // Not forbidden (its own counter) nor the codes only LEFT carries (a write never gets them).
        let leftOnly: Set<ErrorCode> = [.roomDeleted, .roomExpired]
        writesRejected = ErrorCode.allCases.filter { $0.kind == .reject && $0 != .forbidden && !leftOnly.contains($0) }.map { code in
            (code, counter("snapsync_writes_rejected_total", rejected, [("code", code.name)]))
        }
        outputQueueBytes = gauge(
            "snapsync_output_queue_bytes",
            "Memory of unsent output, all connections together, a shared DIFF or SNAPSHOT body once (the fan-out queues; --max-output-total-bytes).")
        slowConsumers = counter("snapsync_slow_consumer_disconnects_total", "Connections cut off as slow consumers (STATS slow_consumer_disconnects).")
        protocolErrors = counter("snapsync_protocol_errors_total", "Connections closed for a protocol error (STATS protocol_errors).")
        authRefused = counter(
            "snapsync_auth_refused_total", "HELLOs and AUTHs whose token was refused, closed with ERROR unauthorized (STATS auth_refused).")
        requestsBusy = counter(
            "snapsync_requests_busy_total",
            "AUTHs past a connection's verification burst and VERIFYs of a large room hashed less than a second before, answered REJECT busy (STATS requests_busy)."
        )
        inputYields = counter(
            "snapsync_input_yields_total",
            "Times a connection's input slice for a loop pass ended with requests left, handled at its next turn (STATS input_yields).")
        ioPassesSpread = counter(
            "snapsync_io_passes_spread_total",
            "Loop passes whose sends were shared by the IO threads: more connections to write than one --io-thread-batch (STATS io_passes_spread).")
        presenceChanges = counter(
            "snapsync_presence_changes_total",
            "Changes (joined, left, state, shown, hidden) carried by the PRESENCE_DIFF frames encoded, once per frame whatever its watchers; frames per watcher are snapsync_frames_sent_total{type=\"PRESENCE_DIFF\"} (STATS presence_changes)."
        )
        presenceUpdates = counter("snapsync_presence_updates_total", "SET_PRESENCE requests applied (STATS presence_updates).")
        presenceUpdatesRefused = counter(
            "snapsync_presence_updates_refused_total",
            "SET_PRESENCE requests past the connection's --presence-updates-per-second, answered REJECT busy (STATS presence_updates_refused).")
        windowedMembers = gauge("snapsync_windowed_members", "Members following a window of a room (WINDOW) now (STATS windowed_members).")
        windowRebuilds = counter(
            "snapsync_window_rebuilds_total",
            "Windows rebuilt and diffed because a write may have reached them, O(sections + window rows) each; other windowed members cost a few hash lookups per write (STATS window_rebuilds)."
        )
        let membersHelp = "Resident rooms by their members now (a histogram's cumulative buckets, as gauges)."
        roomMembersBuckets =
            Self.roomMembersBounds.map { bound in (bound, gauge("snapsync_room_members_bucket", membersHelp, [("le", "\(bound)")])) }
            + [(Int.max, gauge("snapsync_room_members_bucket", membersHelp, [("le", "+Inf")]))]
        roomMembersCount = gauge("snapsync_room_members_count", "Resident rooms (the histogram snapsync_room_members_bucket's count).")
        roomMembersSum = gauge("snapsync_room_members_sum", "Memberships of all resident rooms (the histogram snapsync_room_members_bucket's sum).")
        tokensExpired = counter("snapsync_tokens_expired_total", "Sessions closed with ERROR token_expired (STATS tokens_expired).")
        forbidden = counter("snapsync_forbidden_total", "Requests refused with REJECT forbidden (STATS forbidden).")
        uptime = gauge("snapsync_uptime_seconds", "Seconds since the daemon started serving (STATS uptime_seconds).")
        loopPassP99 = gauge(
            "snapsync_loop_pass_p99_seconds", "99th percentile of the loop's flush passes over the last 10-20 s (STATS loop_pass_p99_us).")
        let followed = "Cluster mode: rooms this node follows in the cluster's log, by state (0 on a single node)."
        let phases: [(ReplicatedRoom.Phase, String)] = [(.current, "current"), (.loading, "loading"), (.broken, "broken"), (.refollowing, "refollowing")]
        clusterRooms = phases.map { (phase, name) in (phase, gauge("snapsync_cluster_rooms", followed, [("state", name)])) }
        clusterVoidRecords = counter(
            "snapsync_cluster_void_records_total", "Cluster mode: log records skipped as void (stale expectations; Protocol/CLUSTER.md §3).")
        clusterFollowFailures = counter(
            "snapsync_cluster_follow_failures_total",
            "Cluster mode: follows of a room that failed (a lost consumer, a gap, damage, no log); each is retried, backing off to 64 s.")
        clusterRecordsProposed = counter(
            "snapsync_cluster_records_proposed_total", "Cluster mode: records this node proposed to the log (each carries one or more writes).")
        clusterWritesProposed = counter(
            "snapsync_cluster_writes_proposed_total", "Cluster mode: writes carried by the records this node proposed (a write proposed again counts again).")
        clusterProposalsRetried = counter(
            "snapsync_cluster_proposals_retried_total",
            "Cluster mode: proposals validated and proposed again because another node's record took the room's next place (contention, not a failure).")
        clusterDivergences = counter(
            "snapsync_cluster_divergences_total",
            "Cluster mode: times a replica here was found on another history than the log's (a record following another chain) and loaded again; its members were sent LEFT."
        )
        clusterPresenceNodes = gauge(
            "snapsync_cluster_presence_nodes", "Cluster mode: other nodes whose presence heartbeat this node hears (not declared lost).")
        clusterPresenceNodesLost = counter(
            "snapsync_cluster_presence_nodes_lost_total",
            "Cluster mode: nodes declared lost (no presence heartbeat for --cluster-presence-timeout); their members left with node_lost.")
        clusterPresenceResyncs = counter(
            "snapsync_cluster_presence_resyncs_total",
            "Cluster mode: presence of a room asked of a node again, after a gap in its messages (core NATS dropped some) or its return.")
        clusterPresenceMessagesOut = counter(
            "snapsync_cluster_presence_messages_out_total", "Cluster mode: presence messages sent to other nodes (heartbeats, changes, syncs, snapshots).")
        clusterPresenceMessagesIn = counter(
            "snapsync_cluster_presence_messages_in_total", "Cluster mode: presence messages received from other nodes.")
        clusterPresenceMessagesIgnored = counter(
            "snapsync_cluster_presence_messages_ignored_total",
            "Cluster mode: presence messages received and ignored: malformed, or of a format or kind this node does not know.")
        loopPassMax = gauge("snapsync_loop_pass_max_seconds", "Longest loop flush pass over the last 10-20 s (STATS loop_pass_max_us).")

        fsyncTimer = timer(
            "snapsync_fsync_duration_seconds",
            "fdatasync of the write-ahead log: per loop pass under --fsync always, once a second on the store's thread under everysec, at segment switches and checkpoints.",
            Self.fsyncBuckets)
        writeAckTimer = timer(
            "snapsync_write_ack_duration_seconds",
            "From handling a MUTATE or REPLACE to the end of the flush that commits it and sends its ACK.", Self.writeAckBuckets)
    }

    /// Copies the hub's counters and gauges in (a counter's value is set: reset, then
    /// incremented by the total, which nothing can observe in between on the loop's thread).
    /// - Complexity: O(message types + error codes), once per scrape.
    /// - Parameter tlsCertificateNotAfter: the served TLS certificate's `notAfter` in seconds
    ///   since the epoch, nil without TLS (or when it cannot be read).
    func update(from hub: Hub, connections open: Int, tlsCertificateNotAfter: Int? = nil) {
        let stats = hub.stats
        connections.set(Int64(open))
        set(connectionsAccepted, stats.connectionsAccepted)
        set(refusedTooMany, stats.connectionsRefused)
        set(refusedShuttingDown, stats.connectionsRefusedShuttingDown)
        roomsResident.set(Int64(hub.residentRoomCount))
        roomsSleeping.set(Int64(hub.sleepingRoomCount))
        roomsStored.set(Int64(hub.storedRoomCount))
        for (reason, counter) in roomsRefused { set(counter, stats.roomsRefused[reason] ?? 0) }
        if let usage = hub.dataUsage {
            dataBytes.set(Int64(usage.bytes))
            dataFreeBytes.set(Int64(usage.freeBytes))
        }
        set(roomsDeleted, stats.roomsDeleted)
        set(roomsExpired, stats.roomsExpired)
        set(roomsEvicted, stats.roomsEvicted)
        set(roomsWoken, stats.roomsWoken)
        set(catchupsFolded, stats.foldedCatchups)
        set(catchupFoldsDeferred, stats.foldsDeferred)
        items.set(Int64(hub.itemCount))
        set(bytesIn, stats.bytesIn)
        set(bytesOut, stats.bytesOut)
        let traffic = hub.traffic
        var knownFrames: UInt64 = 0
        var knownBytes: UInt64 = 0
        for (type, frames, bytes) in framesIn {
            set(frames, traffic.framesReceived(type: type))
            set(bytes, traffic.bytesReceived(type: type))
            knownFrames &+= traffic.framesReceived(type: type)
            knownBytes &+= traffic.bytesReceived(type: type)
        }
        var allFrames: UInt64 = 0
        var allBytes: UInt64 = 0
        for type in 0...UInt8.max {
            allFrames &+= traffic.framesReceived(type: type)
            allBytes &+= traffic.bytesReceived(type: type)
        }
        set(framesInUnknown.frames, allFrames &- knownFrames)
        set(framesInUnknown.bytes, allBytes &- knownBytes)
        for (type, frames, bytes) in framesOut {
            set(frames, traffic.framesQueued(type: type))
            set(bytes, traffic.bytesQueued(type: type))
        }
        set(writesApplied, stats.writesApplied)
        for (code, counter) in writesRejected { set(counter, traffic.writesRejected(code)) }
        outputQueueBytes.set(Int64(hub.outputBytes))
        set(slowConsumers, stats.slowConsumerDisconnects)
        set(protocolErrors, stats.protocolErrors)
        set(authRefused, stats.authRefused)
        set(requestsBusy, stats.requestsBusy)
        set(inputYields, stats.inputYields)
        set(ioPassesSpread, stats.ioPassesSpread)
        set(presenceChanges, stats.presenceChanges)
        set(presenceUpdates, stats.presenceUpdates)
        set(presenceUpdatesRefused, stats.presenceUpdatesRefused)
        windowedMembers.set(Int64(stats.windowedMembers))
        set(windowRebuilds, stats.windowRebuilds)
        let members = hub.roomMemberCounts
        for (bound, gauge) in roomMembersBuckets { gauge.set(Int64(members.count { $0 <= bound })) }
        roomMembersCount.set(Int64(members.count))
        roomMembersSum.set(Int64(members.reduce(0, +)))
        set(tokensExpired, stats.tokensExpired)
        set(forbidden, stats.forbidden)
        let elapsed = ContinuousClock.now - hub.startTime
        uptime.set(Int64(max(0, elapsed.components.seconds)))
        let passes = stats.passTimes.merged
        loopPassP99.set(Double(passes.quantile(0.99)) / 1e6)
        loopPassMax.set(Double(passes.max) / 1e6)
        for (phase, gauge) in clusterRooms { gauge.set(Int64(hub.replicatedEngine?.followedRoomCount(in: phase) ?? 0)) }
        set(clusterVoidRecords, stats.clusterVoidRecords)
        set(clusterFollowFailures, stats.clusterFollowFailures)
        set(clusterRecordsProposed, stats.clusterRecordsProposed)
        set(clusterWritesProposed, stats.clusterWritesProposed)
        set(clusterProposalsRetried, stats.clusterProposalsRetried)
        set(clusterDivergences, stats.clusterDivergences)
        clusterPresenceNodes.set(Int64(stats.clusterPresenceNodes))
        set(clusterPresenceNodesLost, stats.clusterPresenceNodesLost)
        set(clusterPresenceResyncs, stats.clusterPresenceResyncs)
        set(clusterPresenceMessagesOut, stats.clusterPresenceMessagesOut)
        set(clusterPresenceMessagesIn, stats.clusterPresenceMessagesIn)
        set(clusterPresenceMessagesIgnored, stats.clusterPresenceMessagesIgnored)
        if let notAfter = tlsCertificateNotAfter {
            if tlsCertificateExpiry == nil {
                tlsCertificateExpiry = registry.makeGauge(
                    descriptor: MetricNameDescriptor(
                        metricName: Self.tlsCertificateExpiryName, unitName: "",
                        helpText: "When the TLS certificate served to new connections expires (its notAfter), in seconds since the epoch."),
                    labels: [])
            }
            tlsCertificateExpiry?.set(Int64(notAfter))
        }
    }

    /// The text exposition format (version 0.0.4).
    func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }

    private func set(_ counter: Prometheus.Counter, _ value: UInt64) {
        counter.reset()
        counter.increment(by: Int64(clamping: value))
    }
}
