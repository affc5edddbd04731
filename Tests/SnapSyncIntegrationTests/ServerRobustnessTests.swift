import Testing
import SnapSyncModel
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

// Bad input on the real daemon: each malformed frame gets an ERROR with the right code and a
// close, the bytes are logged safely, and the daemon keeps serving everyone else.

extension ServerIntegration {
    @Suite struct Robustness {
        /// Sends `bytes` on a ready connection (or a fresh one, before HELLO) and returns the
        /// ERROR code that preceded the close; then checks that another client is still served.
        private func errorCode(
            for bytes: [UInt8], handshake: Bool = true, arguments: [String] = [],
            sourceLocation: SourceLocation = #_sourceLocation
        ) throws -> (ErrorCode?, DaemonProcess) {
            let daemon = try DaemonProcess.start(arguments: arguments)
            let bystander = try RawClient.ready(daemon)
            _ = try bystander.join("room")
            let client = try RawClient(host: daemon.host, port: daemon.port)
            if handshake { try client.handshake() }
            try client.send(raw: bytes)
            let (code, _, _) = try client.closingError()
            // The daemon still serves: the bystander writes and gets its DIFF and ACK.
            let (answer, skipped) = try bystander.mutate("room", [.appendSections([.named("s")])])
            #expect(skipped.count == 1, sourceLocation: sourceLocation)
            guard case .ack = answer else {
                Issue.record("the daemon stopped serving others: \(answer)", sourceLocation: sourceLocation)
                return (code, daemon)
            }
            return (code, daemon)
        }

        @Test func anOversizedFrameIsRefusedBeforeItsBodyArrives() throws {
            // Only the 4-byte length is sent: the daemon must not wait for 1 MiB.
            let (code, daemon) = try errorCode(for: [0x00, 0x10, 0x00, 0x00], arguments: ["--max-frame-bytes", "64KiB"])
            defer { daemon.stop() }
            #expect(code == .frameTooLarge)
            #expect(daemon.waitForLog("frame_too_large"))
        }

        @Test func aZeroLengthFrameIsMalformed() throws {
            let (code, daemon) = try errorCode(for: [0, 0, 0, 0])
            defer { daemon.stop() }
            #expect(code == .malformedFrame)
        }

        @Test func anUnknownTypeByteIsRefused() throws {
            let (code, daemon) = try errorCode(for: [0, 0, 0, 3, 0xEE, 0x01, 0x02])
            defer { daemon.stop() }
            #expect(code == .unknownMessageType)
        }

        @Test func aServerOnlyMessageFromAClientIsRefused() throws {
            let diff = FrameEncoder().encode(.diff(room: "room", epoch: 1, version: 1, ops: []))
            let (code, daemon) = try errorCode(for: diff)
            defer { daemon.stop() }
            #expect(code == .unknownMessageType)
        }

        @Test func garbageInsideAFrameIsMalformedAndLoggedEscaped() throws {
            // JOIN whose request_id varint never ends, with a newline and an escape byte in it.
            let body: [UInt8] = [0x10, 0xFF, 0xFF, 0x0A, 0x1B, 0xFF]
            let (code, daemon) = try errorCode(for: [0, 0, 0, UInt8(body.count)] + body)
            defer { daemon.stop() }
            #expect(code == .malformedFrame)
            #expect(daemon.waitForLog("protocol error, closing"))
            let line = daemon.log.split(separator: "\n").first { $0.contains("protocol error") } ?? ""
            #expect(line.contains(#"bytes=\x00\x00\x00\x06\x10\xff\xff\x0a\x1b\xff "#), "\(line)")
        }

        @Test func trailingBytesAfterTheFieldsAreMalformed() throws {
            var ping = FrameEncoder().encode(.ping(nonce: 1))
            ping[3] += 1
            ping.append(0x00)
            let (code, daemon) = try errorCode(for: ping)
            defer { daemon.stop() }
            #expect(code == .malformedFrame)
        }

        @Test func anHTTPRequestBeforeHelloIsRefusedAndItsBytesLoggedSafely() throws {
            // "GET " read as a length is 1.2 GB: over any max_frame_bytes.
            let (code, daemon) = try errorCode(for: Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8), handshake: false)
            defer { daemon.stop() }
            #expect(code == .frameTooLarge)
            #expect(daemon.waitForLog(#"GET / HTTP/1.1\x0d\x0aHost: x\x0d\x0a\x0d\x0a"#))
        }

        @Test func aTruncatedFrameThenCloseLeavesNothingBehind() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let observer = try RawClient.ready(daemon)
            do {
                let client = try RawClient.ready(daemon)
                let frame = FrameEncoder().encode(.join(requestID: 1, room: "half", resume: nil))
                try client.send(raw: Array(frame.prefix(frame.count - 3)))
                #expect(client.isQuiet(for: 0.2), "half a frame is not answered")
            }  // closed here
            #expect(try waitUntil { try observer.stats()["connections"] == 1 })
            // The daemon serves a new connection as usual and never saw the half-sent room.
            let fresh = try RawClient.ready(daemon)
            _ = try fresh.state(of: "other")
            #expect(try fresh.stats()["rooms"] == 1)
        }

        @Test func aFrameSplitIntoSingleBytesIsStillOneFrame() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let client = try RawClient.ready(daemon)
            let frame = FrameEncoder().encode(.join(requestID: 9, room: "drip", resume: nil))
            for byte in frame {
                try client.send(raw: [byte])
                usleep(1_000)
            }
            guard case .snapshot(9, "drip", _, 0, .initial, _, _, _) = try client.receive() else { Issue.record("expected SNAPSHOT"); return }
        }

        @Test func manyFramesInOneWriteAreAllAnsweredInOrder() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let client = try RawClient.ready(daemon)
            var bytes: [UInt8] = []
            for nonce in 0..<500 { FrameEncoder().encode(.ping(nonce: UInt64(nonce)), into: &bytes) }
            try client.send(raw: bytes)
            for nonce in 0..<500 {
                guard case .pong(let echoed) = try client.receive() else { Issue.record("expected PONG"); return }
                #expect(echoed == UInt64(nonce))
            }
        }
    }
}
