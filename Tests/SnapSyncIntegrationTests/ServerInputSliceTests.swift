import Testing
import SnapSyncModel
import SnapSyncWire

// One connection's pipelined requests are handled a slice at a time (the server's
// `InputSlice`): at most 1,024 frames or 2 ms per loop pass, the rest held until its next turn,
// so that every other connection is served in between. Held frames are answered whole, in order,
// before anything read after them, and before a half-close is acted on.

extension ServerIntegration {
    @Suite struct InputSlices {
        static func pings(_ count: Int, from first: UInt64 = 1) -> [UInt8] {
            var bytes: [UInt8] = []
            for nonce in first..<first + UInt64(count) { FrameEncoder().encode(.ping(nonce: nonce), into: &bytes) }
            return bytes
        }

        /// Every PONG of the flood, in order.
        static func expectPongs(_ count: Int, on client: RawClient) throws {
            for nonce in 1...UInt64(count) {
                let message = try client.receive()
                guard case .pong(nonce) = message else {
                    Issue.record("PONG \(nonce) expected, got \(summary(message))")
                    return
                }
            }
        }

        /// 20,000 PINGs in one write take many slices (each yield is counted in STATS
        /// `input_yields`); every PONG comes back, in order, and a second connection is served
        /// meanwhile.
        @Test func aPipelinedFloodIsHandledASliceAtATime() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let flood = try RawClient.ready(daemon), bystander = try RawClient.ready(daemon)
            let count = 20_000
            try flood.send(raw: Self.pings(count))
            try bystander.mustMutate("r", [.appendSections([.named("s")])])
            try Self.expectPongs(count, on: flood)
            let stats = try bystander.stats()
            // 20,000 frames need at least 20 slices of 1,024; a slice that ends where a read's
            // bytes end yields nothing (its 64 KiB hold about 5,000 PINGs), so at least 15 yield.
            #expect((stats["input_yields"] ?? 0) >= 15, "input_yields \(stats["input_yields"].map(String.init) ?? "missing")")
            // The flood's PINGs, two HELLOs, a MUTATE, a STATS.
            #expect(stats["frames_in"] == UInt64(count) + 4)
        }

        /// A flood followed by the client's half-close: the held frames are answered before
        /// the EOF is acted on, and then the connection closes.
        @Test func heldFramesAreAnsweredBeforeAHalfClose() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let flood = try RawClient.ready(daemon)
            let count = 6_000
            try flood.send(raw: Self.pings(count))
            flood.shutdownWrite()
            let messages = try flood.receiveUntilClosed()
            #expect(messages.count == count)
            for (index, message) in messages.enumerated() {
                guard case .pong(let nonce) = message, nonce == UInt64(index + 1) else {
                    Issue.record("frame \(index): \(summary(message))")
                    break
                }
            }
        }

        /// Held frames come before frames read after them: a second burst sent while the first is
        /// still being handled is answered after it, and a frame split across the two bursts is
        /// put together.
        @Test func framesReadLaterWaitForTheHeldOnes() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let flood = try RawClient.ready(daemon)
            var first = Self.pings(10_000)
            var second = Self.pings(10_000, from: 10_001)
            // The last frame of the first burst is completed by the second.
            second.insert(contentsOf: first.suffix(5), at: 0)
            first.removeLast(5)
            try flood.send(raw: first)
            try flood.send(raw: second)
            try Self.expectPongs(20_000, on: flood)
        }
    }
}
