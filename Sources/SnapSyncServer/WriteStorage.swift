/// One accepted write, as the room committed it: what a durable store logs.
public struct AcceptedWrite {
    public var room: String
    public var epoch: UInt64
    /// The version the write produced.
    public var version: UInt64
    /// The write's idempotency key (may be empty).
    public var writeId: [UInt8]
    /// The DIFF frame sent to the room's members, length prefix included: the log record and
    /// the wire frame are the same bytes, so recovery can rebuild history without re-encoding.
    public var diffFrame: UnsafeRawBufferPointer
}

/// The seam between the daemon and durability: where an accepted write is handed to
/// storage before anyone is told about it.
///
/// The daemon calls, all on its loop thread:
/// 1. `prepare(room:)` before applying a MUTATE or REPLACE. Throwing refuses the write: the
///    writer gets REJECT storage_failure with the error's description, and nothing changes.
/// 2. `append(_:)` right after the room applied the write. The bytes are valid only during the
///    call (copy them to keep them).
/// 3. `commit()` once per loop pass, at the start of the flush and before any byte of the
///    pass's output (ACKs, DIFFs) is written to a socket. So an ACK or DIFF never leaves the
///    process before its write is durable, while one fsync covers every write of the pass.
///    Throwing is fatal: the daemon logs it and exits non-zero without sending the pass's output.
///
/// The default, `MemoryStorage`, keeps nothing: rooms live as long as the process.
public protocol WriteStorage: AnyObject {
    func prepare(room: String) throws
    func append(_ write: AcceptedWrite)
    func commit() throws
    /// Background work, from the daemon's one-second timer (checkpoints, a due fsync while the
    /// loop is idle); `image` gives a room's current state. Throwing is fatal, like `commit()`.
    func maintain(image: (String) -> RoomImage?) throws
}

extension WriteStorage {
    public func maintain(image: (String) -> RoomImage?) throws {}
}

/// No durability: every write is accepted and nothing is kept (rooms live in memory only).
public final class MemoryStorage: WriteStorage {
    public init() {}
    public func prepare(room: String) throws {}
    public func append(_ write: AcceptedWrite) {}
    public func commit() throws {}
}
