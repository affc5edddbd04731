// snapsync-bench: the benchmarks behind docs/benchmarks.md. Each subcommand prints one JSON
// object per case per line.
import ArgumentParser

struct SnapSyncBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapsync-bench",
        abstract: "SnapSync benchmarks: one JSON object per case per line on stdout.",
        discussion: "Build with -c release; debug builds are 10–50× slower and say nothing.",
        subcommands: benchmarks
    )

    /// To add a benchmark, write `struct YourBenchmark: ParsableCommand` in its own file
    /// (shared helpers are in BenchSupport.swift) and list it here.
    static var benchmarks: [any ParsableCommand.Type] {
        var list: [any ParsableCommand.Type] = [
            DiffBenchmark.self,
            ApplyBenchmark.self,
            CodecBenchmark.self,
            CatchUpBenchmark.self,
        ]
        // The fan-out benchmark drives sockets through Glibc (epoll); it exists on Linux only.
        #if canImport(Glibc)
            list += [
                FanoutCommand.self, FanoutMemoryCommand.self, DurabilityBenchmark.self, RecoveryBenchmark.self, ChurnBenchmark.self,
                ClientBenchmark.self, ClusterCommand.self, ResumeBenchmark.self, PresenceBenchmark.self, WindowsBenchmark.self,
            ]
        #endif
        return list
    }
}

SnapSyncBench.main()
