import Testing
import SnapSyncTestThreads
@testable import SnapSyncHub
#if canImport(Glibc)
    import Glibc
#endif

// The per-connection output queue: byte accounting, iovec gathering, partial sends, the cap.

private func chunk(_ bytes: [UInt8]) -> OutputChunk { OutputChunk.frozen(bytes) }

/// A frame with `body` (PROTOCOL.md §1: 4-byte big-endian length, then the body). The cut-off
/// paths read the length prefixes, so tests that drop output queue real frames.
private func framed(_ body: [UInt8]) -> [UInt8] {
    let count = UInt32(body.count)
    return [UInt8(count >> 24), UInt8(truncatingIfNeeded: count >> 16), UInt8(truncatingIfNeeded: count >> 8), UInt8(truncatingIfNeeded: count)] + body
}

/// Gathers the queue and concatenates what the iovecs point at.
private func gathered(_ queue: OutputQueue, capacity: Int = OutputQueue.maxIovecs) -> (bytes: [UInt8], iovecs: Int) {
    let iovecs = UnsafeMutablePointer<OutputSpan>.allocate(capacity: capacity)
    defer { iovecs.deallocate() }
    let count = queue.gather(into: iovecs, capacity: capacity)
    var bytes: [UInt8] = []
    for index in 0..<count {
        bytes += iovecs[index].bytes
    }
    return (bytes, count)
}

extension OutputQueue {
    /// `append` of a byte array (spelled out: an untyped literal would be `[Int]`).
    mutating func appendBytes(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }
}

@Suite(.unitTests) struct OutputQueueTests {
    @Test func sharedChunksAreQueuedByReferenceAndCountedPerQueue() {
        let diff = chunk([1, 2, 3, 4])
        var a = OutputQueue(cap: 100), b = OutputQueue(cap: 100)
        a.enqueue(diff)
        b.enqueue(diff)
        #expect(a.pendingBytes == 4 && b.pendingBytes == 4)
        let iovecs = UnsafeMutablePointer<OutputSpan>.allocate(capacity: 2)
        defer { iovecs.deallocate() }
        _ = a.gather(into: iovecs, capacity: 1)
        _ = b.gather(into: iovecs + 1, capacity: 1)
        #expect(iovecs[0].base == iovecs[1].base, "both queues point at the one encoding")
    }

    @Test func smallRepliesShareOnePrivateTailChunk() {
        var queue = OutputQueue(cap: 1 << 20)
        for byte in UInt8(0)..<10 { queue.appendBytes([byte, byte]) }
        #expect(queue.pendingBytes == 20)
        #expect(queue.entryCount == 1)
        // A shared chunk closes the tail; a later reply starts a new one after it.
        queue.enqueue(chunk([99]))
        queue.appendBytes([7])
        #expect(queue.entryCount == 3)
        let (bytes, iovecs) = gathered(queue)
        #expect(iovecs == 3)
        #expect(bytes == (0..<10).flatMap { [UInt8($0), UInt8($0)] } + [99, 7])
    }

    @Test func partialSendsConsumeFromTheFrontInOrder() {
        var queue = OutputQueue(cap: 1 << 20)
        queue.enqueue(chunk([1, 2, 3]))
        queue.enqueue(chunk([4, 5]))
        queue.appendBytes([6, 7, 8])
        queue.consume(2)
        #expect(queue.pendingBytes == 6)
        #expect(gathered(queue).bytes == [3, 4, 5, 6, 7, 8])
        queue.consume(3)
        #expect(gathered(queue).bytes == [6, 7, 8])
        #expect(queue.entryCount == 1)
        queue.consume(3)
        #expect(queue.isEmpty && queue.entryCount == 0 && queue.pendingBytes == 0)
        // The drained private chunk is reused, and the queue works as new.
        queue.appendBytes([9])
        #expect(gathered(queue).bytes == [9])
    }

    @Test func gatherStopsAtTheIovecCapacity() {
        var queue = OutputQueue(cap: 1 << 20)
        for byte in UInt8(0)..<5 { queue.enqueue(chunk([byte])) }
        let (bytes, count) = gathered(queue, capacity: 3)
        #expect(count == 3 && bytes == [0, 1, 2])
    }

    @Test func theCapRefusesGrowthButNeverTheFirstFrame() {
        var queue = OutputQueue(cap: 10)
        #expect(!queue.wouldExceedCap(adding: 50), "one frame into an empty queue is always accepted")
        queue.enqueue(chunk(Array(repeating: 0, count: 8)))
        #expect(!queue.wouldExceedCap(adding: 2))
        #expect(queue.wouldExceedCap(adding: 3))
        queue.consume(8)
        #expect(!queue.wouldExceedCap(adding: 50))
    }

    @Test func slowConsumerCutOffKeepsOnlyThePartlySentFrame() {
        let first = framed([1, 2, 3]), second = framed([5, 6]), reply = framed([7])
        var queue = OutputQueue(cap: 1 << 20)
        queue.enqueue(chunk(first))
        queue.enqueue(chunk(second))
        queue.appendBytes(reply)
        queue.consume(1)
        #expect(queue.isMidFrame)
        let dropped = queue.dropAllButPartialHead()
        #expect(dropped == second.count + reply.count)
        #expect(queue.pendingBytes == first.count - 1)
        #expect(gathered(queue).bytes == Array(first.dropFirst()))
        // Nothing partly sent: everything goes.
        var fresh = OutputQueue(cap: 1 << 20)
        fresh.enqueue(chunk(first))
        #expect(!fresh.isMidFrame)
        #expect(fresh.dropAllButPartialHead() == first.count)
        #expect(fresh.isEmpty && fresh.entryCount == 0)
    }

    /// A burst of replies shares one private entry: a cut-off completes the reply being sent
    /// and drops the replies after it, and one that comes at a reply's end keeps nothing.
    @Test func aCutOffInsideABurstOfRepliesEndsAtTheReplyBeingSent() {
        let replies = [framed([1]), framed([2, 2]), framed([3, 3, 3])]
        func burst() -> OutputQueue {
            var queue = OutputQueue(cap: 1 << 20)
            for reply in replies { queue.appendBytes(reply) }
            #expect(queue.entryCount == 1)
            return queue
        }
        let all = replies.joined().map { $0 }
        for sent in 1..<all.count {
            var queue = burst()
            queue.consume(sent)
            // The end of the reply holding byte `sent`, or nil when `sent` is a reply's end.
            let ends = [replies[0].count, replies[0].count + replies[1].count, all.count]
            let atBoundary = ends.contains(sent)
            #expect(queue.isMidFrame == !atBoundary, "\(sent) bytes sent")
            let keepUntil = atBoundary ? sent : ends.first { $0 > sent }!
            #expect(queue.dropAllButPartialHead() == all.count - keepUntil, "\(sent) bytes sent")
            #expect(gathered(queue).bytes == Array(all[sent..<keepUntil]), "\(sent) bytes sent")
            #expect(queue.pendingBytes == keepUntil - sent)
            // The ERROR that follows a cut-off is appended after the kept bytes.
            queue.appendBytes(framed([9]))
            #expect(gathered(queue).bytes == Array(all[sent..<keepUntil]) + framed([9]), "\(sent) bytes sent")
        }
    }

    /// A SNAPSHOT is a private header and a shared body in two entries: once any of it has been
    /// sent, a cut-off keeps both, so the stream stays framed; before that, both go.
    @Test func aSnapshotHeaderAndItsSharedBodyAreKeptOrDroppedTogether() {
        let header: [UInt8] = [0, 0, 0, 5, 0x20]  // length 5: the type byte here, 4 body bytes next
        let after = framed([8])
        func snapshotQueue() -> OutputQueue {
            var queue = OutputQueue(cap: 1 << 20)
            header.withUnsafeBytes { queue.appendFrameHeader($0) }
            queue.enqueue(chunk([4, 5, 6, 7]))
            queue.appendBytes(after)
            return queue
        }
        let frame = header + [4, 5, 6, 7]
        var untouched = snapshotQueue()
        #expect(!untouched.isMidFrame)
        #expect(untouched.dropAllButPartialHead() == frame.count + after.count && untouched.isEmpty)
        for sent in 1..<frame.count {
            var queue = snapshotQueue()
            queue.consume(sent)
            #expect(queue.isMidFrame, "\(sent) bytes sent")
            #expect(queue.dropAllButPartialHead() == after.count, "\(sent) bytes sent")
            #expect(gathered(queue).bytes == Array(frame.dropFirst(sent)), "\(sent) bytes sent")
        }
        var whole = snapshotQueue()
        whole.consume(frame.count)
        #expect(!whole.isMidFrame)
    }

    /// The meter counts a private byte while it is unsent, and a shared chunk (or its whole
    /// arena) once while any queue entry holds it, however many queues do.
    @Test func theMeterCountsSharedMemoryOnce() {
        let meter = OutputMeter()
        var a = OutputQueue(cap: 1 << 20, meter: meter), b = OutputQueue(cap: 1 << 20, meter: meter)
        let shared = chunk([1, 2, 3, 4, 5, 6, 7, 8])
        a.enqueue(shared)
        b.enqueue(shared)
        #expect(meter.bytes == 8)
        a.appendBytes([9, 9])
        #expect(meter.bytes == 10)
        a.consume(9)
        #expect(meter.bytes == 8 + 1, "b still holds the shared chunk; one private byte is unsent")
        b.consume(3)
        #expect(meter.bytes == 9)
        b.removeAll()
        a.consume(1)
        #expect(meter.bytes == 0)

        let arena = OutputArena(capacity: 64)
        let first = framed([UInt8](repeating: 1, count: 6)).withUnsafeBytes { OutputChunk(in: arena, copying: $0) }
        let second = framed([UInt8](repeating: 2, count: 6)).withUnsafeBytes { OutputChunk(in: arena, copying: $0) }
        a.enqueue(first)
        b.enqueue(first)
        b.enqueue(second)
        #expect(meter.bytes == 64, "the arena is the memory held, once")
        a.consume(5)
        a.dropAllButPartialHead()
        #expect(meter.bytes == 64)
        a.consume(5)
        b.dropAllButPartialHead()
        #expect(meter.bytes == 0)
    }

    @Test func emptyChunksAreNotQueued() {
        var queue = OutputQueue(cap: 10)
        queue.enqueue(chunk([]))
        [UInt8]().withUnsafeBytes { queue.append($0) }
        #expect(queue.isEmpty && queue.entryCount == 0)
    }
}

/// A room's DIFFs, written back to back into one arena (as `Room` does).
private func arenaChunks(_ frames: [[UInt8]], arena: OutputArena = OutputArena(capacity: 1024)) -> [OutputChunk] {
    frames.map { frame in frame.withUnsafeBytes { OutputChunk(in: arena, copying: $0) } }
}

@Suite(.unitTests) struct OutputQueueArenaTests {
    @Test func adjacentArenaChunksExtendOneEntry() {
        let diffs = arenaChunks([[1, 2], [3], [4, 5, 6]])
        var queue = OutputQueue(cap: 100)
        for diff in diffs { queue.enqueue(diff) }
        #expect(queue.entryCount == 1)
        #expect(queue.pendingBytes == 6)
        let (bytes, iovecs) = gathered(queue)
        #expect(iovecs == 1)
        #expect(bytes == [1, 2, 3, 4, 5, 6])
    }

    @Test func aReplyOrAGapBetweenArenaChunksStartsANewEntry() {
        let diffs = arenaChunks([[1], [2], [3], [4]])
        var queue = OutputQueue(cap: 100)
        queue.enqueue(diffs[0])
        queue.appendBytes([9])  // the writer's ACK after its DIFF
        queue.enqueue(diffs[1])  // follows diffs[0] in memory, but not in the queue
        queue.enqueue(diffs[3])  // skips diffs[2]: not adjacent
        #expect(queue.entryCount == 4)
        #expect(gathered(queue).bytes == [1, 9, 2, 4])
    }

    @Test func chunksOfAnotherArenaAreNotMerged() {
        let first = arenaChunks([[1, 2]])
        let second = arenaChunks([[3]])
        var queue = OutputQueue(cap: 100)
        queue.enqueue(first[0])
        queue.enqueue(second[0])
        #expect(queue.entryCount == 2)
        #expect(gathered(queue).bytes == [1, 2, 3])
    }

    @Test func partialSendsAndDropsWorkAcrossAnExtendedEntry() {
        let frames = [framed([1, 2, 3]), framed([4, 5]), framed([6])]
        let diffs = arenaChunks(frames)
        var queue = OutputQueue(cap: 100)
        queue.enqueue(diffs[0])
        queue.enqueue(diffs[1])
        let sent = frames[0].count + 3
        queue.consume(sent)  // into the second DIFF of the extended entry
        queue.enqueue(diffs[2])  // still extends it
        #expect(queue.entryCount == 1)
        #expect(gathered(queue).bytes == Array(frames[1].dropFirst(3)) + frames[2])
        // A slow consumer completes the DIFF being sent, and drops the later DIFFs of the same
        // entry and the reply after it.
        queue.appendBytes(framed([7]))
        #expect(queue.isMidFrame)
        #expect(queue.dropAllButPartialHead() == frames[2].count + 5)
        #expect(gathered(queue).bytes == Array(frames[1].dropFirst(3)))
        queue.consume(frames[1].count - 3)
        #expect(queue.isEmpty)
    }

    /// Sent bytes that end exactly at a DIFF's end inside a run: not mid-frame, nothing kept.
    @Test func aCutOffAtAFrameEndInsideARunKeepsNothing() {
        let frames = [framed([1, 2, 3]), framed([4, 5]), framed([6])]
        let meter = OutputMeter()
        var queue = OutputQueue(cap: 100, meter: meter)
        for diff in arenaChunks(frames) { queue.enqueue(diff) }
        queue.consume(frames[0].count)
        #expect(!queue.isMidFrame)
        #expect(queue.dropAllButPartialHead() == frames[1].count + frames[2].count)
        #expect(queue.isEmpty && queue.entryCount == 0)
        #expect(meter.bytes == 0)
    }

    @Test func theArenaLivesAsLongAsAnyOfItsChunks() {
        var queue = OutputQueue(cap: 100)
        weak var weakArena: OutputArena?
        do {
            let arena = OutputArena(capacity: 64)
            weakArena = arena
            let diffs = arenaChunks([[1], [2]], arena: arena)
            queue.enqueue(diffs[0])
            queue.enqueue(diffs[1])
        }
        #expect(weakArena != nil, "the queued entry keeps its chunk, and the chunk its arena")
        #expect(gathered(queue).bytes == [1, 2])
        queue.consume(2)
        #expect(weakArena == nil)
    }
}

@Suite(.unitTests) struct OutputQueueTailTests {
    @Test func tailChunksStartSmallAndGrowWithBursts() {
        var queue = OutputQueue(cap: 1 << 20)
        let reply = [UInt8](repeating: 1, count: 100)
        queue.appendBytes(reply)
        queue.appendBytes(reply)
        #expect(queue.entryCount == 1, "two replies fit the first 256-byte tail")
        queue.appendBytes(reply)
        #expect(queue.entryCount == 2, "the third starts a new, larger tail")
        for _ in 0..<4 { queue.appendBytes(reply) }
        #expect(queue.entryCount == 2, "the 512-byte tail holds the next four")
        #expect(gathered(queue).bytes == [UInt8](repeating: 1, count: 700))
        queue.consume(700)
        #expect(queue.isEmpty)
        // The larger sent tail is kept as the spare and refilled: a burst as large as before
        // now fits one chunk.
        for _ in 0..<5 { queue.appendBytes(reply) }
        #expect(queue.entryCount == 1)
    }
}
