// What a resume costs everybody else on the daemon's loop: another client's round trips while
// the daemon answers it. Each probe is a LEAVE of a room the prober never joined (REJECT
// not_joined: nothing but the loop, no disk, no room), sent when the last was answered; the
// longest round trip is how long the resume held the loop up for every other connection.
#if canImport(Glibc)
    import Dispatch
    import Foundation
    import Glibc
    import Synchronization
    import SnapSyncWire

    final class LoopProbe: @unchecked Sendable {
        private let stopping = Atomic<Bool>(false)
        private let finished = DispatchSemaphore(value: 0)
        private let started = DispatchSemaphore(value: 0)
        /// Written by the probe's thread only, read after `stop()`.
        private var longestNs: UInt64 = 0
        private var count = 0

        /// Connects (HELLO) and starts probing on a thread of its own; returns once the first
        /// probe was answered.
        init(host: String, port: Int) {
            let thread = Thread { [self] in
                var client = ResumeClient(host: host, port: port, version: 3)
                defer { client.close() }
                let probe = BenchFrames.encoder.encode(.leave(requestID: 7, room: "loop-probe"))
                var first = true
                while !stopping.load(ordering: .relaxed) {
                    let began = BenchSystem.nowNs()
                    BenchSystem.writeAll(client.fd, probe)
                    _ = client.reader.expect(.reject, context: "the loop probe's LEAVE")
                    let took = BenchSystem.nowNs() - began
                    if first {
                        first = false
                        started.signal()
                    } else {
                        longestNs = max(longestNs, took)
                        count += 1
                    }
                }
                finished.signal()
            }
            thread.start()
            started.wait()
        }

        /// Stops probing: the longest round trip in milliseconds, and how many were timed.
        func stop() -> (longestMs: Double, probes: Int) {
            stopping.store(true, ordering: .relaxed)
            finished.wait()
            return (Double(longestNs) / 1e6, count)
        }
    }
#endif
