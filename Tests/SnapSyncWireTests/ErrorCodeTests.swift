import Foundation
import Testing
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncWire

@Suite(.unitTests) struct ErrorCodeTests {
    /// The table in PROTOCOL.md §6, row by row: every code there is a case here and back. Codes
    /// whose "where" is LEFT (room_deleted, room_expired) are of the REJECT kind (20 and up).
    @Test func tableInProtocolMatchesTheEnum() throws {
        let spec = try String(contentsOf: Vectors.directory.deletingLastPathComponent().appendingPathComponent("PROTOCOL.md"), encoding: .utf8)
        var rows: [(UInt64, String)] = []
        for line in spec.split(separator: "\n") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3, let code = UInt64(cells[0]), ["ERROR", "REJECT", "LEFT"].contains(cells[2]) else { continue }
            rows.append((code, cells[1]))
            let kind: ErrorCode.Kind = cells[2] == "ERROR" ? .error : .reject
            #expect(ErrorCode(rawValue: code)?.kind == kind, "\(code)")
        }
        #expect(rows.count == ErrorCode.allCases.count)
        for (code, name) in rows {
            #expect(ErrorCode(rawValue: code)?.name == name)
            #expect(ErrorCode(name: name)?.rawValue == code)
        }
    }

    @Test func violationsMapOneToOne() {
        let limits = SnapshotLimits.default
        let violations: [BatchError.Violation] = [
            .duplicateSection("s"), .duplicateItem("i"), .sectionNotFound("s"), .itemNotFound("i"),
            .anchorSectionNotFound("a"), .anchorItemNotFound("a"), .noSections, .anchorIsSelf("x"),
            .identifierTooLong("long", limit: limits.maxIdentifierBytes), .payloadTooLarge("p", size: 0, limit: limits.maxPayloadBytes),
            .tooManyItems(limit: limits.maxItems), .tooManySections(limit: limits.maxSections),
            .snapshotTooLarge(limit: limits.maxSnapshotBytes),
            .parentNotFound("p"), .moveIntoOwnSubtree("m"), .outlineTooDeep("d", limit: limits.maxOutlineDepth),
        ]
        let codes = violations.map(ErrorCode.init)
        #expect(codes.map(\.rawValue) == Array(20...32) + Array(51...53))
        for (violation, code) in zip(violations, codes) {
            #expect(code.violation(identifier: violation.identifier, limits: limits) == violation)
        }
        #expect(ErrorCode.versionMismatch.violation(identifier: nil, limits: limits) == nil)
    }

    @Test func rejectFromBatchError() {
        let error = BatchError(operationIndex: 2, violation: .anchorItemNotFound("m9"))
        let reject = Message.reject(requestID: 4, error: error)
        #expect(reject == .reject(requestID: 4, code: 25, opIndex: 2, identifier: "m9", message: "anchor item m9 does not exist"))
        #expect(reject.errorCode == .anchorItemNotFound)
        #expect(Message.error(code: 77, message: "").errorCode == nil)
        #expect(Message.error(.timeout, "idle").errorCode == .timeout)
    }

    @Test func welcomeLimits() {
        var limits = WireLimits.default
        limits.maxFrameBytes = 1 << 20
        limits.model.maxItems = 5
        limits.historyCount = 9
        limits.model.maxOutlineDepth = 7
        let entries = limits.welcomeEntries
        #expect(entries.map(\.key) == Array(1...12))
        #expect(WireLimits(welcome: entries) == limits)
        // A version 1 WELCOME has no max_outline_depth (PROTOCOL.md §12).
        #expect(limits.welcomeEntries(version: 1).map(\.key) == Array(1...8))
        #expect(limits.welcomeEntries(version: 3).map(\.key) == Array(1...9))
        #expect(WireLimits.default.model.maxOutlineDepth == 64)
        // Unknown keys are ignored; missing keys keep the defaults; huge values saturate.
        let adopted = WireLimits(welcome: [
            Message.LimitEntry(key: 99, value: 1), Message.LimitEntry(.maxPayloadBytes, 10),
            Message.LimitEntry(.maxItemsPerRoom, .max),
        ])
        #expect(adopted.model.maxPayloadBytes == 10)
        #expect(adopted.model.maxItems == .max)
        #expect(adopted.maxFrameBytes == WireLimits.default.maxFrameBytes)
        #expect(WireLimits.default.model.maxSnapshotBytes == 16 * 1024 * 1024 - 64 * 1024)
        #expect(WireLimits.default.model.maxIdentifierBytes == 256)
        #expect(WireLimits.default.maxRoomsPerConnection == 64)
        #expect(WireLimits.default.historyCount == 16_384)
    }
}
