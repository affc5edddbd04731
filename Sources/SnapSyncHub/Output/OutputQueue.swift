/// What one connection has left to send: a queue of (chunk, offset) entries, flushed with one
/// gathering write (`sendmsg` with up to `OutputQueue.maxIovecs` iovecs) per loop pass.
///
/// Shared DIFF chunks are queued by reference (`enqueue`); a DIFF that directly follows the
/// previous one in its room's arena extends that entry instead, so a run of DIFFs costs one
/// entry, one retain and one iovec. Small replies are copied into a private tail chunk
/// (`append`) so that a burst of ACKs is one iovec, not one per ACK.
///
/// Accounting: `pendingBytes` is every unsent byte, counted per connection even when the chunk
/// is shared, because that is what this subscriber would still have to receive. `cap` bounds
/// it: a connection whose output would pass the cap is a slow consumer and is cut off
/// (`Connection`), so its memory stays bounded and nobody else waits for it. The memory held,
/// a shared chunk once for all queues, is counted in `meter` (`OutputMeter`).
///
/// Complexity: enqueue and append are amortized O(1) (plus the copy for `append`); `gather` is
/// O(iovecs gathered); `consume(n)` is O(entries completed).
package struct OutputQueue {
    /// Linux's IOV_MAX (UIO_MAXIOV): the most iovecs one sendmsg/writev takes.
    package static let maxIovecs = 1024
    /// Largest private tail chunk; replies larger than this get a chunk of their own size.
    static let tailChunkSize = 4096
    /// A connection's first tail chunk. Its size doubles, up to `tailChunkSize`, each time a
    /// burst of replies fills one, so that an idle connection keeps a 256-byte spare (not 4 KiB:
    /// that spare was 80% of an idle connection's memory) and a busy one a 4 KiB one.
    static let firstTailChunkSize = 256

    private struct Entry {
        var chunk: OutputChunk
        var offset: Int
        /// Bytes beyond the chunk's own that this entry covers: the chunks that follow it in its
        /// arena (kept alive by the arena, which this chunk keeps alive). 0 for a private chunk,
        /// whose `count` may still grow.
        var extra = 0
        /// The entry ends at a frame boundary; false for the header of a SNAPSHOT whose body is
        /// the next entry (a shared chunk, `appendFrameHeader`).
        var endsFrame = true
        /// A frozen chunk queued by reference (`enqueue`), counted once in the meter while held;
        /// otherwise a private chunk whose unsent bytes are counted.
        var isShared = false

        var end: Int { chunk.count + extra }
    }

    /// Unsent bytes allowed before the connection counts as a slow consumer.
    let cap: Int
    /// Output memory of all queues together.
    let meter: OutputMeter
    private var entries: [Entry] = []
    /// Index of the first unsent entry; the array is compacted lazily (amortized O(1) pops).
    private var head = 0
    /// A fully sent private chunk kept for the next reply, so a connection exchanging requests
    /// and answers allocates nothing in steady state.
    private var spare: OutputChunk?
    /// Capacity of the next tail chunk (see `firstTailChunkSize`).
    private var tailSize = OutputQueue.firstTailChunkSize

    private(set) var pendingBytes = 0
    /// The last entry sent did not end its frame (`Entry.endsFrame`).
    private var headContinuesFrame = false

    init(cap: Int, meter: OutputMeter = OutputMeter()) {
        self.cap = cap
        self.meter = meter
    }

    package var isEmpty: Bool { pendingBytes == 0 }
    var entryCount: Int { entries.count - head }

    /// Whether adding `count` more bytes would pass the cap. A single frame is always accepted
    /// into an empty queue, so that the cap never makes a large SNAPSHOT impossible.
    func wouldExceedCap(adding count: Int) -> Bool {
        pendingBytes > 0 && pendingBytes + count > cap
    }

    /// Queues a whole chunk by reference (no copy): a shared DIFF or a large frame. A chunk that
    /// starts where the last entry ends, in the same arena, extends that entry (no retain, no
    /// new entry): the case of every DIFF after the first that a member gets in a pass.
    mutating func enqueue(_ chunk: OutputChunk) {
        enqueue(chunk, spanning: chunk.count)
    }

    /// Queues `bytes` from the start of `chunk` by reference: the chunk and, when `bytes` is
    /// more than its own, the chunks after it in its arena (a room's DIFFs of one pass, which
    /// lie back to back: `Hub.flushBroadcast`).
    /// - Precondition: `bytes == chunk.count` unless the chunk is in an arena, whose frames
    ///   from it on cover `bytes`.
    mutating func enqueue(_ chunk: OutputChunk, spanning bytes: Int) {
        guard bytes > 0 else { return }
        if let arena = chunk.arenaBase, head < entries.count {
            // Through the buffer, so that reading the last entry's chunk costs no retain.
            let extended = entries.withUnsafeMutableBufferPointer { buffer -> Bool in
                let last = buffer.baseAddress! + (buffer.count - 1)
                guard last.pointee.chunk.arenaBase == arena,
                    last.pointee.chunk.base + last.pointee.end == chunk.base
                else { return false }
                last.pointee.extra += bytes
                return true
            }
            if extended {
                pendingBytes += bytes
                return
            }
        }
        precondition(bytes == chunk.count || chunk.arenaBase != nil, "a span beyond a chunk that has no arena")
        let shared = chunk.isFrozen
        entries.append(Entry(chunk: chunk, offset: 0, extra: bytes - chunk.count, isShared: shared))
        pendingBytes += bytes
        if shared { meter.retain(chunk) } else { meter.add(bytes) }
    }

    /// Copies `bytes` (one or more whole frames) to the end of the queue, into the private tail
    /// chunk when it has room.
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        if head < entries.count, let tail = entries.last?.chunk, !tail.isFrozen, tail.freeCapacity >= bytes.count {
            tail.append(bytes)
        } else {
            if head < entries.count, let tail = entries.last?.chunk, !tail.isFrozen {
                tailSize = min(tailSize * 2, Self.tailChunkSize)  // a burst filled the tail
            }
            let chunk: OutputChunk
            if let reused = spare, reused.freeCapacity >= bytes.count {
                spare = nil
                chunk = reused
            } else {
                chunk = OutputChunk(capacity: max(bytes.count, tailSize))
            }
            chunk.append(bytes)
            entries.append(Entry(chunk: chunk, offset: 0))
        }
        pendingBytes += bytes.count
        meter.add(bytes.count)
    }

    /// Copies the first part of a frame whose rest is queued next (`enqueue`): the private
    /// header of a SNAPSHOT whose body is shared. The two are kept or dropped together.
    mutating func appendFrameHeader(_ bytes: UnsafeRawBufferPointer) {
        append(bytes)
        entries[entries.count - 1].endsFrame = false
    }

    /// Fills `spans` with the unsent bytes after the first `skipping`, in order, up to
    /// `capacity` entries. Reads the queue only: an IO thread gathers and sends a connection's
    /// bytes while the loop's thread waits, and the loop's thread consumes what was sent
    /// afterwards (`consume` changes the meter and arenas that every queue shares).
    /// - Returns: the number of spans filled.
    /// - Complexity: O(entries skipped + spans filled).
    package func gather(into spans: UnsafeMutablePointer<OutputSpan>, capacity: Int, skipping: Int = 0) -> Int {
        var n = 0
        var index = head
        var skip = skipping
        while index < entries.count && n < capacity {
            let entry = entries[index]
            let unsent = entry.end - entry.offset
            index += 1
            if skip >= unsent {
                skip -= unsent
                continue
            }
            spans[n] = OutputSpan(base: entry.chunk.base + entry.offset + skip, count: unsent - skip)
            skip = 0
            n += 1
        }
        return n
    }

    /// Marks `count` bytes as sent, from the front.
    package mutating func consume(_ count: Int) {
        precondition(count <= pendingBytes, "consumed more than was queued")
        var left = count
        pendingBytes -= count
        while left > 0 {
            let remaining = entries[head].end - entries[head].offset
            if left < remaining {
                entries[head].offset += left
                if !entries[head].isShared { meter.add(-left) }
                return
            }
            left -= remaining
            if !entries[head].isShared { meter.add(-remaining) }
            popHead()
        }
        // Sent entries that were empty to begin with cannot exist (enqueue skips them).
        if pendingBytes == 0 { removeAll() }
    }

    /// The stream is in the middle of a frame: the entry sent before the head was a SNAPSHOT
    /// header, or the bytes of the head entry sent so far end inside one of its frames (an
    /// entry may hold many frames: a run of DIFFs, a burst of replies).
    /// - Complexity: O(frames before the head entry's offset); a cut-off path, never per frame.
    var isMidFrame: Bool {
        guard head < entries.count else { return false }
        return headContinuesFrame || (entries[head].offset > 0 && endOfFrameInHead() != nil)
    }

    /// Where the frame being sent ends, counted from the head entry's start: nil when the
    /// entry's sent bytes end at a frame boundary. Past the entry's end when the entry ends with
    /// a SNAPSHOT header whose body is the next entry. Reads the frames' length prefixes
    /// (PROTOCOL.md §1: 4-byte big-endian length, then that many bytes), which is valid because
    /// every entry starts at a frame boundary unless `headContinuesFrame`.
    private func endOfFrameInHead() -> Int? {
        let entry = entries[head]
        precondition(!headContinuesFrame, "the head entry starts inside a frame")
        var position = 0
        while position < entry.offset {
            guard position + 4 <= entry.end else { return entry.end }
            let prefix = entry.chunk.base + position
            let length =
                Int(prefix.load(as: UInt8.self)) << 24 | Int((prefix + 1).load(as: UInt8.self)) << 16
                | Int((prefix + 2).load(as: UInt8.self)) << 8 | Int((prefix + 3).load(as: UInt8.self))
            position += 4 + length
        }
        return position == entry.offset ? nil : position
    }

    /// Keeps only what must still be sent to leave the stream at a frame boundary (the rest of
    /// the frame being sent: of the head entry, or a SNAPSHOT header and its body) and drops
    /// everything else, including the frames of the head entry after that one
    /// (PROTOCOL.md §7.1: the frame being written is completed, no other frame is started).
    /// - Returns: the bytes dropped.
    /// - Complexity: O(entries + frames before the head entry's offset).
    @discardableResult
    mutating func dropAllButPartialHead() -> Int {
        guard head < entries.count else { return 0 }
        var dropped = 0
        var keep = 0
        if headContinuesFrame {
            keep = 1
        } else if entries[head].offset > 0, let frameEnd = endOfFrameInHead() {
            keep = 1
            dropped += trimHead(to: frameEnd)
        }
        while keep > 0 && !entries[head + keep - 1].endsFrame && head + keep < entries.count { keep += 1 }
        for index in (head + keep)..<entries.count {
            dropped += entries[index].end - entries[index].offset
            unmeter(entries[index])
        }
        entries.removeSubrange((head + keep)...)
        pendingBytes -= dropped
        if keep == 0 { removeAll() }
        return dropped
    }

    /// Shortens the head entry to end at `end` (a frame end inside it; nothing when it is not
    /// inside), returning the bytes cut. A private chunk is truncated; a run of shared arena
    /// chunks gives back `extra`. A shared chunk holds one frame or a SNAPSHOT body, so a frame
    /// end inside it is its own end. The caller adjusts `pendingBytes`.
    private mutating func trimHead(to end: Int) -> Int {
        let entry = entries[head]
        guard end < entry.end else { return 0 }
        let cut = entry.end - end
        if entry.isShared {
            precondition(end >= entry.chunk.count, "a frame ends inside a shared chunk")
            entries[head].extra = end - entry.chunk.count
        } else {
            entry.chunk.truncate(to: end)
            meter.add(-cut)
        }
        entries[head].endsFrame = true
        return cut
    }

    /// Drops everything (a connection that is gone).
    package mutating func removeAll() {
        for index in head..<entries.count { unmeter(entries[index]) }
        entries.removeAll(keepingCapacity: entries.capacity <= 64)
        head = 0
        pendingBytes = 0
        headContinuesFrame = false
    }

    /// Takes an unsent entry's memory out of the meter.
    private func unmeter(_ entry: Entry) {
        if entry.isShared { meter.release(entry.chunk) } else { meter.add(entry.offset - entry.end) }
    }

    private mutating func popHead() {
        let chunk = entries[head].chunk
        if entries[head].isShared { meter.release(chunk) }
        headContinuesFrame = !entries[head].endsFrame
        head += 1
        // A private chunk belongs to this queue alone, so once sent it can be refilled.
        if !chunk.isFrozen, chunk.capacity <= Self.tailChunkSize, chunk.capacity > (spare?.capacity ?? 0) {
            chunk.reset()
            spare = chunk
        }
        if head == entries.count {
            entries.removeAll(keepingCapacity: entries.capacity <= 64)
            head = 0
        } else if head >= 64 && head * 2 >= entries.count {
            entries.removeSubrange(0..<head)
            head = 0
        }
    }
}
