/// The seam between the daemon and the store: where an accepted write is handed over before
/// anyone is told about it, and where the daemon pushes the checkpoints the store asks for.
///
/// The daemon calls, all on its loop thread:
/// 1. `prepare(room:)` before applying a MUTATE or REPLACE. Throwing `noSpace` refuses the
///    write: the writer gets REJECT storage_failure with the error's description, and nothing
///    changes. Any other error is fatal, like a failed `commit()`.
/// 2. `append(room:epoch:version:writeID:fingerprint:diffFrame:)` right after the room applied
///    the write, with the write's `WriteFingerprint` when it has a write id. The frame is
///    borrowed: valid only during the call (the store copies what it keeps).
/// 3. `commit()` once per loop pass, at the start of the flush and before any byte of the
///    pass's output (ACKs, DIFFs) is written to a socket. So an ACK or DIFF never leaves the
///    process before its write is durable, while one fsync covers every write of the pass.
///    Throwing is fatal: the daemon logs it and exits non-zero without sending the pass's output.
/// 4. `drop(room:epoch:version:)` and `setTTL(room:epoch:seconds:)` like `append`, for a room
///    that ends and a room given a TTL.
/// 5. `maintain()` from the daemon's one-second timer (the idle `everysec` fdatasync, segment
///    switches). It returns the rooms whose checkpoint is due, most urgent first (usually
///    none); the daemon then hands `checkpoint(_:)` the images of those rooms, in that order,
///    built lazily: the store takes them until its per-call budget is spent, so nothing is
///    built or copied for a room that is not checkpointed. Throwing is fatal, like `commit()`.
///
/// The default, `MemoryStore`, keeps nothing: rooms live as long as the process.
package protocol RoomStore: AnyObject {
    func prepare(room: String) throws(StoreError)
    func append(room: String, epoch: UInt64, version: UInt64, writeID: [UInt8], fingerprint: UInt64?, diffFrame: UnsafeRawBufferPointer)
    func commit() throws(StoreError)
    func maintain() throws(StoreError) -> [String]
    func checkpoint(_ images: some Sequence<RoomImage>) throws(StoreError)
    /// A room ended (DROP, expiry) at (`epoch`, `version`): buffered like `append`, durable at
    /// the next `commit()`, which must come before any LEFT or ACK about it is sent. Call
    /// `prepare(room:)` first (a full disk refuses the drop).
    func drop(room: String, epoch: UInt64, version: UInt64)
    /// The room's TTL (SET_TTL; 0: never expires), buffered and committed like `append`. Call
    /// `prepare(room:)` first.
    func setTTL(room: String, epoch: UInt64, seconds: UInt64)
    /// The last position the store holds of `room` (epoch, version), nil when it holds nothing
    /// of it: for a DROP of a room the daemon does not hold in memory.
    func position(of room: String) -> (epoch: UInt64, version: UInt64)?
    /// How many rooms the store holds (written or given a TTL, and not ended; asleep or not):
    /// what `--max-stored-rooms` bounds. 0 for a store that keeps nothing.
    var storedRoomCount: Int { get }
    /// The directory the store keeps its files in, nil for a store that keeps none.
    var dataDirectory: String? { get }
}

extension RoomStore {
    /// A store that keeps nothing has nothing to end or to time out.
    package func drop(room: String, epoch: UInt64, version: UInt64) {}
    package func setTTL(room: String, epoch: UInt64, seconds: UInt64) {}
    package func position(of room: String) -> (epoch: UInt64, version: UInt64)? { nil }
    package var storedRoomCount: Int { 0 }
    package var dataDirectory: String? { nil }
}

/// No durability: every write is accepted and nothing is kept (rooms live in memory only).
package final class MemoryStore: RoomStore {
    package init() {}
    package func prepare(room: String) throws(StoreError) {}
    package func append(
        room: String, epoch: UInt64, version: UInt64, writeID: [UInt8], fingerprint: UInt64?, diffFrame: UnsafeRawBufferPointer
    ) {}
    package func commit() throws(StoreError) {}
    package func maintain() throws(StoreError) -> [String] { [] }
    package func checkpoint(_ images: some Sequence<RoomImage>) throws(StoreError) {}
}
