import SnapSyncStore
import SnapSyncWire

// Before a record about a room is logged, the store is asked to make room for it
// (`RoomStore.prepare`: a segment switch, a MANIFEST rewrite, a check of the disk's space).

/// What `LocalRoomEngine.prepareStore` found.
enum StorePreparation {
    /// The record may be logged.
    case ready
    /// The disk is full: this record is refused (or left for a later sweep); the rooms go on
    /// serving reads.
    case diskFull(StoreError)
    /// The store failed otherwise: the daemon is stopping (`Hub.fail`), and nothing of the pass
    /// may reach a client.
    case failed
}

extension LocalRoomEngine {
    /// `store.prepare` for a record about the room `name`. A full disk is the caller's to
    /// answer; any other failure (a segment switch's fsync, a MANIFEST that cannot be rewritten)
    /// means the log can no longer be trusted, so the daemon stops, as it does when a commit
    /// fails, with "the store failed while `doing` room `name`".
    func prepareStore(room name: String, while doing: String) -> StorePreparation {
        do {
            try store.prepare(room: name)
            return .ready
        } catch {
            if case .noSpace = error { return .diskFull(error) }
            hub.fail(ServerError("the store failed while \(doing) room \(LogEscaping.line(name)): \(error); stopping"))
            return .failed
        }
    }

    /// `prepareStore` for a request about the room `name` (a drop, a SET_TTL): nil when it may
    /// go on, else the REJECT it gets: storage_failure, saying the disk is full (when the store
    /// failed otherwise the daemon is stopping, and the REJECT is never sent).
    func prepareStore(forRequest what: String, room name: String) -> Rejection? {
        switch prepareStore(room: name, while: "preparing the \(what) of") {
        case .ready: nil
        case .diskFull(let error): Rejection(.storageFailure, "the \(what) of room \(LogEscaping.line(name)) could not be made durable: \(error)")
        case .failed: Rejection(.storageFailure, "the store failed")
        }
    }
}
