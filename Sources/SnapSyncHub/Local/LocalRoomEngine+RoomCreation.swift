import SnapSyncStore

// A room costs disk from its first write (or SET_TTL) until it ends: that request is where the
// quotas on new rooms are checked (Hub+RoomCreation.swift), with what the store holds and what
// the data directory takes, measured here every `dataUsageInterval` off the loop.

extension LocalRoomEngine {
    var storedRoomCount: Int { store.storedRoomCount }

    /// Whether a request that stores something of `room` may go on: nil when the room exists
    /// (it has been written, or the store holds it), or when its creation passes the quotas;
    /// else the REJECT quota_exceeded it gets.
    /// - Complexity: O(1).
    func admitCreation(of room: Room, for session: Session) -> Rejection? {
        guard room.version == 0, store.position(of: room.name) == nil else { return nil }
        return hub.admitRoomCreation(room.name, storedRooms: store.storedRoomCount, for: session)
    }

    /// Measures the data directory's size and free space (`hub.dataUsage`) every
    /// `dataUsageInterval`: on the daemon's worker thread (a stat per file), inline without one.
    func measureDataUsage(now: ContinuousClock.Instant) {
        guard let path = store.dataDirectory, !isMeasuringDataUsage,
            dataUsageMeasured.map({ now - $0 >= hub.configuration.dataUsageInterval }) ?? true
        else { return }
        dataUsageMeasured = now
        guard let worker = hub.offLoopWorker else {
            hub.dataUsage = DataDirectoryUsage.measure(path) ?? hub.dataUsage
            return
        }
        isMeasuringDataUsage = true
        worker.perform({ DataDirectoryUsage.measure(path) }) { [unowned self] usage in
            isMeasuringDataUsage = false
            if let usage { hub.dataUsage = usage }
        }
    }
}
