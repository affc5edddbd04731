internal import Logging
internal import SnapSyncWire

// Rooms that end (DROP, expiry): a tombstone in the log, so that recovery never brings the
// room back, and the reclaim of what the room held on disk (docs/persistence.md, "Room ends
// and time-to-live").

extension DurableStore {
    /// Logs the end of room `room` at (`epoch`, `version`) and forgets it: its log records no
    /// longer pin their segments, and its checkpoint goes at the next `reclaimDroppedRooms()`
    /// (the next `maintain` or `close`). Like `append`, it only buffers: the tombstone is
    /// written by the next `sync()`, which must come before anyone is told of the room's end.
    /// A room the store holds nothing of (never written, no TTL) logs nothing.
    /// - Complexity: O(1).
    package func drop(room: String, epoch: UInt64, version: UInt64) {
        let key = RoomName(room)
        if let sleeper = sleep.remove(key) {
            // Asleep (DurableStore+Sleep.swift): its checkpoint holds it whole, at its last version.
            appendLifecycle(.tombstone(room: room, epoch: sleeper.epoch, version: sleeper.version))
            droppedCheckpoints.append(CheckpointFile.fileName(sleeper.checkpoint))
            statistics.roomsDropped += 1
            return
        }
        guard let track = rooms.removeValue(forKey: key) else { return }
        if track.epoch != epoch {
            // The daemon's room and the store disagree; the tombstone names the daemon's
            // incarnation, which then never existed on disk, and the store's stays void too.
            logger.critical("store: drop of \(room) at epoch \(epoch), but the log holds it at epoch \(track.epoch)")
        }
        appendLifecycle(.tombstone(room: room, epoch: track.epoch, version: max(version, track.version)))
        if let file = track.checkpointFile { droppedCheckpoints.append(file) }
        statistics.roomsDropped += 1
    }

    /// Removes the checkpoints of the rooms dropped since the last call, once their tombstones
    /// are durable: the log is written and fdatasynced first (whatever the fsync policy: a
    /// checkpoint gone with its tombstone lost in a machine crash would leave the room's later
    /// log records with no base, and the start refused), then one MANIFEST no longer lists them,
    /// then they are unlinked. Called by `maintain` before any segment can be deleted, and by
    /// `close`. A full disk leaves them listed (in `removing`) until a MANIFEST can be written.
    /// - Complexity: O(1) when no room was dropped; else one fdatasync (waiting for background
    ///   work) and one MANIFEST.
    func reclaimDroppedRooms() throws(StoreError) {
        guard !droppedCheckpoints.isEmpty else { return }
        // The closed segments' fdatasync first, so that no record of the active segment reaches
        // the disk before them; not the rest of the background work (checkpoint unlinks, which
        // a mass DROP queues by the thousand: waiting for them held the loop 20 s a tick).
        try waitForClosingSegments()
        try writePending()
        try syncActiveNow(now: .now)
        let files = droppedCheckpoints
        droppedCheckpoints.removeAll()
        try commitCheckpoints(replacing: files)
        logger.debug("store: removed \(files.count) checkpoint(s) of dropped rooms")
    }

    /// Buffers one lifecycle record, as `append` buffers a write.
    func appendLifecycle(_ record: LifecycleRecord) {
        var payload: [UInt8] = []
        record.encodePayload(into: &payload)
        RecordFraming.append(payload: payload, to: &pending)
        active.records += 1
        statistics.recordsAppended += 1
    }

    /// The last logged position of `room` (epoch, version), nil when the store holds nothing of
    /// it: what a DROP of a room the daemon does not hold in memory answers with, and passes to
    /// `drop(room:epoch:version:)`. O(1).
    package func position(of room: String) -> (epoch: UInt64, version: UInt64)? {
        let key = RoomName(room)
        if let sleeper = sleep.rooms[key] { return (sleeper.epoch, sleeper.version) }
        return rooms[key].map { ($0.epoch, $0.version) }
    }

    /// The names of the rooms the store holds (written, or given a TTL, and not dropped; asleep
    /// or not), sorted.
    package var storedRoomCount: Int { rooms.count + sleep.rooms.count }
    package var dataDirectory: String? { options.directory }

    package var roomNames: [String] { (rooms.keys.map(\.string) + sleep.rooms.keys.map(\.string)).sorted() }
}
