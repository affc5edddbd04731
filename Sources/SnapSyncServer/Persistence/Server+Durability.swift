// The daemon's side of durability that lives with the storage: loading recovered rooms into
// the server, and the periodic storage maintenance driven by the server's one-second timer.

internal import SnapSyncModel

extension Server {
    /// Puts the rooms recovered from the data directory in place, each at its epoch and version
    /// with its history (so a client resuming inside it gets CATCHUP) and its write ids (so a
    /// retried write is still recognised). Call before `start()`.
    public func restore(_ recovered: [RecoveredRoom]) {
        for r in recovered {
            let history = r.history.map { (version: $0.version, writeId: $0.writeId, frame: $0.diffFrame) }
            let room = Room(name: r.name, epoch: r.epoch, version: r.version, snapshot: r.snapshot,
                            limits: configuration.roomLimits, history: history)
            room.budget = roomBudget
            rooms[r.name] = room
            roomBudget.update(room)
            totalItems += r.snapshot.numberOfItems
        }
    }

    /// Checkpoints and the idle `everysec` fdatasync. A failure is fatal, like a failed commit.
    func maintainStorage() {
        do {
            try storage.maintain { [rooms] name in
                guard let room = rooms[name] else { return nil }
                let frames = room.history.frames(after: room.historyBaseVersion) ?? []
                return RoomImage(epoch: room.epoch, version: room.version, snapshot: room.snapshot,
                                 history: frames.map(\.array))
            }
        } catch {
            fail(ServerError("storage maintenance failed: \(error); stopping"))
        }
    }
}
