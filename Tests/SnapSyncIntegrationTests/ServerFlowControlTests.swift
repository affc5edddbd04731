import Testing
import SnapSyncModel
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

// Back-pressure on the real daemon: a subscriber that stops reading is cut off at its output
// cap while the others keep up, and connections beyond the limit are refused at once.

extension ServerIntegration {
    @Suite struct FlowControl {
        @Test func aSubscriberThatStopsReadingIsCutOffWhileAnotherGetsEveryDiff() throws {
            let daemon = try DaemonProcess.start(arguments: ["--max-output-bytes", "256KiB", "--shutdown-timeout", "30s"])
            defer { daemon.stop() }
            let (writer, fast, slow, start) = try feed(daemon)  // the slow member never reads again
            let payload = String(repeating: "x", count: 60_000)
            var version = start.version
            var cutOff = false
            // The kernel may buffer a few MiB for the slow socket before the daemon's own queue
            // grows; 24 MiB of DIFFs is far beyond both.
            for round in 0..<400 where !cutOff {
                try writer.send(
                    .mutate(
                        requestID: UInt64(round), room: "feed", expectedVersion: nil, writeID: [],
                        ops: [.updateItems([.named("i", payload + "\(round)")], .reload)]))
                guard case .ack(_, _, let acked) = try writer.receive() else { Issue.record("writer lost its ACK"); return }
                version += 1
                #expect(acked == version)
                guard case .diff(_, _, let seen, _, _) = try fast.receive() else { Issue.record("the fast subscriber lost a DIFF"); return }
                #expect(seen == version, "the fast subscriber sees every version in order")
                if round % 10 == 9 { cutOff = try writer.stats()["slow_consumer_disconnects"] == 1 }
            }
            #expect(cutOff, "the slow subscriber was never cut off")
            #expect(daemon.waitForLog("slow consumer, closing"))
            // The slow side, reading at last, finds whole DIFFs in order, then ERROR
            // slow_consumer, then the close.
            let (code, _, before) = try slow.closingError(timeout: 30)
            #expect(code == .slowConsumer)
            var last = start.version
            for message in before {
                guard case .diff(_, _, let seen, _, _) = message else { Issue.record("unexpected \(summary(message))"); continue }
                #expect(seen == last + 1)
                last = seen
            }
            #expect(last < version, "the slow subscriber cannot have received everything")
            // The others were not held up and are still served.
            try writer.mustMutate("feed", [.deleteItems(["i"])])
            guard case .diff = try fast.receive() else { Issue.record("the fast subscriber stopped getting DIFFs"); return }
            #expect(try waitUntil { try writer.stats()["connections"] == 2 })
        }

        /// A member whose socket takes only part of a pass's broadcast (a 4 KiB receive buffer,
        /// 60 KB DIFFs: the daemon's direct send stops mid-frame, then its queue holds the rest)
        /// gets, once it reads, every DIFF whole and in order, as the member that kept up did.
        @Test func aMemberWhoseSocketTakesPartOfABroadcastGetsTheRestInOrder() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let (writer, fast, slow, start) = try feed(daemon)
            let payload = String(repeating: "y", count: 60_000)
            // 6 MB: more than the kernel buffers for the slow socket (a few MiB), so that sends
            // stop part way; within the member's 32 MiB output cap.
            let writes = 100
            for round in 0..<writes {
                try writer.send(
                    .mutate(
                        requestID: UInt64(round), room: "feed", expectedVersion: nil, writeID: [],
                        ops: [.updateItems([.named("i", payload + "\(round)")], .reload)]))
                guard case .ack = try writer.receive() else { Issue.record("writer lost its ACK"); return }
                guard case .diff(_, _, let seen, _, _) = try fast.receive() else { Issue.record("the fast member lost a DIFF"); return }
                #expect(seen == start.version + UInt64(round) + 1)
            }
            for round in 0..<writes {
                guard case .diff(_, _, let version, let ops, _) = try slow.receive(timeout: 60) else {
                    Issue.record("the slow member lost a DIFF")
                    return
                }
                #expect(version == start.version + UInt64(round) + 1, "versions in order, none skipped")
                guard case .updateItems(let items, _) = ops.first else {
                    Issue.record("a DIFF without the write's update")
                    return
                }
                #expect(items.first?.payload == SnapshotPayload(payload + "\(round)"))
            }
            #expect(try writer.stats()["slow_consumer_disconnects"] == 0)
        }

        /// A writer, and two members of room `feed` (one item `i` in section `s`): `fast`, and
        /// `slow`, whose tiny receive buffer keeps the kernel from absorbing much for it.
        private func feed(_ daemon: DaemonProcess) throws -> (writer: RawClient, fast: RawClient, slow: RawClient, start: RoomState) {
            let writer = try RawClient.ready(daemon)
            let fast = try RawClient.ready(daemon)
            let slow = try RawClient.ready(daemon, receiveBuffer: 4096)
            try writer.mustMutate("feed", [.appendSections([.named("s")]), .appendItems([.named("i")], toSection: "s")])
            let start = try fast.state(of: "feed")
            #expect(try slow.state(of: "feed").version == start.version)
            return (writer, fast, slow, start)
        }

        @Test func connectionsOverTheLimitAreRefusedAtOnce() throws {
            let daemon = try DaemonProcess.start(arguments: ["--max-connections", "3"])
            defer { daemon.stop() }
            var clients = try (0..<3).map { _ in try RawClient.ready(daemon) }
            // The fourth is told why and closed right away, without sending anything.
            let excess = try RawClient(host: daemon.host, port: daemon.port)
            let (code, message, _) = try excess.closingError(timeout: 60)
            #expect(code == .tooManyConnections)
            #expect(message.contains("3"))
            #expect(try clients[0].stats()["connections_refused"] == 1)
            // A free slot is usable again.
            clients.removeLast()
            #expect(try waitUntil { try clients[0].stats()["connections"] == 2 })
            let again = try RawClient.ready(daemon)
            #expect(try again.stats()["connections"] == 3)
        }
    }
}
