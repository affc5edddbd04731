import Foundation
import Testing
import SnapSyncModel
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

extension DaemonDurability {
    /// The real binary at start-up: what a clean stop leaves to replay, a data
    /// directory whose files do not match its MANIFEST, and a disk short of space.
    @Suite struct DurabilityStartupTests {
        /// Writes 20 items of 60 KB (1.2 MB of log, above the 1 MiB shutdown threshold) and a
        /// few moves to room "big". Returns the room as the daemon serves it.
        func fill(_ daemon: DaemonProcess) throws -> RoomState {
            let client = try RawClient.ready(daemon)
            try client.mustMutate("big", [.appendSections([SnapshotElement("s")])])
            for n in 0..<20 {
                let payload = SnapshotPayload(Array(repeating: UInt8(n + 1), count: 60_000))
                try client.mustMutate("big", [.appendItems([SnapshotElement(SnapshotIdentifier("item-\(n)"), payload: payload)], toSection: "s")])
            }
            try client.mustMutate("big", [.moveItem("item-3", .before("item-0"))])
            try client.mustMutate("big", [.deleteItems(["item-7"])])
            return try client.state(of: "big")
        }

        func expectSame(_ a: RoomState, _ b: RoomState, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(a.epoch == b.epoch && a.version == b.version, sourceLocation: sourceLocation)
            #expect(a.digest == b.digest, "same content after restart", sourceLocation: sourceLocation)
        }

        /// After SIGTERM the next start replays nothing: the rooms were checkpointed at
        /// shutdown. After kill -9 the log is replayed, to the same digest.
        @Test func sigtermLeavesACheckpointSoTheNextStartReplaysNothing() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start()
            let before = try fill(daemon)
            let crashed = dir.path + "/crashed"
            dir.copy(to: crashed)  // the log as a kill -9 would leave it
            #expect(daemon.stop() == 0)
            // The line follows "stopped": read it once the output is drained, not at exit.
            #expect(daemon.waitForLog("checkpointed 1 room(s) at shutdown"), "\(daemon.log)")

            let restarted = try dir.start()
            defer { restarted.stop() }
            #expect(restarted.log.contains("1 checkpoint(s), 0 write(s) replayed from 0 segment(s)"), "\(restarted.log)")
            expectSame(try RawClient.ready(restarted).state(of: "big"), before)

            let replayed = try DaemonProcess.start(arguments: ["--data-dir", crashed])
            defer { replayed.stop() }
            #expect(replayed.log.contains("0 checkpoint(s), 23 write(s) replayed"), "\(replayed.log)")
            expectSame(try RawClient.ready(replayed).state(of: "big"), before)
        }

        /// The repro: a checkpoint moved away. The daemon refuses to start, naming it.
        @Test func aMissingCheckpointRefusesToStart() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start()
            let before = try fill(daemon)
            #expect(daemon.stop() == 0)
            let names = try FileManager.default.contentsOfDirectory(atPath: dir.data)
            let checkpoint = try #require(names.first { $0.hasPrefix("ckpt-") })
            try FileManager.default.moveItem(atPath: dir.data + "/" + checkpoint, toPath: dir.path + "/" + checkpoint)
            let (status, output) = try dir.runToExit()
            #expect(status != 0)
            #expect(output.contains(checkpoint) && output.contains("missing") && output.contains("will not start"), "\(output)")

            // A file that does not belong: refused too, naming it.
            try FileManager.default.moveItem(atPath: dir.path + "/" + checkpoint, toPath: dir.data + "/" + checkpoint)
            let foreign = "ckpt-0000000000000000.snap"
            try FileManager.default.copyItem(atPath: dir.data + "/" + checkpoint, toPath: dir.data + "/" + foreign)
            let (status2, output2) = try dir.runToExit()
            #expect(status2 != 0)
            #expect(output2.contains(foreign) && output2.contains("not in the MANIFEST"), "\(output2)")
            try FileManager.default.removeItem(atPath: dir.data + "/" + foreign)

            let restarted = try dir.start()
            defer { restarted.stop() }
            expectSame(try RawClient.ready(restarted).state(of: "big"), before)
        }

        /// A data directory from before the MANIFEST (the same files, no MANIFEST) opens and
        /// gets one.
        @Test func aDirectoryWithoutManifestStarts() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start()
            let before = try fill(daemon)
            daemon.kill()
            try FileManager.default.removeItem(atPath: dir.data + "/MANIFEST")
            let restarted = try dir.start()
            defer { restarted.stop() }
            #expect(restarted.log.contains("has no MANIFEST"), "\(restarted.log)")
            #expect(FileManager.default.fileExists(atPath: dir.data + "/MANIFEST"))
            expectSame(try RawClient.ready(restarted).state(of: "big"), before)
        }

        /// Less free space than --min-free-bytes: refused, saying why. Less than one log segment
        /// (here a 1 PiB one): a warning, and the daemon serves.
        @Test func lowDiskAtStart() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let (status, output) = try DaemonProcess.run(arguments: [
                "--host", "127.0.0.1", "--port", "0", "--data-dir", dir.data,
                "--min-free-bytes", "1048576G",
            ])
            #expect(status != 0)
            #expect(output.contains("less than --min-free-bytes"), "\(output)")
            let daemon = try dir.start(["--log-segment-bytes", "1048576G"])
            defer { daemon.stop() }
            #expect(daemon.log.contains("less than one log segment"), "\(daemon.log)")
            #expect(try RawClient.ready(daemon).state(of: "r").version == 0)
        }

        @Test func minFreeBytesIsDocumented() throws {
            let (status, output) = try DaemonProcess.run(arguments: ["--help"])
            #expect(status == 0)
            #expect(output.contains("--min-free-bytes"))
        }
    }
}
