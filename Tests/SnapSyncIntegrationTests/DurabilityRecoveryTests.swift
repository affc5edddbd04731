import Foundation
import Testing
import SnapSyncModel
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

extension DaemonDurability {
    /// The real binary against damaged logs: a truncated tail is cut off (and logged), damage in
    /// the middle stops the start with a clear message and a non-zero exit.
    @Suite struct DurabilityRecoveryTests {
        /// Writes `count` items to room "r" (one write each), then stops the daemon cleanly.
        /// Returns the segment holding them.
        func prepare(_ dir: DurableDirectory, count: Int) throws -> String {
            let daemon = try dir.start()
            let client = try RawClient.ready(daemon)
            try client.mustMutate("r", [.appendSections([SnapshotElement("s")])])
            for n in 0..<count - 1 {
                try client.mustMutate("r", [.appendItems([SnapshotElement(SnapshotIdentifier("item-\(n)"), payload: "p")], toSection: "s")])
            }
            #expect(daemon.stop() == 0)
            let withRecords = dir.segments.filter { segmentRecords(readBytes($0)).starts.count > 0 }
            #expect(withRecords.count == 1)
            return withRecords.last ?? ""
        }

        /// Cut the log at every byte of its last record in turn (and at the record before):
        /// the daemon starts with exactly the whole records before the cut.
        @Test func truncatedLogStartsWithExactlyTheGoodRecords() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let segment = try prepare(dir, count: 6)
            let original = readBytes(segment)
            let (starts, end) = segmentRecords(original)
            #expect(starts.count == 6 && end == original.count)
            let copy = dir.path + "/cut"
            let name = (segment as NSString).lastPathComponent
            let cuts = [starts[4]] + Array(starts[5]...end)
            for cut in cuts {
                dir.copy(to: copy)
                try writeBytes(copy + "/" + name, Array(original[0..<cut]))
                let daemon = try DaemonProcess.start(arguments: ["--data-dir", copy])
                defer { daemon.kill() }
                let whole = cut == end ? 6 : (cut >= starts[5] ? 5 : 4)
                let client = try RawClient.ready(daemon)
                let state = try client.state(of: "r")
                #expect(state.version == UInt64(whole), "cut at \(cut)")
                #expect(itemNames(state.snapshot) == (0..<whole - 1).map { "item-\($0)" }, "cut at \(cut)")
                let boundary = cut == end ? end : (cut >= starts[5] ? starts[5] : starts[4])
                if cut > boundary && original[boundary..<cut].contains(where: { $0 != 0 }) {
                    #expect(daemon.log.contains("cut off a torn tail of \(cut - boundary) bytes at byte \(boundary)"), "cut at \(cut):\n\(daemon.log)")
                }
                #expect(readBytes(copy + "/" + name).count == boundary, "the torn bytes are gone from the file")
            }
        }

        /// A flipped bit in the middle of the log: the daemon refuses to start, exits non-zero
        /// and says where and why; the file is left as it was.
        @Test func flippedBitInTheMiddleRefusesToStart() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let segment = try prepare(dir, count: 20)
            var bytes = readBytes(segment)
            let (starts, _) = segmentRecords(bytes)
            let victim = starts[10]
            bytes[victim + 20] ^= 0x08
            try writeBytes(segment, bytes)
            let (status, output) = try dir.runToExit()
            #expect(status != 0)
            #expect(output.contains((segment as NSString).lastPathComponent), "\(output)")
            #expect(output.contains("damaged at byte \(victim)"), "\(output)")
            #expect(output.contains("will not start"), "\(output)")
            #expect(readBytes(segment) == bytes)
        }

        /// A damaged last record: the start is refused with status 3 (which the systemd unit
        /// does not restart on) and names `snapsyncd repair`; the repair saves the record aside
        /// and truncates before it; then the daemon starts with every write before it.
        @Test func aDamagedLastRecordIsRefusedUntilRepaired() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let segment = try prepare(dir, count: 8)
            var bytes = readBytes(segment)
            let (starts, _) = segmentRecords(bytes)
            let victim = starts[starts.count - 1]
            bytes[victim + 20] ^= 0x08
            try writeBytes(segment, bytes)
            let (status, output) = try dir.runToExit()
            #expect(status == 3)
            #expect(output.contains("snapsyncd repair \(dir.data)"), "\(output)")
            #expect(readBytes(segment) == bytes)

            let (repaired, log) = try DaemonProcess.run(arguments: ["repair", dir.data])
            #expect(repaired == 0, "\(log)")
            #expect(log.contains("this write is lost"), "\(log)")
            #expect(FileManager.default.fileExists(atPath: dir.data + "/damaged-\((segment as NSString).lastPathComponent)-at-\(victim)"))

            let daemon = try dir.start()
            defer { _ = daemon.stop() }
            let client = try RawClient.ready(daemon)
            guard case .snapshot(_, _, _, let version, _, _, let snapshot, _) = try client.join("r") else {
                Issue.record("no SNAPSHOT")
                return
            }
            // 8 writes: the section, then 7 items; the last item's write is the one lost.
            #expect(version == 7)
            #expect(snapshot.numberOfItems == 6)
        }

        /// A repair of a directory damaged in the middle of its log changes nothing and exits 3.
        @Test func aRepairLeavesDamageItCannotMend() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let segment = try prepare(dir, count: 10)
            var bytes = readBytes(segment)
            let (starts, _) = segmentRecords(bytes)
            bytes[starts[4] + 20] ^= 0x08
            try writeBytes(segment, bytes)
            let (status, log) = try DaemonProcess.run(arguments: ["repair", dir.data])
            #expect(status == 3)
            #expect(log.contains("good record follows"), "\(log)")
            #expect(readBytes(segment) == bytes)
        }

        /// Clients resume after a restart: a JOIN with the position held before gets CATCHUP
        /// with the missed DIFFs (not a resync), in the same epoch; a retried write_id is still
        /// recognised. Both after a clean stop and after kill -9.
        @Test(arguments: [false, true])
        func clientsResumeAfterRestart(kill: Bool) throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start()
            let client = try RawClient.ready(daemon)
            try client.mustMutate("resume", [.appendSections([SnapshotElement("s")])])
            try client.mustMutate("resume", [.appendItems(["a", "b"], toSection: "s")])
            let held = try client.state(of: "resume")
            #expect(held.version == 2)
            let v3 = try client.mustMutate("resume", [.appendItems(["c"], toSection: "s")], writeID: Array("once".utf8))
            try client.mustMutate("resume", [.moveItem("c", .before("a"))])
            if kill { daemon.kill() } else { #expect(daemon.stop() == 0) }

            let restarted = try dir.start()
            defer { restarted.stop() }
            let again = try RawClient.ready(restarted)
            let answer = try again.join("resume", resume: RoomPosition(epoch: held.epoch, version: held.version))
            guard case .catchup(_, _, let epoch, let from, let to, _) = answer else {
                Issue.record("expected CATCHUP after restart, got \(answer)")
                return
            }
            #expect(epoch == held.epoch && from == 2 && to == 4)
            var replica = held.snapshot
            for version in 3...4 as ClosedRange<UInt64> {
                let diff = try again.receive()
                guard case .diff(_, let e, let v, let ops, _) = diff else {
                    Issue.record("expected DIFF, got \(diff)")
                    return
                }
                #expect(e == held.epoch && v == version)
                try replica.apply(ops)
            }
            #expect(itemNames(replica) == ["c", "a", "b"])
            // The retried write is answered with its original version, not applied again.
            let (retry, _) = try again.mutate("resume", [.appendItems(["c"], toSection: "s")], writeID: Array("once".utf8))
            guard case .ack(_, _, let version) = retry else {
                Issue.record("expected ACK for a retried write_id, got \(retry)")
                return
            }
            #expect(version == v3)
            // Another write reusing the id is told apart from the retry: the log (after kill -9) or
            // the checkpoint (after a clean stop) kept the original's fingerprint.
            let (reused, _) = try again.mutate("resume", [.appendItems(["d"], toSection: "s")], writeID: Array("once".utf8))
            guard case .reject(_, let code, _, _, let text) = reused else {
                Issue.record("expected REJECT write_id_conflict for a reused write_id, got \(reused)")
                return
            }
            #expect(code == ErrorCode.writeIDConflict.rawValue, "\(text)")
            let other = try RawClient.ready(restarted)
            #expect(try other.state(of: "resume").version == 4)
        }

        /// With frequent checkpoints, old segments are deleted; a restart then rebuilds rooms
        /// from checkpoints (and history from them), and resume still gets CATCHUP.
        @Test func checkpointsTruncateTheLogAndRestartStillResumes() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start(["--checkpoint-interval", "200ms"])
            let client = try RawClient.ready(daemon)
            try client.mustMutate("ckpt", [.appendSections([SnapshotElement("s")])])
            for n in 0..<30 {
                try client.mustMutate("ckpt", [.appendItems([SnapshotElement(SnapshotIdentifier("i\(n)"))], toSection: "s")])
            }
            let held = try client.state(of: "ckpt")
            let firstSegments = dir.segments
            // The one-second maintenance timer checkpoints the room and drops the old segment.
            #expect(
                waitUntil(timeout: 60) {
                    let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.data)) ?? []
                    return names.contains { $0.hasPrefix("ckpt-") } && !dir.segments.contains(firstSegments[0])
                }, "a checkpoint was written and the old segment deleted: \(dir.segments)")
            try client.mustMutate("ckpt", [.deleteItems(["i0"])])
            daemon.kill()

            let restarted = try dir.start()
            defer { restarted.stop() }
            let again = try RawClient.ready(restarted)
            let answer = try again.join("ckpt", resume: RoomPosition(epoch: held.epoch, version: held.version))
            guard case .catchup(_, _, let epoch, let from, let to, _) = answer else {
                Issue.record("expected CATCHUP, got \(answer)")
                return
            }
            #expect(epoch == held.epoch && from == 31 && to == 32)
            let fresh = try RawClient.ready(restarted)
            let state = try fresh.state(of: "ckpt")
            #expect(state.version == 32 && state.snapshot.numberOfItems == 29)
            // Resuming from before the checkpoint also works: history came back from it.
            let early = try RawClient.ready(restarted)
            let earlyAnswer = try early.join("ckpt", resume: RoomPosition(epoch: held.epoch, version: 10))
            guard case .catchup(_, _, _, 10, 32, _) = earlyAnswer else {
                Issue.record("expected CATCHUP 10→32, got \(earlyAnswer)")
                return
            }
        }

        @Test func fsyncFlagIsCheckedAndDocumented() throws {
            let help = try DaemonProcess.run(arguments: ["--help"])
            #expect(help.status == 0)
            for flag in ["--data-dir", "--fsync", "--checkpoint-interval", "--log-segment-bytes", "STATE_DIRECTORY"] {
                #expect(help.output.contains(flag), "\(flag) in --help")
            }
            let bad = try DaemonProcess.run(arguments: ["--fsync", "sometimes"])
            #expect(bad.status != 0)
            #expect(bad.output.contains("--fsync must be one of always, everysec, no"))
        }

        /// Two daemons on one data directory: the second refuses to start.
        @Test func aSecondDaemonOnTheSameDirectoryRefuses() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start()
            defer { daemon.stop() }
            let (status, output) = try dir.runToExit()
            #expect(status != 0)
            #expect(output.contains("in use by another snapsyncd"), "\(output)")
        }
    }
}
