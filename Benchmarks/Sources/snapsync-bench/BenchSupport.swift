// Helpers shared by every snapsync-bench subcommand: timing and medians (the JSON they print is
// in JSON.swift, system calls in BenchSystem.swift).

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

enum Bench {
    /// Wall time of `body`, in nanoseconds, on the monotonic clock.
    static func time(_ body: () -> Void) -> Double {
        let clock = ContinuousClock()
        let start = clock.now
        body()
        let elapsed = clock.now - start
        let (seconds, attoseconds) = elapsed.components
        return Double(seconds) * 1e9 + Double(attoseconds) / 1e9
    }

    /// CPU time of the calling thread, in nanoseconds. On a shared machine this moves far less
    /// than wall time when other processes compete for the cores (it still includes cache
    /// misses they cause).
    static func threadCPUTime() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) * 1e9 + Double(ts.tv_nsec)
    }

    /// Wall and thread CPU time of `body`, in nanoseconds.
    static func timeBoth(_ body: () -> Void) -> (wall: Double, cpu: Double) {
        let cpuStart = threadCPUTime()
        let wall = time(body)
        return (wall, threadCPUTime() - cpuStart)
    }

    /// Like `measure`, with thread CPU time next to wall time.
    static func measureBoth(runs: Int, warmup: Int = 1, _ body: () -> Void) -> (wall: [Double], cpu: [Double]) {
        for _ in 0..<warmup { body() }
        var wall: [Double] = [], cpu: [Double] = []
        for _ in 0..<runs {
            let t = timeBoth(body)
            wall.append(t.wall)
            cpu.append(t.cpu)
        }
        return (wall, cpu)
    }

    /// Like `measureBoth`, for work that returns a value: the value is freed after the clock
    /// stops, and the time that takes is reported apart (`free` in nanoseconds, wall), so a
    /// result made of many small allocations does not hide inside the figure for the work.
    static func measureProducing<T>(runs: Int, warmup: Int = 1, _ body: () -> T) -> (wall: [Double], cpu: [Double], free: [Double]) {
        for _ in 0..<warmup { consume(body()) }
        var wall: [Double] = [], cpu: [Double] = [], free: [Double] = []
        for _ in 0..<runs {
            var result: T?
            let t = timeBoth { result = body() }
            wall.append(t.wall)
            cpu.append(t.cpu)
            free.append(time { result = nil })
            consume(result)
        }
        return (wall, cpu, free)
    }

    /// Runs `body` `warmup` times untimed (caches, page faults, lazy allocations), then `runs`
    /// times timed; returns the durations in nanoseconds.
    static func measure(runs: Int, warmup: Int = 1, _ body: () -> Void) -> [Double] {
        for _ in 0..<warmup { body() }
        return (0..<runs).map { _ in time(body) }
    }

    /// The median: robust against the odd run disturbed by another process on a shared machine.
    static func median(_ values: [Double]) -> Double {
        precondition(!values.isEmpty)
        let sorted = values.sorted()
        let mid = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
    }

    /// Keeps a value alive so the optimizer cannot drop the work that produced it.
    @inline(never) static func consume<T>(_ value: T) { withExtendedLifetime(value) {} }
}
