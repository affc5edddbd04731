// Helpers shared by every snapsync-bench subcommand: a seeded PRNG, timing, medians, and one
// JSON object per line on stdout (so results can be piped into jq or appended to a log).

#if canImport(Glibc)
import SnapSyncTestSupport
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

    /// Prints one JSON object on one line, fields in the given order.
    static func printJSON(_ fields: KeyValuePairs<String, JSONValue>) {
        printJSON(fields.map { ($0.key, $0.value) })
    }

    static func printJSON(_ fields: [(String, JSONValue)]) {
        let body = fields.map { "\"\($0.0)\": \($0.1.json)" }.joined(separator: ", ")
        print("{\(body)}")
    }

    /// Keeps a value alive so the optimizer cannot drop the work that produced it.
    @inline(never) static func consume<T>(_ value: T) { withExtendedLifetime(value) {} }
}

/// A JSON scalar for `Bench.printJSON`.
enum JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral {
    case string(String)
    case int(Int)
    case double(Double, digits: Int)

    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .int(value) }
    init(floatLiteral value: Double) { self = .double(value, digits: 3) }

    static func number(_ value: Double, digits: Int = 3) -> JSONValue { .double(value, digits: digits) }

    var json: String {
        switch self {
        case .int(let n): return String(n)
        case .double(let x, let digits):
            guard x.isFinite else { return "null" }
            // Fixed decimals without Foundation: scale, round, split.
            var scale = 1.0
            for _ in 0..<digits { scale *= 10 }
            let scaled = (abs(x) * scale).rounded()
            let whole = Int(scaled / scale)
            var fraction = String(Int(scaled) - whole * Int(scale))
            while fraction.count < digits { fraction = "0" + fraction }
            return (x < 0 ? "-" : "") + String(whole) + (digits > 0 ? "." + fraction : "")
        case .string(let s):
            var out = "\""
            for scalar in s.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case "\n": out += "\\n"
                case _ where scalar.value < 0x20: out += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
    }
}
