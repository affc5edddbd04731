import SnapSyncModel
package import SnapSyncWire
package import SnapSyncAuth

/// Everything `snapsyncd` can be configured with. Each property has a `--flag` of the same name
/// in kebab case (see `snapsyncd --help`); the defaults here are the documented defaults.
package struct ServerConfiguration: Sendable {
    /// Address to listen on: numeric IPv4 or IPv6 (`::1`, `[::1]`), or a host name.
    package var host = "127.0.0.1"
    /// TCP port; 0 picks a free ephemeral port (logged as `listening on HOST:PORT`).
    package var port = 7400
    /// Whether the plain (unencrypted) listener on `host`:`port` runs (`--port off` turns it off,
    /// for a daemon that serves TLS only).
    package var plainListener = true
    /// The TLS listener, when `--tls-listen` is given.
    package var tls: TLSSettings?
    /// Where durable state will live (created if missing).
    package var dataDirectory = "./data"

    /// The limits announced in WELCOME, each the home of its flag: `maxFrameBytes`
    /// (`--max-frame-bytes`), `maxRoomsPerConnection`, `historyCount`, and in `model` the
    /// content limits (`--max-items-per-room` is `model.maxItems`, `--max-sections-per-room`
    /// `model.maxSections`, `--max-payload-bytes`, `--max-identifier-bytes`,
    /// `--max-snapshot-bytes` `model.maxSnapshotBytes`, `--max-outline-depth` `model.maxOutlineDepth`).
    package var wire = WireLimits()
    /// Connections served at once; one more is answered ERROR too_many_connections and closed.
    package var maxConnections = 10_000
    /// Rooms the daemon holds in memory; a JOIN or write needing one more evicts the
    /// longest-idle memberless room when rooms can sleep (`roomIdle`), and gets REJECT
    /// too_many_rooms when none can be evicted.
    package var maxRooms = 100_000
    /// Rooms the daemon's store may hold, awake or asleep (`--max-stored-rooms`): a request
    /// that would create one more gets REJECT quota_exceeded. Rooms that exist are never refused.
    package var maxStoredRooms = 1_000_000
    /// The data directory's size past which no room is created (`--max-data-bytes`); 0: no
    /// limit of its own. Measured every `dataUsageInterval`, off the loop.
    package var maxDataBytes = 0
    /// No room is created while the data directory's filesystem has less free space than this:
    /// what is left is kept for the rooms that exist. Two log segments at the daemon's defaults.
    package var newRoomFreeBytes = 128 << 20
    /// How often the data directory's size and free space are measured.
    package var dataUsageInterval: Duration = .seconds(5)
    /// Rooms one principal may create per minute (`--room-creations-per-minute`, a token
    /// bucket of that size refilled continuously); 0: no limit.
    package var roomCreationsPerMinute = 600
    /// Threads that send a loop pass's output (`--io-threads`): the loop's own and N - 1
    /// helpers; 1 sends everything on the loop's thread. snapsyncd's default follows the cores.
    package var ioThreads = 1
    /// Connections an IO thread takes at a time (`--io-thread-batch`); a pass with no more
    /// dirty connections than this is sent by the loop's thread alone.
    package var ioThreadBatch = 32
    /// Unsent output one connection may have queued; past it the connection is a slow consumer
    /// (ERROR slow_consumer, closed). A single frame into an empty queue is always accepted.
    package var maxOutputBytes = 32 * 1024 * 1024
    /// Bytes held for unfinished frames, all connections together. Past it, the connections
    /// holding the largest unfinished frames are closed with ERROR input_budget_exceeded.
    package var maxInputBytes = 256 * 1024 * 1024
    /// Memory of unsent output, all connections together: private bytes while unsent, and a
    /// chunk shared by several queues (a DIFF, a SNAPSHOT body) once (`OutputMeter`). Past it,
    /// the connections with the largest queues are cut off as slow consumers (largest first,
    /// down to 7/8 of it).
    package var maxOutputTotalBytes = 2 * 1024 * 1024 * 1024
    /// Bytes of all rooms together: canonical snapshot bytes, DIFF history bytes and
    /// `RoomMemoryBudget.bytesPerRememberedID` per remembered frame and write id. A write that
    /// could take the total past it gets REJECT server_full (`RoomMemoryBudget`).
    package var maxRoomTotalBytes = 8 * 1024 * 1024 * 1024
    /// Bytes of DIFF frames each room keeps for resume (besides `wire.historyCount` frames).
    package var historyBytes = 4 * 1024 * 1024
    /// VERIFY's bound on the loop's time: a room whose canonical encoding is larger than
    /// `verifyFreeDigestBytes` (hashing it takes more than about a millisecond) has its digest
    /// computed for a VERIFY at most once per `verifyDigestInterval`; a VERIFY that would need
    /// another sooner gets REJECT `busy`. A digest already known at the room's version (a JOIN
    /// or a VERIFY computed it) is always answered.
    package var verifyFreeDigestBytes = 1024 * 1024
    package var verifyDigestInterval: Duration = .seconds(1)
    /// The shortest time between two PRESENCE_DIFF frames of one room (`--presence-interval`);
    /// a room with more watchers waits longer: this × ⌈watchers / 1,000⌉, at most a second
    /// (PROTOCOL.md §9, "Presence"; Hub+Presence.swift).
    package var presenceInterval: Duration = .milliseconds(50)
    /// How long a windowed member's counts may lag when its window did not change: count-only
    /// WINDOW_DIFFs are coalesced to one per this interval (`--window-counts-interval`); zero
    /// sends one per version.
    package var windowCountsInterval: Duration = .milliseconds(100)
    /// SET_PRESENCE requests one connection may make per second, sustained, with a burst of as
    /// many (`--presence-updates-per-second`); beyond, REJECT busy.
    package var presenceUpdatesPerSecond = 60
    /// Whether rooms keep a resume base and answer a version 3 resume with one folded DIFF
    /// when that is smaller than the DIFFs missed (`--no-fold-resumes` turns it off; PROTOCOL.md
    /// §11.12, Room+Folding.swift). The base costs about the undos of each room's window of
    /// writes, at most the room's size plus one state of it (ResumeBase.swift).
    package var foldResumes = true
    /// A catch-up whose replayed DIFFs are fewer bytes than this is replayed without trying a
    /// fold: the saving could not pay for an O(n) fold.
    package var foldMinimumReplayBytes = 4096
    /// A fold of a room whose canonical encoding is larger than this costs the loop more than
    /// about 2 ms (6.5 ms for 10,000 items, 18 ms for 38,000, docs/benchmarks.md "resume"), and a
    /// client can ask for one per JOIN, so it runs off the loop (`Hub.offLoopWorker`, the
    /// daemon's `LoopWorker`) while the JOIN waits. Without a worker (the hub's unit tests) such
    /// folds run on the loop, at most one per `foldInterval` in the whole daemon; a resume that
    /// would need another sooner is replayed.
    package var foldFreeBytes = 64 * 1024
    package var foldInterval: Duration = .seconds(1)
    /// Rooms larger than this (canonical bytes) are never folded, and their checkpoints hold no
    /// resume base: a fold costs the worker about 0.26 s per 13 MB (500,000 items) and a few
    /// copies of the room in memory (docs/benchmarks.md, "resume"). Their resumes are replayed. The default
    /// is the default `--max-snapshot-bytes`, rounded up: every room the default limits admit.
    package var foldMaxBytes = 16 * 1024 * 1024
    /// The time-to-live of rooms that set none with SET_TTL (`--room-ttl`): a room with no
    /// member and no write for this long expires (PROTOCOL.md §9). Nil: rooms never expire.
    package var roomTTL: Duration?
    /// With a durable store, a room with no members and no writes for this long is evicted from
    /// memory and sleeps in its checkpoint until a request names it (LocalRoomEngine+Sleep.swift);
    /// `maxRooms` then bounds resident rooms. Nil (`--room-idle off` or `0`): rooms never sleep.
    package var roomIdle: Duration? = .seconds(600)

    /// Time a new connection has to send HELLO.
    package var handshakeTimeout: Duration = .seconds(10)
    /// Time without a whole frame after which the server sends PING; as long again without one
    /// closes the connection with ERROR timeout. Bytes of an unfinished frame do not count, so
    /// this also bounds how long a frame may take to arrive: at most twice this.
    package var idleTimeout: Duration = .seconds(60)
    /// Longest wait at shutdown for queued output to reach clients.
    package var shutdownTimeout: Duration = .seconds(5)
    /// `listen(2)` backlog.
    package var listenBacklog = 1024
    /// Name sent in WELCOME.
    package var serverName = "snapsyncd"
    /// The keys tokens are verified with (`--auth-keys`, loaded with `--auth-audience` and
    /// `--auth-leeway`): every HELLO must then carry a valid token and every request is checked
    /// against its grants (docs/auth.md). Nil: `--auth off`, no token is looked at.
    package var authKeys: AuthKeyStore?
    /// Cluster mode (`--cluster-checkpoint-every`): a node that applies a record it proposed
    /// whose version is a multiple of this saves the room's checkpoint to the log.
    package var clusterCheckpointInterval = 1000
    /// Cluster mode: a followed room nobody here uses (no member, no write waiting) is
    /// unfollowed and forgotten after this many seconds idle.
    package var clusterIdleSeconds: Int64 = 30

    package init() {}

    /// The largest `max_snapshot_bytes` that leaves room in a SNAPSHOT frame for its header
    /// (request id, room name of at most 128 bytes, epoch, version, reason, digest): 64 KiB
    /// below `maxFrameBytes`, or half of it for frames of 128 KiB and less.
    package static func snapshotBytes(forFrameBytes frameBytes: Int) -> Int {
        frameBytes > 128 * 1024 ? frameBytes - 64 * 1024 : frameBytes / 2
    }

    /// What one connection's input buffer may hold beyond one frame of `maxFrameBytes`: its
    /// length prefix and the rest of the last read (at most 64 KiB), rounded up.
    static let inputBudgetMargin = 128 * 1024

    /// SNAPSHOT header bytes beyond the snapshot itself, with margin (see `snapshotBytes`).
    static let snapshotFrameOverhead = 1024

    /// Checks that the values make sense together.
    package func validate() throws(ConfigurationError) {
        func fail(_ text: String) -> ConfigurationError { ConfigurationError(message: text) }
        guard (0...65535).contains(port) else { throw fail("--port must be 0...65535, not \(port)") }
        guard !host.isEmpty else { throw fail("--host must not be empty") }
        guard plainListener || tls != nil else { throw fail("--port off needs --tls-listen: the daemon would listen nowhere") }
        if let tls {
            guard (0...65535).contains(tls.port), !tls.host.isEmpty else {
                throw fail("--tls-listen must be HOST:PORT with a port in 0...65535, not \(tls.host):\(tls.port)")
            }
        }
        guard (1024...(1 << 30)).contains(wire.maxFrameBytes) else {
            throw fail("--max-frame-bytes must be between 1KiB and 1GiB, not \(wire.maxFrameBytes)")
        }
        guard wire.model.maxSnapshotBytes >= 1, wire.model.maxSnapshotBytes + Self.snapshotFrameOverhead <= wire.maxFrameBytes else {
            throw fail(
                "--max-snapshot-bytes must be at least 1 and at most --max-frame-bytes minus \(Self.snapshotFrameOverhead) (\(wire.maxFrameBytes - Self.snapshotFrameOverhead)), not \(wire.model.maxSnapshotBytes)"
            )
        }
        guard wire.model.maxIdentifierBytes >= 1 else { throw fail("--max-identifier-bytes must be at least 1") }
        guard wire.model.maxPayloadBytes >= 0 else { throw fail("--max-payload-bytes must not be negative") }
        guard wire.model.maxItems >= 0 else { throw fail("--max-items-per-room must not be negative") }
        guard wire.model.maxSections >= 0 else { throw fail("--max-sections-per-room must not be negative") }
        guard wire.model.maxOutlineDepth >= 1 else { throw fail("--max-outline-depth must be at least 1 (roots are level 0)") }
        guard wire.maxRoomsPerConnection >= 1 else { throw fail("--max-rooms-per-connection must be at least 1") }
        guard wire.historyCount >= 0 else { throw fail("--history-count must not be negative") }
        guard historyBytes >= 0 else { throw fail("--history-bytes must not be negative") }
        guard maxConnections >= 1 else { throw fail("--max-connections must be at least 1") }
        guard maxRooms >= 1 else { throw fail("--max-rooms must be at least 1") }
        guard maxStoredRooms >= 1 else { throw fail("--max-stored-rooms must be at least 1") }
        guard maxDataBytes >= 0 else { throw fail("--max-data-bytes must not be negative") }
        guard roomCreationsPerMinute >= 0 else { throw fail("--room-creations-per-minute must not be negative") }
        guard presenceInterval >= .milliseconds(1) && presenceInterval <= .seconds(1) else {
            throw fail("--presence-interval must be between 1 ms and 1 s")
        }
        guard presenceUpdatesPerSecond >= 1 else { throw fail("--presence-updates-per-second must be at least 1") }
        guard wire.maxPresenceBytes >= 0 && wire.maxPresenceBytes <= 64 * 1024 else {
            throw fail("--max-presence-bytes must be between 0 and 64KiB")
        }
        guard wire.presenceView >= 1 && wire.presenceView <= 10_000 else { throw fail("--presence-view must be between 1 and 10000") }
        // A window's snapshot is built and diffed on the loop: O(rows) per change that reaches it.
        guard windowCountsInterval >= .zero && windowCountsInterval <= .seconds(10) else {
            throw fail("--window-counts-interval must be between 0 and 10s")
        }
        guard wire.maxWindowRows >= 1 && wire.maxWindowRows <= 100_000 else { throw fail("--max-window-rows must be between 1 and 100000") }
        guard ioThreads >= 1 && ioThreads <= 64 else { throw fail("--io-threads must be between 1 and 64") }
        guard ioThreadBatch >= 1 else { throw fail("--io-thread-batch must be at least 1") }
        guard clusterCheckpointInterval >= 1 else { throw fail("--cluster-checkpoint-every must be at least 1") }
        guard clusterIdleSeconds >= 1 else { throw fail("the cluster's idle time must be at least 1 second") }
        guard maxOutputBytes >= 1024 else { throw fail("--max-output-bytes must be at least 1KiB, not \(maxOutputBytes)") }
        guard maxInputBytes >= wire.maxFrameBytes + Self.inputBudgetMargin else {
            throw fail(
                "--max-input-bytes must be at least --max-frame-bytes plus \(ConfigurationValue.describe(byteCount: Self.inputBudgetMargin)) (\(wire.maxFrameBytes + Self.inputBudgetMargin)), so that one frame of the largest size fits, not \(maxInputBytes)"
            )
        }
        guard maxOutputTotalBytes >= maxOutputBytes, maxOutputTotalBytes >= wire.maxFrameBytes + Self.inputBudgetMargin else {
            throw fail(
                "--max-output-total-bytes must be at least --max-output-bytes (\(maxOutputBytes)) and at least --max-frame-bytes plus \(ConfigurationValue.describe(byteCount: Self.inputBudgetMargin)) (\(wire.maxFrameBytes + Self.inputBudgetMargin)), so that one connection's queue fits, not \(maxOutputTotalBytes)"
            )
        }
        // With folding, a room's resume base counts as a second snapshot.
        let fullRoom = (foldResumes ? 2 : 1) * wire.model.maxSnapshotBytes + historyBytes
        guard maxRoomTotalBytes >= fullRoom else {
            throw fail(
                "--max-room-total-bytes must be at least \(foldResumes ? "twice --max-snapshot-bytes (a room and its resume base)" : "--max-snapshot-bytes") plus --history-bytes (\(fullRoom)), so that one full room fits, not \(maxRoomTotalBytes)"
            )
        }
        if let roomIdle, roomIdle <= .zero { throw fail("--room-idle must be positive, or off") }
        guard listenBacklog >= 1 else { throw fail("--backlog must be at least 1") }
        for (flag, value) in [
            ("--handshake-timeout", handshakeTimeout), ("--idle-timeout", idleTimeout),
            ("--shutdown-timeout", shutdownTimeout),
        ] where value <= .zero {
            throw fail("\(flag) must be positive")
        }
    }
}

/// Configuration values that do not fit together, or cannot be parsed.
/// (Public while `DataDirectory`, which throws it, is public.)
public struct ConfigurationError: Error, CustomStringConvertible, Sendable, Equatable {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// Parsers for the value syntax of `snapsyncd`'s flags.
package enum ConfigurationValue {
    /// A byte count: a plain number, or one with a binary suffix (`K`/`KiB`, `M`/`MiB`,
    /// `G`/`GiB`, case-insensitive, optional `B`): `65536`, `64KiB`, `16M`, `1GiB`.
    package static func byteCount(_ text: String) throws(ConfigurationError) -> Int {
        let trimmed = text.trimmingSpaces
        let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
        let unit = trimmed.dropFirst(digits.count).lowercased()
        guard !digits.isEmpty, let number = Int(digits) else {
            throw ConfigurationError(message: "'\(text)' is not a byte count (examples: 65536, 64KiB, 16MiB)")
        }
        let multiplier: Int
        switch unit {
        case "", "b": multiplier = 1
        case "k", "kb", "kib": multiplier = 1 << 10
        case "m", "mb", "mib": multiplier = 1 << 20
        case "g", "gb", "gib": multiplier = 1 << 30
        default: throw ConfigurationError(message: "'\(text)' has an unknown unit '\(unit)' (use K, M or G, binary)")
        }
        let (value, overflow) = number.multipliedReportingOverflow(by: multiplier)
        guard !overflow else { throw ConfigurationError(message: "'\(text)' is too large") }
        return value
    }

    /// A duration: a number with an optional unit `ms`, `s` (the default), `m` or `h`:
    /// `10`, `10s`, `500ms`, `2m`. Fractions are allowed: `1.5s`.
    package static func duration(_ text: String) throws(ConfigurationError) -> Duration {
        let trimmed = text.trimmingSpaces
        let number = trimmed.prefix { ($0.isASCII && $0.isNumber) || $0 == "." }
        let unit = trimmed.dropFirst(number.count).lowercased()
        guard !number.isEmpty, let value = Double(number), value.isFinite else {
            throw ConfigurationError(message: "'\(text)' is not a duration (examples: 10s, 500ms, 2m)")
        }
        let milliseconds: Double
        switch unit {
        case "ms": milliseconds = value
        case "", "s": milliseconds = value * 1000
        case "m", "min": milliseconds = value * 60_000
        case "h": milliseconds = value * 3_600_000
        default: throw ConfigurationError(message: "'\(text)' has an unknown unit '\(unit)' (use ms, s, m or h)")
        }
        guard milliseconds < 1e12 else { throw ConfigurationError(message: "'\(text)' is too long") }
        return .milliseconds(Int64(milliseconds.rounded()))
    }

    /// A duration, or nil for `never`, `off` or a zero duration (`--room-ttl`).
    package static func durationOrNever(_ text: String) throws(ConfigurationError) -> Duration? {
        if ["never", "off"].contains(text.trimmingSpaces.lowercased()) { return nil }
        let value = try duration(text)
        return value == .zero ? nil : value
    }

    /// `16MiB` for 16777216, `1000` for 1000: the shortest exact binary form, for help texts.
    package static func describe(byteCount: Int) -> String {
        for (suffix, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] where byteCount != 0 && byteCount % (1 << shift) == 0 {
            return "\(byteCount >> shift)\(suffix)"
        }
        return "\(byteCount)"
    }

    /// `10s`, `500ms`: for help texts.
    package static func describe(duration: Duration) -> String {
        let ms = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        return ms % 1000 == 0 ? "\(ms / 1000)s" : "\(ms)ms"
    }
}

extension String {
    fileprivate var trimmingSpaces: Substring {
        let start = firstIndex { $0 != " " } ?? endIndex
        let end = lastIndex { $0 != " " }.map { index(after: $0) } ?? endIndex
        return start < end ? self[start..<end] : ""
    }
}
