import Testing
import SnapSyncModel
import SnapSyncWire
import SnapSyncTestSupport

// The room limits on the real daemon where PROTOCOL.md §5 and §12 meet: a REPLACE's DIFF applies
// op by op under the room's limits, and a room over limits lowered since it was written keeps
// the daemon from starting.

extension ServerIntegration {
    @Suite struct Limits {
        /// The issue's limits; random REPLACEs of a room kept at or near them. Each DIFF is
        /// applied op by op under the announced limits, as a replica does, and must reach the
        /// room's state.
        @Test func everyReplaceDiffAppliesOpByOpUnderTheRoomLimits() throws {
            let daemon = try DaemonProcess.start(arguments: [
                "--max-sections-per-room", "6", "--max-items-per-room", "40", "--max-snapshot-bytes", "600",
            ])
            defer { daemon.stop() }
            let limits = SnapSyncModel.SnapshotLimits(maxItems: 40, maxSections: 6, maxSnapshotBytes: 600)
            let client = try RawClient.ready(daemon)
            var replica = try client.state(of: "r").snapshot
            var rng = SplitMix64(seed: 12)
            for round in 0..<80 {
                // Six sections (the limit) of items drawn from a shared universe, so that REPLACE
                // drops and adds sections whose items move between them.
                let sectionIDs = (0..<9).map { "s\($0)" }.shuffled(using: &rng).prefix(6)
                var contents: [(section: SnapshotElement, items: [SnapshotElement])] = sectionIDs.map { (.named($0), []) }
                for id in (0..<60).map({ "i\($0)" }).shuffled(using: &rng).prefix(Int.random(in: 20...40, using: &rng)) {
                    contents[Int.random(in: 0..<contents.count, using: &rng)].items.append(
                        .named(id, String(repeating: "p", count: Int.random(in: 0...3, using: &rng))))
                }
                guard let target = try? RoomSnapshot(contents, limits: limits) else { continue }
                let (answer, frames) = try client.request {
                    .replace(requestID: $0, room: "r", expectedVersion: nil, writeID: [], snapshot: target)
                }
                guard case .ack = answer else { Issue.record("round \(round): \(summary(answer))"); return }
                for case .diff(_, _, _, let ops, _) in frames {
                    for (k, op) in ops.enumerated() {
                        do { try replica.apply(op, limits: limits) } catch {
                            Issue.record("round \(round): op \(k) of the DIFF refused under the room limits: \(error)")
                            return
                        }
                    }
                }
                #expect(replica == target, "round \(round)")
            }
        }

        /// A room written under higher limits: a restart with a lower one refuses to start,
        /// naming the room, what it holds and the flag to raise; at the old limit it starts.
        @Test func aRoomOverALoweredLimitKeepsTheDaemonFromStarting() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start()
            let client = try RawClient.ready(daemon)
            try client.mustMutate("big", [.appendSections([.named("s")]), .appendItems((0..<5).map { .named("i\($0)") }, toSection: "s")])
            daemon.stop()
            for (flag, value, expected) in [
                ("--max-items-per-room", "4", "holds 5 items, over --max-items-per-room 4"),
                ("--max-identifier-bytes", "1", "holds the identifier i0 of 2 bytes, over --max-identifier-bytes 1"),
            ] {
                let (status, output) = try DaemonProcess.run(arguments: [
                    "--host", "127.0.0.1", "--port", "0", "--data-dir", dir.data,
                    flag, value,
                ])
                #expect(status != 0, "\(flag) \(value): \(output)")
                #expect(output.contains("room big " + expected), "\(output)")
                #expect(output.contains("start with \(flag) "), "\(output)")
            }
            let again = try dir.start(["--max-items-per-room", "5"])
            defer { again.stop() }
            #expect(try RawClient.ready(again).state(of: "big").snapshot.numberOfItems == 5)
        }
    }
}
