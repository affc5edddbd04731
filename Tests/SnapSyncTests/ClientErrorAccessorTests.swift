import SnapSync
import SnapSyncModel
import Testing

// Reading a SnapSyncError without matching its cases (SnapSyncError+Accessors.swift).
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
}
