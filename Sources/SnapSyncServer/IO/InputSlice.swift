/// How much of one connection's input is handled in one loop pass before the other
/// connections get their turn.
///
/// A client may pipeline thousands of small requests in one write (JOINs and LEAVEs, PINGs,
/// STATS, VERIFYs, writes); read 64 KiB at a time, they would all be handled in one callback,
/// and every other client would wait for them. A connection's callback stops after
/// `maxFrames` frames or `maxDuration`, whichever comes first; its remaining whole frames wait
/// in its buffer (nothing more is read meanwhile, so the input budget holds them) until the
/// pass's flush has sent what the pass produced, and its next callback goes on from there
/// (`OutputFlush.resumeNextPass`). So one connection costs the loop at most one slice per
/// pass, plus the one request that ends it; what a single request may cost is bounded by the
/// frame and room limits (docs/engineering.md, "Work per loop pass").
struct InputSlice {
    /// Small requests cost about a microsecond each: 1,024 of them about a millisecond.
    static let maxFrames = 1024
    static let maxDuration: Duration = .milliseconds(2)
    /// The clock is read every this many frames (about 50 ns a read, against about a
    /// microsecond a frame), so a slice overruns `maxDuration` by at most this many requests
    /// less one.
    static let clockInterval = 4

    private var frames = 0
    private let deadline: ContinuousClock.Instant
    /// Whether the slice ended with input left to handle.
    private(set) var isSpent = false

    init(now: ContinuousClock.Instant = .now) {
        deadline = now + Self.maxDuration
    }

    /// One frame was handled. Returns false when the slice ended with it: the connection
    /// stops handling input until its next turn.
    /// - Complexity: O(1); a clock read every `clockInterval` frames.
    mutating func handledFrame() -> Bool {
        frames += 1
        if frames >= Self.maxFrames || (frames % Self.clockInterval == 0 && ContinuousClock.now >= deadline) {
            isSpent = true
        }
        return !isSpent
    }
}
