/// A joined room's local copy: its current snapshot and position, and the stream of its changes.
///
/// The client updates it from its DIFFs, catch-ups and resyncs; it is read from anywhere,
/// synchronously (a UI thread can read `snapshot` inside a data source callback). `snapshot` and
/// `position` always belong to the same version: read both at once with `current`.
///
/// `changes` has one consumer: iterate it from one task. It starts with the `.initial` change
/// and buffers without bound, so no change is ever lost, but each buffered change holds its
/// snapshot: consume it (or `leave` the room) rather than let it pile up. It finishes when the
/// room is left, the join is refused on a reconnect, or the client closes.
public final class RoomReplica: Sendable {
    public let room: String
    public let changes: AsyncStream<RoomChange>

    private let continuation: AsyncStream<RoomChange>.Continuation
    private let state: Locked<(snapshot: Snapshot, position: RoomPosition)>

    init(room: String) {
        self.room = room
        (changes, continuation) = AsyncStream.makeStream(of: RoomChange.self, bufferingPolicy: .unbounded)
        state = Locked((Snapshot(), RoomPosition(epoch: 0, version: 0)))
    }

    /// The snapshot at `position`.
    public var snapshot: Snapshot { state.withLock { $0.snapshot } }
    /// The room's epoch and the version the snapshot is at.
    public var position: RoomPosition { state.withLock { $0.position } }
    /// Both, read together.
    public var current: (snapshot: Snapshot, position: RoomPosition) { state.withLock { $0 } }

    /// Makes `change` current, then delivers it. Only the client calls this, from its actor, so
    /// changes are delivered in the order they were made current.
    func publish(_ change: RoomChange) {
        state.withLock { $0 = (change.snapshot, change.position) }
        continuation.yield(change)
    }

    func finish() {
        continuation.finish()
    }
}
