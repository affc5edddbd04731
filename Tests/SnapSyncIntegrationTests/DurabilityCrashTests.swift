import Foundation
import Testing
import SnapSyncModel
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

extension DaemonDurability {
    /// kill -9 in the middle of a stream of acknowledged writes from several clients: after a
    /// restart every acknowledged write is there, nothing that was never sent appears, and each
    /// room is exactly a prefix of what its writer sent (the log applies writes in order).
    @Suite struct DurabilityCrashTests {
        /// What one writer sent and what was acknowledged.
        final class Writer: @unchecked Sendable {
            let room: String
            let lock = NSLock()
            var sent = 0
            var acked = 0
            var error: String?
            init(room: String) { self.room = room }
        }

        @Test(arguments: ["always", "everysec", "no"])
        func killDuringWritesLosesNoAcknowledgedWrite(fsync: String) throws {
            let dir = try DurableDirectory()
            defer { dir.remove() }
            let daemon = try dir.start(["--fsync", fsync])
            let writers = (0..<4).map { Writer(room: "crash-\($0 % 2)") }
            // Writers 0 and 2 share room crash-0, 1 and 3 share crash-1: concurrent writers in
            // one room, and rooms written in the same loop passes.
            var threads: [Thread] = []
            let done = DispatchGroup()
            for (index, writer) in writers.enumerated() {
                done.enter()
                let (host, port) = (daemon.host, daemon.port)
                let thread = Thread {
                    defer { done.leave() }
                    do {
                        let client = try RawClient(host: host, port: port, timeout: 60)
                        _ = try client.handshake()
                        // Create the section (several writers race; duplicates are rejected).
                        _ = try client.mutate(writer.room, [.appendSections([SnapshotElement("s")])])
                        for n in 0..<100_000 {
                            let item = SnapshotElement(SnapshotIdentifier("w\(index)-\(n)"), payload: SnapshotPayload("written by \(index)"))
                            writer.lock.withLock { writer.sent = n + 1 }
                            let (answer, _) = try client.mutate(writer.room, [.appendItems([item], toSection: "s")])
                            guard case .ack = answer else {
                                writer.lock.withLock { writer.error = "unexpected answer \(answer)" }
                                return
                            }
                            writer.lock.withLock { writer.acked = n + 1 }
                        }
                    } catch {
                        // The daemon was killed: the connection breaks. Expected.
                    }
                }
                threads.append(thread)
                thread.start()
            }
            // Let a few hundred writes be acknowledged, then kill -9.
            let enough = waitUntil(timeout: 60) {
                writers.allSatisfy { w in w.lock.withLock { w.acked >= 50 } }
            }
            #expect(enough, "writers made progress: \(writers.map { w in w.lock.withLock { w.acked } })")
            daemon.kill()
            #expect(done.wait(timeout: .now() + 30) == .success)
            for w in writers { #expect(w.error == nil, "\(w.error ?? "")") }

            let restarted = try dir.start(["--fsync", fsync])
            defer { restarted.stop() }
            #expect(restarted.log.contains("store: opened"))
            let reader = try RawClient.ready(restarted)
            for room in ["crash-0", "crash-1"] {
                let state = try reader.state(of: room)
                let items = Set(itemNames(state.snapshot))
                // One version per applied write: the section, then one item each.
                #expect(state.version == UInt64(items.count) + 1, "room \(room)")
                for (index, w) in writers.enumerated() where w.room == room {
                    let (sent, acked) = w.lock.withLock { (w.sent, w.acked) }
                    let present = items.filter { $0.hasPrefix("w\(index)-") }
                    // Every acknowledged write is there...
                    for n in 0..<acked {
                        #expect(present.contains("w\(index)-\(n)"), "acknowledged write w\(index)-\(n) lost (\(fsync))")
                    }
                    // ...nothing unsent appears, and what is there is a prefix (at most the one
                    // write in flight beyond the acknowledged ones).
                    #expect(present.count == acked || present.count == sent, "writer \(index): \(present.count) present, \(acked) acked, \(sent) sent")
                    for n in 0..<present.count {
                        #expect(present.contains("w\(index)-\(n)"))
                    }
                }
            }
        }
    }
}
