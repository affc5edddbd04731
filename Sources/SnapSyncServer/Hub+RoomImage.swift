// A room's state as the storage checkpoints it, for callers outside the hub (the daemon's
// shutdown checkpoint).

extension Hub {
    /// The room's current state, with the DIFF frames of its history, or nil when the daemon
    /// does not hold it. Call on the loop's thread, or after `run()` has returned.
    /// - Complexity: O(history frames): the snapshot is shared, not copied.
    package func roomImage(_ name: String) -> RoomImage? {
        guard let room = rooms[name] else { return nil }
        let frames = room.history.frames(after: room.historyBaseVersion) ?? []
        return RoomImage(
            epoch: room.epoch, version: room.version, snapshot: room.snapshot,
            history: frames.map(\.array))
    }
}
