// `snapsync-bench codec`: throughput of the wire codec on DIFF frames, the frame the daemon
// writes most (one per applied batch, shared by every member of the room) and the client reads
// most.
//
// Self-contained on purpose (its own timing helper): it depends only on SnapSyncModel and
// SnapSyncWire, so it measures the codec and nothing else.

import SnapSyncTestSupport
import ArgumentParser
import SnapSyncModel
import SnapSyncWire

struct CodecBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "codec",
        abstract: "Encode and decode throughput of DIFF frames (1-op and 100-op batches).",
        discussion: """
            Each case works on --frames distinct DIFF frames (room "bench-room", a 64-bit epoch, \
            consecutive versions) whose ops mix append_items, insert_items, update_items, \
            move_item and delete_items over 12-byte identifiers and 32-byte payloads. encode-* \
            appends every frame to one reused buffer with FrameEncoder.encodeDiff (the daemon's \
            path); decode-* feeds the whole stream to one FrameDecoder and pulls every Message \
            out (the client's path). Each case is timed --runs times after a warm-up; the median \
            run is reported. MB is 10^6 bytes of frames, length prefixes included.
            """)

    @Option(help: "Distinct frames per run.")
    var frames: Int = 100_000

    @Option(help: "Timed runs per case (the median is reported).")
    var runs: Int = 15

    @Option(help: "Seed for the generated batches.")
    var seed: UInt64 = 0xC0DEC

    func run() throws {
        for opsPerFrame in [1, 100] {
            // Fewer 100-op frames, so that both cases move a similar number of bytes.
            let count = opsPerFrame == 1 ? frames : max(1, frames / 50)
            var rng = SplitMix64(seed: seed &+ UInt64(opsPerFrame))
            let batches = (0..<count).map { _ in (0..<opsPerFrame).map { _ in Self.operation(&rng) } }
            let epoch: UInt64 = 0x1F2E_3D4C_5B6A_7988
            let encoder = FrameEncoder()

            var stream: [UInt8] = []
            func encodeAll() {
                stream.removeAll(keepingCapacity: true)
                for (index, ops) in batches.enumerated() {
                    encoder.encodeDiff(room: "bench-room", epoch: epoch, version: UInt64(index + 1), ops: ops, into: &stream)
                }
            }
            let encodeTimes = Self.measure(runs: runs, encodeAll)
            let bytes = stream.count

            var decodeFailure: WireError?
            func decodeAll() {
                var decoder = FrameDecoder(accepting: .server)
                decoder.append(stream)
                var decoded = 0
                do {
                    while let message = try decoder.nextMessage() {
                        decoded += 1
                        Self.consume(message)
                    }
                } catch {
                    decodeFailure = error
                }
                precondition(decoded == count || decodeFailure != nil)
            }
            let decodeTimes = Self.measure(runs: runs, decodeAll)
            if let decodeFailure { throw ValidationError("decoding failed: \(decodeFailure)") }

            for (name, times) in [("encode", encodeTimes), ("decode", decodeTimes)] {
                let seconds = Self.median(times)
                Self.printLine(case: "\(name)-diff-\(opsPerFrame)op", opsPerFrame: opsPerFrame,
                               frameBytes: Double(bytes) / Double(count),
                               framesPerSecond: Double(count) / seconds,
                               megabytesPerSecond: Double(bytes) / seconds / 1e6)
            }
        }
    }

    // MARK: Cases

    /// 12-byte identifiers drawn from a pool, so batches name the same items repeatedly as real
    /// rooms do; payloads are 32 bytes.
    static func identifier(_ rng: inout SplitMix64) -> Identifier {
        let n = rng.next() % 100_000
        return Identifier(Array("item-".utf8) + (0..<7).map { UInt8(truncatingIfNeeded: 0x30 + (n >> (4 * UInt64($0))) & 0xF) })
    }

    static func element(_ rng: inout SplitMix64) -> Element {
        let fill = UInt8(truncatingIfNeeded: rng.next())
        return Element(identifier(&rng), payload: Payload([UInt8](repeating: fill, count: 32)))
    }

    static func operation(_ rng: inout SplitMix64) -> SnapshotOperation {
        switch rng.next() % 5 {
        case 0: return .appendItems([element(&rng)], toSection: Identifier("section-1"))
        case 1: return .insertItems([element(&rng)], .after(identifier(&rng)))
        case 2: return .updateItems([element(&rng)], .reconfigure)
        case 3: return .moveItem(identifier(&rng), .before(identifier(&rng)))
        default: return .deleteItems([identifier(&rng)])
        }
    }

    // MARK: Measurement

    /// Runs `body` once untimed (page faults, buffer growth), then `runs` times timed; seconds.
    static func measure(runs: Int, _ body: () -> Void) -> [Double] {
        body()
        let clock = ContinuousClock()
        return (0..<runs).map { _ in
            let start = clock.now
            body()
            let (seconds, attoseconds) = (clock.now - start).components
            return Double(seconds) + Double(attoseconds) / 1e18
        }
    }

    /// The median, robust against the odd run disturbed by other work on a shared machine.
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        let mid = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
    }

    /// Keeps a value alive so the optimizer cannot drop the work that produced it.
    @inline(never) static func consume<T>(_ value: T) { withExtendedLifetime(value) {} }

    static func printLine(case name: String, opsPerFrame: Int, frameBytes: Double, framesPerSecond: Double, megabytesPerSecond: Double) {
        print("{\"case\": \"\(name)\", \"ops_per_frame\": \(opsPerFrame), \"frame_bytes\": \(fixed(frameBytes, 1)), "
              + "\"frames_per_s\": \(fixed(framesPerSecond, 0)), \"mb_per_s\": \(fixed(megabytesPerSecond, 1))}")
    }

    /// Fixed decimals without Foundation.
    static func fixed(_ x: Double, _ digits: Int) -> String {
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = Int((x * scale).rounded())
        guard digits > 0 else { return String(scaled) }
        var fraction = String(scaled % Int(scale))
        while fraction.count < digits { fraction = "0" + fraction }
        return "\(scaled / Int(scale)).\(fraction)"
    }
}

