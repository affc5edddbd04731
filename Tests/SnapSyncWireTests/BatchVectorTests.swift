import Foundation
import Testing
import SnapSyncModel
@testable import SnapSyncWire

/// Protocol/vectors/batches.json: batches applied under small limits, with the rule, op index
/// and identifier that answer a batch breaking several rules (PROTOCOL.md §6), against the model.
@Suite struct BatchVectorTests {
    static let doc = try! JSON.parse(file: Vectors.directory.appendingPathComponent("batches.json").path)
    static let cases: [JSON] = doc["tests"]!.array!

    @Test(arguments: cases)
    func batchAppliesOrFailsAsTheVectorSays(_ t: JSON) throws {
        let limits = Vectors.limits(from: Self.doc["limits"]!).model
        let context = "batches.json #\(t["tcId"]!.uint!): \(t["comment"]!.string!)"
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
