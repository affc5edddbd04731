// `snapsync-bench codec`: throughput of the wire codec on DIFF frames, the frame the daemon
// writes most (one per applied batch, shared by every member of the room) and the client reads
// most.
// It uses only SnapSyncModel and SnapSyncWire, so it measures the codec and nothing else.

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
            let encodeTimes = Bench.measure(runs: runs, encodeAll)
            let bytes = stream.count

            var decodeFailure: WireError?
            func decodeAll() {
                var decoder = FrameDecoder(accepting: .server)
                decoder.append(stream)
                var decoded = 0
                do {
                    while let message = try decoder.nextMessage() {
                        decoded += 1
                        Bench.consume(message)
                    }
                } catch {
                    decodeFailure = error
                }
                precondition(decoded == count || decodeFailure != nil)
            }
            let decodeTimes = Bench.measure(runs: runs, decodeAll)
            if let decodeFailure { throw ValidationError("decoding failed: \(decodeFailure)") }

            for (name, times) in [("encode", encodeTimes), ("decode", decodeTimes)] {
                let seconds = Bench.median(times) / 1e9
                Bench.printJSON([
                    "case": .string("\(name)-diff-\(opsPerFrame)op"), "ops_per_frame": .int(opsPerFrame),
                    "frame_bytes": .number(Double(bytes) / Double(count), digits: 1),
                    "frames_per_s": .number(Double(count) / seconds, digits: 0),
                    "mb_per_s": .number(Double(bytes) / seconds / 1e6, digits: 1),
                ])
            }
        }
    }

    // MARK: Cases

    /// 12-byte identifiers drawn from a pool, so batches name the same items repeatedly as real
    /// rooms do; payloads are 32 bytes.
    static func identifier(_ rng: inout SplitMix64) -> SnapshotIdentifier {
        let n = rng.next() % 100_000
        return SnapshotIdentifier(Array("item-".utf8) + (0..<7).map { UInt8(truncatingIfNeeded: 0x30 + (n >> (4 * UInt64($0))) & 0xF) })
    }

    static func element(_ rng: inout SplitMix64) -> SnapshotElement {
        let fill = UInt8(truncatingIfNeeded: rng.next())
        return SnapshotElement(identifier(&rng), payload: SnapshotPayload([UInt8](repeating: fill, count: 32)))
    }

    static func operation(_ rng: inout SplitMix64) -> SnapshotOperation {
        switch rng.next() % 5 {
        case 0: return .appendItems([element(&rng)], toSection: SnapshotIdentifier("section-1"))
        case 1: return .insertItems([element(&rng)], .after(identifier(&rng)))
        case 2: return .updateItems([element(&rng)], .reconfigure)
        case 3: return .moveItem(identifier(&rng), .before(identifier(&rng)))
        default: return .deleteItems([identifier(&rng)])
        }
    }
}
