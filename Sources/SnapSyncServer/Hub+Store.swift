// The daemon's side of durability that lives with the storage: loading recovered rooms into
// the hub, and the periodic storage maintenance driven by the daemon's one-second timer.

internal import SnapSyncModel
import SnapSyncWire

extension Hub {
    /// Puts the rooms recovered from the data directory in place, each at its epoch and version
    /// with its history (so a client resuming inside it gets CATCHUP) and its write ids (so a
    /// retried write is still recognised). Call before `start()`.
    ///
    /// - Throws: `ServerError` naming the first room that breaks a content limit lowered since
    ///   it was written, the flag and the value that would admit it (PROTOCOL.md §12): such a
    ///   room could not be served (a conforming client refuses its SNAPSHOT), so the daemon does
    ///   not start, as it does not start on a damaged data directory. Nothing is restored then.
    package func restore(_ recovered: [RecoveredRoom]) throws(ServerError) {
        let limits = configuration.wire.model
        for r in recovered {
            if let violation = r.snapshot.firstLimitViolation(limits) {
                throw Self.overLimit(room: r.name, snapshot: r.snapshot, violation)
            }
        }
        for r in recovered {
            let history = r.history.map { (version: $0.version, writeId: $0.writeId, frame: $0.diffFrame) }
            let room = Room(
                name: r.name, epoch: r.epoch, version: r.version, snapshot: r.snapshot,
                limits: configuration.wire, maxHistoryBytes: configuration.historyBytes, history: history)
            room.budget = roomBudget
            rooms[r.name] = room
            roomBudget.update(room)
            totalItems += r.snapshot.numberOfItems
        }
    }

    /// Checkpoints and the idle `everysec` fdatasync. A failure is fatal, like a failed commit.
    func maintainStorage() {
        do {
            try storage.maintain(image: roomImage)
        } catch {
            fail(ServerError("storage maintenance failed: \(error); stopping"))
        }
    }

    /// "room R holds 50 items, over --max-items-per-room 40: ..." for `restore`.
    private static func overLimit(room: String, snapshot: Snapshot, _ violation: Violation) -> ServerError {
        let (what, flag, needed): (String, String, Int)
        switch violation {
        case .snapshotTooLarge(let limit):
            (what, flag, needed) = (
                "encodes to \(snapshot.canonicalByteCount) bytes, over --max-snapshot-bytes \(limit)",
                "--max-snapshot-bytes", snapshot.canonicalByteCount
            )
        case .tooManySections(let limit):
            (what, flag, needed) = (
                "holds \(snapshot.numberOfSections) sections, over --max-sections-per-room \(limit)",
                "--max-sections-per-room", snapshot.numberOfSections
            )
        case .tooManyItems(let limit):
            (what, flag, needed) = (
                "holds \(snapshot.numberOfItems) items, over --max-items-per-room \(limit)",
                "--max-items-per-room", snapshot.numberOfItems
            )
        case .identifierTooLong(let id, let limit):
            (what, flag, needed) = (
                "holds the identifier \(id) of \(id.count) bytes, over --max-identifier-bytes \(limit)",
                "--max-identifier-bytes", id.count
            )
        case .payloadTooLarge(let id, let size, let limit):
            (what, flag, needed) = (
                "holds a payload of \(size) bytes (of \(id)), over --max-payload-bytes \(limit)",
                "--max-payload-bytes", size
            )
        default:
            (what, flag, needed) = ("breaks a content limit: \(violation)", "the limit flags", 0)
        }
        return ServerError(
            "cannot serve the recovered rooms: room \(LogEscaping.line(room)) \(what); start with \(flag) "
                + "\(needed) or more (or with the limits it was written under, and shrink the room first)")
    }
}
