/// The daemon's `WriteStorage` seam, backed by a `DurableStore`: what makes `snapsyncd` durable.
///
/// - `prepare` reserves log space: a full disk refuses the write (REJECT storage_failure)
///   before the room changes, and the daemon goes on serving reads.
/// - `append` buffers the write's record (one copy of the DIFF frame, straight from the chunk
///   the members are sent).
/// - `commit` is `DurableStore.sync()`: one write(2) and, under `always`, one fdatasync for
///   every write of the loop pass, before any ACK or DIFF of the pass goes out. It throws only
///   fatal errors, on which the daemon exits without sending the pass's output.
/// - `maintain` runs from the daemon's one-second timer (checkpoints, the idle `everysec` sync).
public final class DurableWriteStorage: WriteStorage {
    public let store: DurableStore

    public init(store: DurableStore) {
        self.store = store
    }

    public func prepare(room: String) throws {
        try store.reserve()
    }

    public func append(_ write: AcceptedWrite) {
        store.append(
            room: write.room, epoch: write.epoch, version: write.version, writeId: write.writeId,
            diffFrame: write.diffFrame)
    }

    public func commit() throws {
        try store.sync()
    }

    public func maintain(image: (String) -> RoomImage?) throws {
        try store.maintain(image: image)
    }
}
