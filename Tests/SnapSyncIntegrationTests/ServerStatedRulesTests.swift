import Testing
import SnapSyncModel
import SnapSyncWire

// Rules PROTOCOL.md now states once, on the real daemon: a frame is decoded before the
// connection's state is checked (§8.1), and a write id names one request (§10).

extension ServerIntegration {
    @Suite struct StatedOnce {
        /// PROTOCOL.md §8.1: a frame is decoded first, in every state (the decoder's code wins,
        /// unknown_message_type for a server-only type included); only a frame that decodes is
        /// then checked against the state (handshake_required before HELLO).
        @Test func beforeHelloTheDecoderAnswersFirstThenTheState() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let cases: [([UInt8], ErrorCode)] = [
                (FrameEncoder().encode(.welcome(version: 1, sessionID: 1, serverName: "x", limits: [])), .unknownMessageType),
                (FrameEncoder().encode(.ack(requestID: 1, epoch: 1, version: 1)), .unknownMessageType),
                ([0, 0, 0, 2, 0x10, 0x01], .malformedFrame),  // JOIN cut short
                (FrameEncoder().encode(.join(requestID: 1, room: "r", resume: nil)), .handshakeRequired),
                (FrameEncoder().encode(.ping(nonce: 1)), .handshakeRequired),
                // REPLACE r with snapshot [s, s]: well-formed, breaking a content rule (it decoded).
                (
                    [0, 0, 0, 15, 0x13, 0x01, 0x01, 0x72, 0x00, 0x00, 0x02, 0x01, 0x73, 0x00, 0x00, 0x01, 0x73, 0x00, 0x00],
                    .handshakeRequired
                ),
            ]
            for (frame, expected) in cases {
                let client = try RawClient(host: daemon.host, port: daemon.port)
                try client.send(raw: frame)
                #expect(try client.closingError().code == expected, "\(frame)")
            }
        }

        /// PROTOCOL.md §10: a write id names one request. A different batch reusing an empty
        /// batch's id is refused, not acknowledged and dropped; the same batch again is a retry.
        @Test func aWriteIDReusedByAnotherBatchIsAConflict() throws {
            let daemon = try DaemonProcess.start()
            defer { daemon.stop() }
            let client = try RawClient.ready(daemon)
            let id = Array("w-12".utf8)
            guard case .ack(_, _, 0) = try client.mutate("r", [], writeID: id).answer else {
                Issue.record("the empty batch was not acknowledged at version 0")
                return
            }
            let (answer, _) = try client.mutate("r", [.appendSections([.named("s")])], writeID: id)
            guard case .reject(_, let code, nil, nil, _) = answer else {
                Issue.record("expected REJECT, got \(summary(answer))")
                return
            }
            #expect(ErrorCode(rawValue: code) == .writeIDConflict)
            guard case .ack(_, _, 0) = try client.mutate("r", [], writeID: id).answer else {
                Issue.record("the retry of the empty batch was not acknowledged at version 0")
                return
            }
            #expect(try client.state(of: "r").version == 0)
        }
    }
}
