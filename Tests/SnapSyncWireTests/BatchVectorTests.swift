import Foundation
import Testing
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncWire

/// Protocol/vectors/batches.json and outline_batches.json: batches applied under small limits,
/// with the rule, op index and identifier that answer a batch breaking several rules
/// (PROTOCOL.md §6) and the forest meaning of every op (§5), against the model.
@Suite(.unitTests) struct BatchVectorTests {
    static let files = ["batches.json", "outline_batches.json"]
    static let docs = files.map { try! JSON.parse(file: Vectors.directory.appendingPathComponent($0).path) }
    static let cases: [(file: String, limits: JSON, test: JSON)] = zip(files, docs).flatMap { file, doc in
        doc["tests"]!.array!.map { (file, doc["limits"]!, $0) }
    }

    @Test(arguments: cases.indices)
    func batchAppliesOrFailsAsTheVectorSays(_ index: Int) throws {
        let (file, limitsJSON, t) = Self.cases[index]
        let limits = Vectors.limits(from: limitsJSON).model
        let context = "\(file) #\(t["tcId"]!.uint!): \(t["comment"]!.string!)"
        let start = try JSONForm.snapshot(from: t["start"]!)
        let message = try FrameDecoder.decode(frame: JSONForm.bytes(fromHex: t["hex"]!.string!))
        guard case .mutate(_, _, _, _, let ops) = message else {
            Issue.record("\(context): not a MUTATE")
            return
        }
        var s = start
        if t["result"]!.string == "accepted" {
            try s.apply(ops, limits: limits)
            #expect(JSONForm.snapshot(s) == t["end"], "\(context)")
            #expect(s.digest.description == t["endDigest"]!.string, "\(context)")
        } else {
            do {
                try s.apply(ops, limits: limits)
                Issue.record("\(context): accepted")
            } catch {
                #expect(ErrorCode(error.violation).name == t["error"]!.string, "\(context): \(error)")
                #expect(UInt64(error.operationIndex) == t["opIndex"]!.uint, "\(context): \(error)")
                #expect(error.violation.identifier.map { JSONForm.bytes($0.bytes) } ?? .null == t["identifier"]!, "\(context): \(error)")
            }
            #expect(s == start, "\(context): a rejected batch changed the snapshot")
        }
    }
}
