import Testing
import SnapSyncModel
import SnapSyncWire

// The flush spread over IO threads (`--io-threads`), on the real daemon: what the single loop
// promised holds when the loop's thread and a helper send the passes' output together. (Every
// daemon lane also runs whole with SNAPSYNCD_IO_THREADS=2 and SNAPSYNCD_IO_THREAD_BATCH=1,
// scripts/test, so every test there sends its passes this way.)

extension ServerIntegration {
    @Suite struct IOThreads {
        /// 40 members and batches of 4: each pass's fan-out is shared by two threads. A writer
        /// pipelines 300 writes: it gets every ACK in order, and every member every DIFF once,
        /// in version order, with the payload its write carried.
        @Test func aSharedFanOutKeepsEveryMembersStreamInOrder() throws {
            let daemon = try DaemonProcess.start(arguments: ["--io-threads", "2", "--io-thread-batch", "4"])
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon)
            try writer.mustMutate("big", [.appendSections([.named("s")]), .appendItems([.named("i")], toSection: "s")])
            let members = try (0..<40).map { _ in try RawClient.ready(daemon) }
            let starts = try members.map { try $0.state(of: "big").version }
            let writes = 300
            let payload = String(repeating: "p", count: 1_500)
            for round in 0..<writes {
                try writer.send(
                    .mutate(
                        requestID: UInt64(round), room: "big", expectedVersion: nil, writeID: [],
                        ops: [.updateItems([.named("i", payload + "\(round)")], .reload)]))
            }
            var lastAcked: UInt64 = 0
            for round in 0..<writes {
                guard case .ack(let requestID, _, let version) = try writer.receive(timeout: 60) else {
                    Issue.record("the writer lost an ACK")
                    return
                }
                #expect(requestID == UInt64(round), "ACKs in request order")
                #expect(lastAcked == 0 || version == lastAcked + 1)
                lastAcked = version
            }
            for (index, member) in members.enumerated() {
                for round in 0..<writes {
                    guard case .diff(_, _, let version, let ops, _) = try member.receive(timeout: 60) else {
                        Issue.record("member \(index) lost a DIFF")
                        return
                    }
                    #expect(version == starts[index] + UInt64(round) + 1, "member \(index): versions in order, none skipped")
                    guard case .updateItems(let items, _) = ops.first else {
                        Issue.record("member \(index): a DIFF without the write's update")
                        return
                    }
                    #expect(items.first?.payload == SnapshotPayload(payload + "\(round)"))
                }
            }
            let stats = try writer.stats()
            #expect((stats["io_passes_spread"] ?? 0) > 0, "no pass was shared: \(stats["io_passes_spread"].map(String.init) ?? "missing")")
            #expect(daemon.waitForLog("io_threads=2"))
        }

        /// One thread keeps today's flush: no pass is shared.
        @Test func oneThreadSharesNothing() throws {
            let daemon = try DaemonProcess.start(arguments: ["--io-threads", "1", "--io-thread-batch", "1"])
            defer { daemon.stop() }
            let writer = try RawClient.ready(daemon)
            let members = try (0..<4).map { _ in try RawClient.ready(daemon) }
            try writer.mustMutate("one", [.appendSections([.named("s")])])
            for member in members { _ = try member.state(of: "one") }
            try writer.mustMutate("one", [.appendItems([.named("i")], toSection: "s")])
            for member in members {
                guard case .diff = try member.receive(timeout: 60) else { Issue.record("a member lost its DIFF"); return }
            }
            #expect(try writer.stats()["io_passes_spread"] == 0)
        }
    }
}
