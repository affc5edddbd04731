internal import CoreMetrics
internal import Prometheus
import SnapSyncWire

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
    private let roomsDeleted: Prometheus.Counter
    private let roomsExpired: Prometheus.Counter
    private let roomsEvicted: Prometheus.Counter
    private let roomsWoken: Prometheus.Counter
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
    private let tokensExpired: Prometheus.Counter
    private let forbidden: Prometheus.Counter
    private let uptime: Prometheus.Gauge
    private let loopPassP99: Prometheus.Gauge
    private let loopPassMax: Prometheus.Gauge

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
        r.makeGauge(descriptor: .init(metricName: "snapsync_build_info", unitName: "", helpText: "Always 1; the labels describe the running build."), labels: build).set(to: 1.0)
        connections = r.makeGauge(descriptor: .init(metricName: "snapsync_connections", unitName: "", helpText: "Client connections open now (STATS connections)."))
        connectionsAccepted = r.makeCounter(descriptor: .init(metricName: "snapsync_connections_accepted_total", unitName: "", helpText: "Client connections accepted (STATS connections_accepted)."))
        let refused = "Client connections refused at accept with ERROR, by reason (too_many_connections is STATS connections_refused)."
        refusedTooMany = r.makeCounter(descriptor: .init(metricName: "snapsync_connections_refused_total", unitName: "", helpText: refused), labels: [("reason", "too_many_connections")])
        refusedShuttingDown = r.makeCounter(descriptor: .init(metricName: "snapsync_connections_refused_total", unitName: "", helpText: refused), labels: [("reason", "shutting_down")])
        let rooms = "Rooms by state: resident in memory (STATS rooms), sleeping on disk only (STATS rooms_sleeping)."
        roomsResident = r.makeGauge(descriptor: .init(metricName: "snapsync_rooms", unitName: "", helpText: rooms), labels: [("state", "resident")])
        roomsSleeping = r.makeGauge(descriptor: .init(metricName: "snapsync_rooms", unitName: "", helpText: rooms), labels: [("state", "sleeping")])
        roomsDeleted = r.makeCounter(descriptor: .init(metricName: "snapsync_rooms_deleted_total", unitName: "", helpText: "Rooms deleted by DROP (STATS rooms_deleted)."))
        roomsExpired = r.makeCounter(descriptor: .init(metricName: "snapsync_rooms_expired_total", unitName: "", helpText: "Rooms removed when their time-to-live ran out (STATS rooms_expired)."))
        roomsEvicted = r.makeCounter(descriptor: .init(metricName: "snapsync_rooms_evicted_total", unitName: "", helpText: "Rooms evicted from memory to sleep on disk (STATS rooms_evicted)."))
        roomsWoken = r.makeCounter(descriptor: .init(metricName: "snapsync_rooms_woken_total", unitName: "", helpText: "Sleeping rooms loaded back into memory (STATS rooms_woken)."))
        items = r.makeGauge(descriptor: .init(metricName: "snapsync_items", unitName: "", helpText: "Items of all resident rooms together (STATS items)."))
        bytesIn = r.makeCounter(descriptor: .init(metricName: "snapsync_received_bytes_total", unitName: "", helpText: "Bytes read from client sockets (STATS bytes_in)."))
        bytesOut = r.makeCounter(descriptor: .init(metricName: "snapsync_sent_bytes_total", unitName: "", helpText: "Bytes the kernel accepted for client sockets (STATS bytes_out)."))

        let framesInHelp = "Frames received from clients, by message type (all types: STATS frames_in)."
        let frameBytesInHelp = "Bytes of the frames received, length prefix included, by message type."
        let framesOutHelp = "Frames queued for clients, by message type, a DIFF once per member (all types: STATS frames_out)."
        let frameBytesOutHelp = "Bytes of the frames queued for clients, length prefix included, by message type."
        framesIn = MessageType.allCases.filter { $0.sentBy != .server }.map { type in
            let labels = [("type", type.name)]
            return (
                type.rawValue, r.makeCounter(descriptor: .init(metricName: "snapsync_frames_received_total", unitName: "", helpText: framesInHelp), labels: labels),
                r.makeCounter(descriptor: .init(metricName: "snapsync_frame_bytes_received_total", unitName: "", helpText: frameBytesInHelp), labels: labels)
            )
        }
        framesInUnknown = (
            r.makeCounter(descriptor: .init(metricName: "snapsync_frames_received_total", unitName: "", helpText: framesInHelp), labels: [("type", "unknown")]),
            r.makeCounter(descriptor: .init(metricName: "snapsync_frame_bytes_received_total", unitName: "", helpText: frameBytesInHelp), labels: [("type", "unknown")])
        )
        framesOut = MessageType.allCases.filter { $0.sentBy != .client }.map { type in
            let labels = [("type", type.name)]
            return (
                type.rawValue, r.makeCounter(descriptor: .init(metricName: "snapsync_frames_sent_total", unitName: "", helpText: framesOutHelp), labels: labels),
                r.makeCounter(descriptor: .init(metricName: "snapsync_frame_bytes_sent_total", unitName: "", helpText: frameBytesOutHelp), labels: labels)
            )
        }
        writesApplied = r.makeCounter(descriptor: .init(metricName: "snapsync_writes_applied_total", unitName: "", helpText: "MUTATEs and REPLACEs applied (STATS writes_applied)."))
        let rejectedHelp = "MUTATEs and REPLACEs answered with REJECT, by error code (all codes: STATS writes_rejected; forbidden is snapsync_forbidden_total)."
        writesRejected = ErrorCode.allCases.filter { $0.kind == .reject && $0 != .forbidden }.map { code in
            (code, r.makeCounter(descriptor: .init(metricName: "snapsync_writes_rejected_total", unitName: "", helpText: rejectedHelp), labels: [("code", code.name)]))
        }
        outputQueueBytes = r.makeGauge(descriptor: .init(
            metricName: "snapsync_output_queue_bytes", unitName: "",
            helpText: "Memory of unsent output, all connections together, a shared DIFF or SNAPSHOT body once (the fan-out queues; --max-output-total-bytes)."))
        slowConsumers = r.makeCounter(descriptor: .init(metricName: "snapsync_slow_consumer_disconnects_total", unitName: "", helpText: "Connections cut off as slow consumers (STATS slow_consumer_disconnects)."))
        protocolErrors = r.makeCounter(descriptor: .init(metricName: "snapsync_protocol_errors_total", unitName: "", helpText: "Connections closed for a protocol error (STATS protocol_errors)."))
        authRefused = r.makeCounter(descriptor: .init(metricName: "snapsync_auth_refused_total", unitName: "", helpText: "HELLOs and AUTHs whose token was refused, closed with ERROR unauthorized (STATS auth_refused)."))
        tokensExpired = r.makeCounter(descriptor: .init(metricName: "snapsync_tokens_expired_total", unitName: "", helpText: "Sessions closed with ERROR token_expired (STATS tokens_expired)."))
        forbidden = r.makeCounter(descriptor: .init(metricName: "snapsync_forbidden_total", unitName: "", helpText: "Requests refused with REJECT forbidden (STATS forbidden)."))
        uptime = r.makeGauge(descriptor: .init(metricName: "snapsync_uptime_seconds", unitName: "", helpText: "Seconds since the daemon started serving (STATS uptime_seconds)."))
        loopPassP99 = r.makeGauge(descriptor: .init(metricName: "snapsync_loop_pass_p99_seconds", unitName: "", helpText: "99th percentile of the loop's flush passes over the last 10-20 s (STATS loop_pass_p99_us)."))
        loopPassMax = r.makeGauge(descriptor: .init(metricName: "snapsync_loop_pass_max_seconds", unitName: "", helpText: "Longest loop flush pass over the last 10-20 s (STATS loop_pass_max_us)."))

        let factory = PrometheusMetricsFactory(registry: r)
        fsyncTimer = CoreMetrics.Timer(
            label: "snapsync_fsync_duration_seconds", dimensions: [],
            handler: r.makeDurationHistogram(descriptor: .init(metricName: "snapsync_fsync_duration_seconds", unitName: "", helpText: "fdatasync of the write-ahead log: per loop pass under --fsync always, once a second on the store's thread under everysec, at segment switches and checkpoints."), buckets: Self.fsyncBuckets),
            factory: factory)
        writeAckTimer = CoreMetrics.Timer(
            label: "snapsync_write_ack_duration_seconds", dimensions: [],
            handler: r.makeDurationHistogram(descriptor: .init(metricName: "snapsync_write_ack_duration_seconds", unitName: "", helpText: "From handling a MUTATE or REPLACE to the end of the flush that commits it and sends its ACK."), buckets: Self.writeAckBuckets),
            factory: factory)
    }

    /// Copies the hub's counters and gauges in (a counter's value is set: reset, then
    /// incremented by the total, which nothing can observe in between on the loop's thread).
    /// - Complexity: O(message types + error codes), once per scrape.
    func update(from hub: Hub, connections open: Int) {
        let stats = hub.stats
        connections.set(Int64(open))
        set(connectionsAccepted, stats.connectionsAccepted)
        set(refusedTooMany, stats.connectionsRefused)
        set(refusedShuttingDown, stats.connectionsRefusedShuttingDown)
        roomsResident.set(Int64(hub.rooms.count))
        roomsSleeping.set(Int64(hub.sleepingRoomCount))
        set(roomsDeleted, stats.roomsDeleted)
        set(roomsExpired, stats.roomsExpired)
        set(roomsEvicted, stats.roomsEvicted)
        set(roomsWoken, stats.roomsWoken)
        items.set(Int64(hub.totalItems))
        set(bytesIn, stats.bytesIn)
        set(bytesOut, stats.bytesOut)
        let traffic = stats.traffic
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
        set(tokensExpired, stats.tokensExpired)
        set(forbidden, stats.forbidden)
        let elapsed = ContinuousClock.now - hub.startTime
        uptime.set(Int64(max(0, elapsed.components.seconds)))
        let passes = stats.passTimes.merged
        loopPassP99.set(Double(passes.quantile(0.99)) / 1e6)
        loopPassMax.set(Double(passes.max) / 1e6)
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
