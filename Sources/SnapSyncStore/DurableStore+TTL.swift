internal import SnapSyncWire

// Rooms' time-to-live: logged when set and kept in each checkpoint, so that the store alone
// can tell any room's TTL, also of a room the daemon no longer holds in memory
// (docs/persistence.md, "Room ends and time-to-live").

extension DurableStore {
    /// Logs room `room`'s TTL (`seconds`; 0: never expires) at `epoch`; a room the store did
    /// not hold yet (never written) is held from now on, at version 0, so that its TTL
    /// survives a restart. Buffers only, like `append`: the next `sync()` makes it durable.
    /// The room's segment is pinned until its next checkpoint, which carries the TTL.
    /// - Complexity: O(1).
    package func setTTL(room: String, epoch: UInt64, seconds: UInt64) {
        let key = RoomName(room)
        var track =
            rooms[key]
            ?? RoomTrack(epoch: epoch, version: 0, checkpointVersion: 0, checkpointFile: nil, pinnedSegment: nil, writeIDs: [])
        track.ttlSerial += 1
        track.ttlSeconds = seconds
        if track.pinnedSegment == nil { track.pinnedSegment = active.sequence }
        rooms[key] = track
        appendLifecycle(.ttl(room: room, epoch: track.epoch, serial: track.ttlSerial, seconds: seconds))
    }

    /// The TTL room `room` was given by SET_TTL, in seconds (0: never expires); nil when none
    /// was given or the store does not hold the room. O(1).
    package func explicitTTL(of room: String) -> UInt64? {
        let key = RoomName(room)
        if sleep.rooms[key] != nil { return sleep.ttls[key]?.seconds }
        return rooms[key]?.ttlSeconds
    }

    /// When room `room` expires after its last member and write: its own TTL, else `fallback`
    /// (the daemon's `--room-ttl`); nil: never (a TTL of 0, or neither). O(1).
    package func ttl(of room: String, default fallback: Duration?) -> Duration? {
        switch explicitTTL(of: room) {
        case .some(0): nil
        case .some(let seconds): .seconds(seconds)
        case .none: fallback
        }
    }
}
