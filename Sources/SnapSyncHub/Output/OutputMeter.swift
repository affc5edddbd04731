/// The output memory of every connection's queue together, for `--max-output-total-bytes`.
///
/// A private chunk's bytes count while they are unsent, in the queue that holds them. A shared
/// chunk (a DIFF, a SNAPSHOT body, a history frame) is one block of memory however many queues
/// hold it, so it counts once, as its whole block (its arena's capacity, or its own), from the
/// moment one queue entry holds it until the last such entry is sent or dropped
/// (`OutputQueue`). So the total never undercounts what queues keep alive, and a DIFF or a
/// SNAPSHOT sent to 1,000 connections counts once, not 1,000 times.
///
/// Not thread-safe: one meter per loop, like its queues.
package final class OutputMeter {
    private(set) var bytes = 0

    init() {}

    /// Private bytes queued (positive) or sent or dropped (negative).
    func add(_ count: Int) { bytes += count }

    /// A queue entry now holds `chunk`: its block counts if no entry held it before.
    func retain(_ chunk: OutputChunk) {
        if let arena = chunk.arena {
            arena.queueEntries += 1
            if arena.queueEntries == 1 { bytes += arena.capacity }
        } else {
            chunk.queueEntries += 1
            if chunk.queueEntries == 1 { bytes += chunk.capacity }
        }
    }

    /// A queue entry holding `chunk` was sent or dropped.
    func release(_ chunk: OutputChunk) {
        if let arena = chunk.arena {
            arena.queueEntries -= 1
            if arena.queueEntries == 0 { bytes -= arena.capacity }
        } else {
            chunk.queueEntries -= 1
            if chunk.queueEntries == 0 { bytes -= chunk.capacity }
        }
    }
}
