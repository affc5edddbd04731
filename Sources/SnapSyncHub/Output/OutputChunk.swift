/// Bytes queued for sending, at a base address that never moves: what an `iovec` points at.
///
/// A DIFF is encoded once into one chunk, and that one chunk is queued on every member's
/// `OutputQueue` and kept in the room's history: fan-out to N subscribers costs N retains,
/// not N copies. Such a chunk is frozen (`isFrozen`): it never changes again.
///
/// A chunk that is not frozen belongs to one queue, which may append small replies (ACK, PONG,
/// REJECT) to it while it has room, so a burst of replies costs no allocation per message.
///
/// A room writes its DIFF chunks back to back into an `OutputArena` (`init(in:copying:)`), so
/// consecutive DIFFs are adjacent in memory: a queue then extends one entry over a whole run of
/// them (`OutputQueue.enqueue`), and a pass's DIFFs reach a subscriber as one iovec.
///
/// Reference counting is the lifetime: the memory is freed when the last queue and the history
/// let go of it (for an arena chunk: of every chunk in the arena). Not thread-safe; a chunk
/// lives on one loop thread.
package final class OutputChunk {
    let base: UnsafeMutableRawPointer
    let capacity: Int
    /// Bytes filled, from `base`.
    private(set) var count: Int
    /// Set once the chunk may be shared; `append` is then a bug.
    private(set) var isFrozen: Bool
    /// The arena that owns this chunk's bytes, if any; the chunk keeps it alive.
    let arena: OutputArena?
    /// `arena?.base` as a plain pointer, so that telling arenas apart costs no retain. While
    /// this chunk lives its arena lives, and no two live arenas share a base.
    let arenaBase: UnsafeMutableRawPointer?
    /// Queue entries holding this chunk, when it has no arena (`OutputMeter`).
    var queueEntries = 0

    /// A private chunk with room for `capacity` bytes, to be filled with `append`.
    init(capacity: Int) {
        self.capacity = max(capacity, 1)
        self.base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
        self.count = 0
        self.isFrozen = false
        self.arena = nil
        self.arenaBase = nil
    }

    /// A frozen chunk holding a copy of `bytes`, placed right after the arena's last chunk.
    /// - Precondition: the arena has room (`freeCapacity >= bytes.count`).
    /// - Complexity: O(bytes.count); one object allocation, no buffer allocation.
    init(in arena: OutputArena, copying bytes: UnsafeRawBufferPointer) {
        precondition(arena.freeCapacity >= bytes.count, "output arena overflow")
        self.base = arena.base + arena.used
        self.capacity = bytes.count
        if let source = bytes.baseAddress, bytes.count > 0 {
            base.copyMemory(from: source, byteCount: bytes.count)
        }
        self.count = bytes.count
        self.isFrozen = true
        self.arena = arena
        self.arenaBase = arena.base
        arena.used += bytes.count
    }

    /// A frozen chunk holding a copy of `bytes`.
    /// - Complexity: O(bytes.count), one allocation.
    convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(capacity: bytes.count)
        if let source = bytes.baseAddress, bytes.count > 0 {
            base.copyMemory(from: source, byteCount: bytes.count)
        }
        count = bytes.count
        isFrozen = true
    }

    deinit {
        if arena == nil { base.deallocate() }
    }

    var freeCapacity: Int { capacity - count }

    /// Appends bytes to a private chunk that has room for them.
    func append(_ bytes: UnsafeRawBufferPointer) {
        precondition(!isFrozen && bytes.count <= freeCapacity, "append to a frozen or full output chunk")
        if let source = bytes.baseAddress, bytes.count > 0 {
            (base + count).copyMemory(from: source, byteCount: bytes.count)
        }
        count += bytes.count
    }

    /// Empties a private chunk for reuse, once every byte of it has been sent.
    func reset() {
        precondition(!isFrozen, "reset of a shared output chunk")
        count = 0
    }

    /// Forgets the bytes from `count` on, in a private chunk (a slow consumer's unsent frames).
    func truncate(to count: Int) {
        precondition(!isFrozen && count <= self.count, "truncate of a shared output chunk, or beyond its bytes")
        self.count = count
    }

    /// Marks the chunk shareable; it never changes again.
    func freeze() { isFrozen = true }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// A copy of the bytes, for tests and logs.
    var array: [UInt8] { Array(bytes) }
}

extension OutputChunk {
    /// A frozen chunk holding a copy of `bytes`.
    static func frozen(_ bytes: [UInt8]) -> OutputChunk {
        bytes.withUnsafeBytes { OutputChunk(copying: $0) }
    }
}

/// Append-only memory for one room's DIFF chunks (`OutputChunk(in:copying:)`). Bytes below
/// `used` belong to chunks and never change; bytes above are referenced by nobody. Freed when
/// the last chunk in it goes (history and output queues hold the chunks).
package final class OutputArena {
    let base: UnsafeMutableRawPointer
    let capacity: Int
    var used = 0
    /// Queue entries holding a chunk of this arena (`OutputMeter`).
    var queueEntries = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
        self.base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    var freeCapacity: Int { capacity - used }
}
