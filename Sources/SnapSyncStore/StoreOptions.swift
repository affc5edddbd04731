/// How the durable store is laid out and when it syncs. Defaults suit the daemon's defaults
/// (16 MiB frames, history of 1024 versions).
package struct StoreOptions: Sendable {
    /// The data directory: created (with its parents) when missing. The daemon's default
    /// (`$STATE_DIRECTORY`, else `./data`) is `DataDirectory.defaultPath()`.
    package var directory: String
    package var fsync: FsyncPolicy
    /// A log segment is closed and a new one started once it holds this many bytes; closed
    /// segments are deleted once every room written in them has a newer checkpoint.
    package var segmentBytes: Int
    /// The largest DIFF frame the daemon will log (its max_frame_bytes plus the 4-byte prefix).
    /// `reserve()` keeps at least this much disk space allocated ahead of the log's end.
    package var maxDiffFrameBytes: Int
    /// The log file grows in steps of at least this many bytes (posix_fallocate).
    package var preallocationBytes: Int
    /// A segment with writes in it is closed, and the rooms written in it checkpointed, at the
    /// latest this long after it was started, even if it is small.
    package var checkpointInterval: Duration
    /// `checkpoint(_:)` stops taking room images once it has written this many bytes in one
    /// call (it always writes at least one room), so that one call does not stall the loop for
    /// long.
    package var checkpointBytesPerCall: Int
    /// `checkpoint(_:)` starts no new checkpoint file once this long has passed in one call
    /// (it always writes one), for the same reason; the rooms left are due again at the next
    /// `maintain`. Read on `DurableStore.batchClock`. Nil: no time bound, for tests whose
    /// outcome must not depend on how fast the disk is.
    package var checkpointBatchDuration: Duration?
    /// How many recent writes per room are kept for history (CATCHUP) across restarts.
    package var historyLimit: Int
    /// `close(checkpointing:)` checkpoints every room written since its checkpoint when the next start
    /// would otherwise replay at least this many bytes of log. Below it, replay is quick (it
    /// costs O(bytes of log)) and a restart is not worth a rewrite of every room touched.
    package var shutdownCheckpointBytes: Int
    /// Segment closes and creations, segment deletions and the `everysec` fdatasync run on a
    /// background thread (`BackgroundIO`), so the event loop never waits for them. False runs
    /// them inline, at the call, in the same order: deterministic, for tests.
    package var backgroundThread: Bool
    /// The daemon evicts idle rooms (`SleepingRoomStore`, `--room-idle`): recovery then leaves
    /// every room that the log does not write after its checkpoint asleep, its checkpoint
    /// checksummed but not decoded, instead of loading every room into memory.
    package var sleepingRooms: Bool
    /// The daemon folds resumes and keeps a resume base per room (`HistoryBase`): recovery
    /// then keeps the bases checkpoints hold and moves them forward with the histories, so that
    /// they outlast a restart and a sleep. False: recovery reads none.
    package var keepsResumeBases: Bool
    /// `snapsyncd repair`: a damaged last record (which recovery otherwise refuses: it may have
    /// been acknowledged) is saved aside and the segment truncated before it, as a torn tail is.
    package var repairsDamagedTail = false

    package init(
        directory: String, fsync: FsyncPolicy = .always, segmentBytes: Int = 64 << 20,
        maxDiffFrameBytes: Int = (16 << 20) + 4, preallocationBytes: Int = 16 << 20,
        checkpointInterval: Duration = .seconds(300), checkpointBytesPerCall: Int = 32 << 20,
        checkpointBatchDuration: Duration? = .milliseconds(50),
        historyLimit: Int = 1024, shutdownCheckpointBytes: Int = 1 << 20, backgroundThread: Bool = true,
        sleepingRooms: Bool = false, keepsResumeBases: Bool = false
    ) {
        self.directory = directory
        self.fsync = fsync
        self.segmentBytes = segmentBytes
        self.maxDiffFrameBytes = maxDiffFrameBytes
        self.preallocationBytes = preallocationBytes
        self.checkpointInterval = checkpointInterval
        self.checkpointBytesPerCall = checkpointBytesPerCall
        self.checkpointBatchDuration = checkpointBatchDuration
        self.historyLimit = historyLimit
        self.shutdownCheckpointBytes = shutdownCheckpointBytes
        self.backgroundThread = backgroundThread
        self.sleepingRooms = sleepingRooms
        self.keepsResumeBases = keepsResumeBases
    }

    /// The largest record payload a write can need: the DIFF frame plus the room name (at most
    /// 128 bytes), the write_id (at most 32) and a few varints.
    var maxWritePayloadBytes: Int { maxDiffFrameBytes + 256 }
    var maxWriteRecordBytes: Int { RecordFraming.headerSize + maxWritePayloadBytes }
}
