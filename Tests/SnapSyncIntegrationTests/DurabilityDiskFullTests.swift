import Foundation
import Testing
import SnapSyncModel
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

extension DaemonDurability {
    /// A full disk, made with RLIMIT_FSIZE on the running daemon (prlimit, util-linux; no root
    /// needed): writes get REJECT storage_failure and change nothing, reads go on, and writes
    /// resume once the limit is lifted. Everything acknowledged survives a restart.
    @Suite struct DurabilityDiskFullTests {
        @Test func fullDiskRejectsWritesAndKeepsServingReads() throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start(["--max-frame-bytes", "2MiB"])
            let writer = try RawClient.ready(daemon)
            try writer.mustMutate("full", [.appendSections([SnapshotElement("s")])])
            // About 1 MB per write: 16 items of 60 KiB, added once, then rewritten with new
            // payloads, so the room stays the same size while the log grows.
            try writer.mustMutate("full", [.appendItems((0..<16).map { SnapshotElement(SnapshotIdentifier("i\($0)")) }, toSection: "s")])
            var n = 0
            func bigWrite() throws -> Message {
                n += 1
                let payload = SnapshotPayload(Array(repeating: UInt8(truncatingIfNeeded: n), count: 60 * 1024))
                let items = (0..<16).map { k in SnapshotElement(SnapshotIdentifier("i\(k)"), payload: payload) }
                return try writer.mutate("full", [.updateItems(items, .reload)]).answer
            }
            // The log file may not grow past its current allocation + 4 MiB (soft limit only, so that
            // it can be raised again without privileges).
            let segment = dir.segments.last!
            let limit = readBytes(segment).count + 4 * 1024 * 1024
            #expect(runCommand("prlimit --pid \(daemon.pid) --fsize=\(limit):unlimited") == 0)
            var acked = 0
            var rejection: String?
            for _ in 0..<40 {
                let answer = try bigWrite()
                if case .ack = answer { acked += 1; continue }
                guard case .reject(_, let code, _, _, let message) = answer else {
                    Issue.record("unexpected \(answer)")
                    return
                }
                #expect(ErrorCode(rawValue: code) == .storageFailure, "\(message)")
                rejection = message
                break
            }
            #expect(rejection != nil, "a write was refused once the file could not grow")
            #expect(acked >= 1)
            #expect(daemon.waitForLog("disk full"), "the log says so")
            // Reads go on, and the refused write changed nothing.
            let reader = try RawClient.ready(daemon)
            let state = try reader.state(of: "full")
            #expect(state.version == UInt64(acked) + 2)
            #expect(state.snapshot.payload(ofItem: "i0")?.bytes.first == UInt8(truncatingIfNeeded: acked))
            #expect(try writer.mutate("full", [.appendItems([SnapshotElement("tiny")], toSection: "s")]).answer.isStorageFailure)
            // Space comes back.
            #expect(runCommand("prlimit --pid \(daemon.pid) --fsize=unlimited") == 0)
            guard case .ack = try bigWrite() else {
                Issue.record("writes should be accepted again")
                return
            }
            acked += 1
            #expect(daemon.waitForLog("available again"))
            daemon.kill()

            let restarted = try dir.start()
            defer { restarted.stop() }
            let after = try RawClient.ready(restarted).state(of: "full")
            #expect(after.version == UInt64(acked) + 2)
            #expect(after.snapshot.payload(ofItem: "i0")?.bytes.first == UInt8(truncatingIfNeeded: n))
        }
    }
}

extension Message {
    var isStorageFailure: Bool {
        if case .reject(_, let code, _, _, _) = self { return ErrorCode(rawValue: code) == .storageFailure }
        return false
    }
}

func runCommand(_ command: String) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", command]
    do { try process.run() } catch { return -1 }
    process.waitUntilExit()
    return process.terminationStatus
}
