// `snapsync-bench resume`: a replica that was away for M versions resumes against the real
// daemon, three ways: folded (one DIFF, PROTOCOL.md §11.12), replayed (the daemon started with
// --no-fold-resumes: one DIFF per missed version) and a fresh SNAPSHOT. The room and the writes
// are `catchup`'s (CatchUpLoad); the bytes are what the daemon sent in answer to the JOIN, the
// time is from the JOIN's send to the answer's last byte, on loopback (the daemon's work and the
// transfer; the client's apply is `catchup`'s folded_apply_ms and replay_apply_ms).
#if canImport(Glibc)
    import Glibc
    import ArgumentParser
    import SnapSyncModel
    import SnapSyncTestSupport
    import SnapSyncWire

    struct ResumeBenchmark: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "resume",
            abstract: "Bytes and time of a resume against snapsyncd: folded, replayed, or a SNAPSHOT.",
            discussion: """
                For each M of --missed and each mode, a fresh daemon (--history-count and \
                --history-bytes large enough to hold every version: the resume window) gets the \
                room of --sections × --items-per-section items, a version 3 reader joins it and \
                keeps its position and chain, disconnects, M writes land (catchup's mix), and the \
                reader resumes. One JSON line per case: answer bytes (CATCHUP and its DIFFs, or \
                the SNAPSHOT for mode snapshot, a fresh JOIN), the time from the JOIN to the \
                answer's last byte of the first resume (first_ms: the daemon computes the fold) and \
                the median of the --runs − 1 after it from the same position (again_ms: a crowd \
                resuming from one place shares the room's last fold), each on a fresh connection, \
                the longest round trip another client's requests took on the daemon's loop during \
                the first (others_max_ms, LoopProbe: how long the resume held everybody else up), \
                and whether the resumed state is the room's (its digest).
                """)

        @OptionGroup var load: CatchUpLoadOptions

        @Option(help: "Timed resumes per case (the first and the median of the others are reported).")
        var runs: Int = 3

        @Option(help: "The daemon's --history-count (the resume window); default: every version of the run.")
        var window: Int?

        @Option(help: "Writes (the same mix) before the reader joins, so that the window's oldest versions are writes.")
        var preceding: Int = 0

        @OptionGroup var server: ServerBinaryOption

        func validate() throws {
            guard load.sections >= 1, load.itemsPerSection >= 1 else { throw ValidationError("--sections and --items-per-section must be positive") }
            guard load.missed.allSatisfy({ $0 >= 2 }) else { throw ValidationError("--missed values must be at least 2") }
            guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        }

        func run() throws {
            let binary = ServerBinaries.daemon(explicit: server.serverBinary)
            let layout = CatchUpLoad.layout(sections: load.sections, itemsPerSection: load.itemsPerSection)
            let start = try CatchUpLoad.room(sections: load.sections, itemsPerSection: load.itemsPerSection)
            for count in load.missed {
                for mode in ["folded", "replayed", "snapshot"] {
                    let history = self.window ?? (preceding + count + load.sections + 16)
                    let window = ["--history-count", String(history), "--history-bytes", "1GiB", "--fsync", "no"]
                    let daemon = ServerProcess.startDaemon(
                        binary: binary, arguments: window + (mode == "replayed" ? ["--no-fold-resumes"] : []), cpu: nil)
                    defer { daemon.stop() }
                    var writer = ResumeClient(host: daemon.host, port: daemon.port, version: ProtocolVersion.unchained)
                    writer.pipeline(
                        layout.enumerated().map { index, section in
                            BenchFrames.mutate(
                                requestID: UInt64(index + 1), room: Self.room,
                                ops: [.appendSections([SnapshotElement(section.0)]), .appendItems(section.1, toSection: section.0)])
                        }, window: 8)
                    var writes = CatchUpLoad(room: start, seed: load.seed ^ UInt64(count))
                    if preceding > 0 {
                        writer.pipeline(
                            (1...preceding).map { BenchFrames.mutate(requestID: UInt64($0), room: Self.room, ops: writes.nextWrite(version: $0)) },
                            window: 64)
                    }
                    var reader = ResumeClient(host: daemon.host, port: daemon.port, version: 3)
                    let held = reader.joinFresh()
                    reader.close()
                    writer.pipeline(
                        (preceding + 1...preceding + count).map {
                            BenchFrames.mutate(requestID: UInt64($0), room: Self.room, ops: writes.nextWrite(version: $0))
                        }, window: 64)
                    var truth = ResumeClient(host: daemon.host, port: daemon.port, version: 3)
                    let now = truth.joinFresh()
                    truth.close()
                    var bytes = 0, kind = "", holds = true
                    var times: [Double] = []
                    var stall = (longestMs: Double.nan, probes: 0)
                    for run in 0..<runs {
                        var client = ResumeClient(host: daemon.host, port: daemon.port, version: 3)
                        // The first resume computes the fold: another client probes the loop meanwhile.
                        let probe = run == 0 ? LoopProbe(host: daemon.host, port: daemon.port) : nil
                        let began = BenchSystem.nowNs()
                        let answer = mode == "snapshot" ? client.answerToFreshJoin() : client.answerToResume(from: held)
                        times.append(Double(BenchSystem.nowNs() - began) / 1e6)
                        if let probe { stall = probe.stop() }
                        client.close()
                        bytes = answer.frames.reduce(0) { $0 + $1.count }
                        kind = answer.kind
                        holds = holds && answer.state(from: held.snapshot)?.digest == now.snapshot.digest
                    }
                    Bench.printJSON([
                        "benchmark": "resume", "mode": .string(mode), "answer": .string(kind), "missed_versions": .int(count),
                        "window": .int(history), "preceding": .int(preceding),
                        "items_after": .int(now.snapshot.numberOfItems), "answer_bytes": .int(bytes),
                        "over_snapshot": .decimal(Double(bytes) / Double(now.snapshotFrameBytes), digits: 3),
                        "first_ms": .decimal(times[0], digits: 1),
                        "again_ms": times.count > 1 ? .decimal(Bench.median(Array(times.dropFirst())), digits: 1) : .number(.nan),
                        "others_max_ms": .decimal(stall.longestMs, digits: 1), "others_probes": .int(stall.probes),
                        "state_right": .string(holds ? "yes" : "no"), "runs": .int(runs),
                    ])
                }
            }
        }

        static let room = "resume"
    }

    /// One blocking connection of `resume`, speaking `version`.
    struct ResumeClient {
        let fd: Int32
        var reader: BenchFrameReader
        let version: UInt64

        struct Held {
            var epoch: UInt64
            var version: UInt64
            var chain: RoomChain
            var snapshot: RoomSnapshot
            var snapshotFrameBytes: Int
        }

        struct Answer {
            var kind: String
            var frames: [[UInt8]]
            var version: UInt64

            /// The state the answer leaves a replica holding `held` in; nil if it does not apply.
            func state(from held: RoomSnapshot) -> RoomSnapshot? {
                var state = held
                for frame in frames {
                    switch try? FrameDecoder.decode(frame: frame, limits: BenchFrameReader.limits, accepting: .server, version: version) {
                    case .snapshot(_, _, _, _, _, _, let snapshot, _)?: state = snapshot
                    case .diff(_, _, _, let ops, _)?: guard (try? state.apply(ops, limits: .unlimited)) != nil else { return nil }
                    case .catchup?: continue
                    default: return nil
                    }
                }
                return state
            }
        }

        init(host: String, port: Int, version: UInt64) {
            fd = BenchSystem.connectTCP(host: host, port: port)
            reader = BenchFrameReader(fd: fd)
            self.version = version
            BenchSystem.writeAll(fd, BenchFrames.hello(clientName: "resume-bench", version: version))
            reader.expect(.welcome, context: "HELLO")
        }

        func close() { _ = Glibc.close(fd) }

        mutating func pipeline(_ frames: [[UInt8]], window: Int) { reader.pipeline(frames, window: window) }

        /// A fresh JOIN: the room's state, position and chain.
        mutating func joinFresh() -> Held {
            let answer = answerToFreshJoin()
            guard
                case .snapshot(_, _, let epoch, let version, _, _, let snapshot, let chain)? = try? FrameDecoder.decode(
                    frame: answer.frames[0], limits: BenchFrameReader.limits, accepting: .server, version: self.version)
            else { BenchSystem.die("JOIN was not answered with a SNAPSHOT") }
            return Held(epoch: epoch, version: version, chain: chain ?? .unknown, snapshot: snapshot, snapshotFrameBytes: answer.frames[0].count)
        }

        mutating func answerToFreshJoin() -> Answer {
            BenchSystem.writeAll(fd, BenchFrames.encoder.encode(.join(requestID: 1, room: ResumeBenchmark.room, resume: nil)))
            return Answer(kind: "snapshot", frames: [reader.expect(.snapshot, context: "JOIN")], version: version)
        }

        /// JOIN resuming from `held`: the CATCHUP and every DIFF it announces.
        mutating func answerToResume(from held: Held) -> Answer {
            BenchSystem.writeAll(
                fd,
                BenchFrames.encoder.encode(
                    .join(requestID: 2, room: ResumeBenchmark.room, resume: RoomPosition(epoch: held.epoch, version: held.version), chain: held.chain)))
            let first = reader.nextFrame(context: "JOIN resume")
            switch try? FrameDecoder.decode(frame: first, limits: BenchFrameReader.limits, accepting: .server, version: version) {
            case .catchup(_, _, _, let from, let to, let form)?:
                let folded: Bool
                if case .folded? = form { folded = true } else { folded = false }
                var frames = [first]
                for _ in 0..<(folded ? 1 : to - from) { frames.append(reader.expect(.diff, context: "CATCHUP's DIFFs")) }
                return Answer(kind: folded ? "folded" : "replayed", frames: frames, version: version)
            case .snapshot?:
                return Answer(kind: "snapshot", frames: [first], version: version)
            default:
                BenchSystem.die("JOIN resume was answered with type \(first[4])")
            }
        }
    }
#endif
