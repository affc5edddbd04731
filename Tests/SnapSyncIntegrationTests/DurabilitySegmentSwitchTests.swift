import Foundation
import Testing
import SnapSyncModel
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

extension DaemonDurability {
    /// Segment switches on the background thread, with tiny segments so that one
    /// happens at every one-second maintenance: every acknowledged write survives kill -9 across
    /// them, and the segments that checkpoints cover are deleted.
    @Suite struct DurabilitySegmentSwitchTests {
        @Test(arguments: ["always", "no"])
        func acknowledgedWritesSurviveKillAcrossSwitches(fsync: String) throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let arguments = ["--fsync", fsync, "--log-segment-bytes", "4096", "--log-level", "debug"]
            let daemon = try dir.start(arguments)
            let client = try RawClient.ready(daemon)
            try client.mustMutate("switch", [.appendSections([SnapshotElement("s")])])
            var acked = 0
            let payload = SnapshotPayload(Array(repeating: UInt8(ascii: "p"), count: 200))
            // Write until the log has moved to a new segment several times.
            let switched = try waitUntil(timeout: 60) {
                for _ in 0..<20 {
                    try client.mustMutate("switch", [.appendItems([SnapshotElement(SnapshotIdentifier("i\(acked)"), payload: payload)], toSection: "s")])
                    acked += 1
                }
                return daemon.log.components(separatedBy: "started log segment").count > 4
            }
            #expect(switched, "segment switches: \(daemon.log.components(separatedBy: "started log segment").count - 1)")
            #expect(daemon.waitForLog("deleted"), "old segments are deleted while writing")
            #expect(dir.segments.count <= 4, "\(dir.segments)")
            daemon.kill()

            let restarted = try dir.start(arguments)
            defer { restarted.stop() }
            let reader = try RawClient.ready(restarted)
            let state = try reader.state(of: "switch")
            let items = itemNames(state.snapshot)
            #expect(items.count == acked, "\(items.count) items after the restart, \(acked) acknowledged")
            #expect(items == (0..<acked).map { "i\($0)" })
            // The segments from before the restart are checkpointed away.
            #expect(waitUntil(timeout: 30) { dir.segments.count <= 2 }, "\(dir.segments)")
        }
    }
}
