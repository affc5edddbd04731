import SnapSync
import SnapSyncModel
import Testing

// Reading a SnapSyncError through its kind and accessors (SnapSyncError+Accessors.swift).
@Suite("Client: SnapSyncError's kind and accessors")
struct ClientErrorAccessorTests {
    @Test("kind names the case; the accessors read the REJECT, the batch error, the index, the identifier and the server's message")
    func accessors() {
        let rejected = SnapSyncError.rejected(.init(rawCode: ErrorCode.itemNotFound.rawValue, operationIndex: 2, identifier: "card", message: "no card"))
        #expect(rejected.kind == .rejected && rejected.kind != .invalidBatch && rejected.kind.name == "rejected")
        #expect(rejected.rejection?.code == .itemNotFound && rejected.operationIndex == 2 && rejected.identifier == "card")
        #expect(rejected.serverMessage == "no card" && rejected.batchError == nil)

        let invalid = SnapSyncError.invalidBatch(BatchError(operationIndex: 1, violation: .duplicateItem("x")))
        #expect(invalid.kind == .invalidBatch && invalid.rejection == nil && invalid.batchError?.violation == .duplicateItem("x"))
        #expect(invalid.operationIndex == 1 && invalid.identifier == "x" && invalid.serverMessage == nil)

        let forbidden = SnapSyncError.forbidden(room: "r", right: "write", message: "no write right")
        #expect(forbidden.kind == .forbidden && forbidden.serverMessage == "no write right" && forbidden.code == .forbidden)

        // Every case has its own kind, named after it.
        let all: [SnapSyncError] = [
            rejected, forbidden, .unauthorized(reason: "expired"), .credentialsUnavailable("x"),
            .serverError(.init(rawCode: 1, message: "m")), invalid, .batchAbandoned("b"), .connectFailed("c"),
            .tlsHostnameMismatch(host: "h", reason: "r"), .tlsCertificateExpired(host: "h", reason: "r"),
            .tlsUntrustedCertificate(host: "h", reason: "r"), .tlsPinMismatch(host: "h", expected: "e", presented: "p"),
            .tlsHandshakeFailed(host: "h", reason: "r"), .tlsConfigurationInvalid(host: "h", reason: "r"), .connectionLost("l"),
            .allEndpointsFailed(tried: [], last: .closed), .timedOut("t"), .protocolViolation("p"),
            .requestTooLarge(size: 2, limit: 1), .unsupportedByServer("u"), .notJoined(room: "r"), .cancelled, .closed,
        ]
        #expect(Set(all.map(\.kind)).count == all.count)
        for error in all { #expect("\(error)".isEmpty == false && !error.kind.name.isEmpty) }
    }

    @Test("every payload has an accessor, nil for the kinds that do not carry it")
    func payloadAccessors() {
        let forbidden = SnapSyncError.forbidden(room: "board", right: "write", message: "m")
        #expect(forbidden.room == "board" && forbidden.right == "write" && forbidden.host == nil && forbidden.reason == nil)
        #expect(SnapSyncError.notJoined(room: "r").room == "r" && SnapSyncError.notJoined(room: "r").right == nil)

        let pin = SnapSyncError.tlsPinMismatch(host: "h", expected: "e", presented: "p")
        #expect(pin.host == "h" && pin.pinMismatch?.pinned == "e" && pin.pinMismatch?.presented == "p" && pin.reason == nil)
        let expired = SnapSyncError.tlsCertificateExpired(host: "h", reason: "CN=x expired")
        #expect(expired.host == "h" && expired.reason == "CN=x expired" && expired.pinMismatch == nil)

        let server = SnapSyncError.serverError(.init(rawCode: ErrorCode.shuttingDown.rawValue, message: "bye"))
        #expect(server.serverError?.code == .shuttingDown && server.serverMessage == "bye" && server.code == .shuttingDown)
        let coding = SnapSyncError.coding(ElementCodingError(role: .itemPayload, direction: .decoding, identifier: "a", message: "m"))
        #expect(coding.codingError?.identifier == "a" && coding.serverError == nil)

        let tooLarge = SnapSyncError.requestTooLarge(size: 10, limit: 4)
        #expect(tooLarge.frameSize?.size == 10 && tooLarge.frameSize?.limit == 4)
        let endpoints = SnapSyncError.allEndpointsFailed(tried: [.init(host: "a", port: 1)], last: .connectFailed("refused"))
        #expect(endpoints.endpointFailures?.tried.map(\.host) == ["a"] && endpoints.endpointFailures?.last.reason == "refused")

        for text in [
            SnapSyncError.connectionLost("x"), .timedOut("x"), .connectFailed("x"), .protocolViolation("x"), .unsupportedByServer("x"),
            .credentialsUnavailable("x"), .batchAbandoned("x"),
        ] {
            #expect(text.reason == "x", "\(text.kind)")
        }
        // Equal errors are equal values; a kind compares as a value, with a `default` in a switch.
        #expect(SnapSyncError.closed == .closed && SnapSyncError.timedOut("a") != .timedOut("b"))
        switch SnapSyncError.cancelled.kind {
        case .closed: Issue.record("cancelled is not closed")
        case .cancelled: break
        default: Issue.record("cancelled has its own kind")
        }
    }
}
