import Foundation
import Testing
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncWire

/// Protocol/vectors/replay.json: DIFF frames applied to a starting snapshot give the recorded
/// end state, canonical encoding and digest.
@Suite(.unitTests) struct ReplayTests {
    let doc = try! JSON.parse(file: Vectors.directory.appendingPathComponent("replay.json").path)

    @Test func replay() throws {
        var snapshot = try JSONForm.snapshot(from: doc["start"]!["snapshot"]!)
        #expect(JSONForm.hex(snapshot.canonicalEncoding) == doc["start"]!["hex"]!.string)
        #expect(snapshot.digest.description == doc["start"]!["digest"]!.string)
        let epoch = doc["epoch"]!.uint!
        var decoder = FrameDecoder(accepting: .server)
        var version: UInt64 = 0
        for entry in doc["diffs"]!.array! {
            decoder.append(JSONForm.bytes(fromHex: entry["hex"]!.string!))
            let message = try #require(try decoder.nextMessage())
            #expect(JSONForm.message(message) == entry["message"])
            guard case .diff(let room, let e, let v, let ops, _) = message else {
                Issue.record("not a DIFF: \(message)")
                return
            }
            #expect(room == doc["room"]!.string)
            #expect(e == epoch)
            #expect(v == version + 1, "versions are consecutive within an epoch")
            version = v
            try snapshot.apply(ops)
            try snapshot.checkInvariants()
        }
        #expect(version == doc["end"]!["version"]!.uint)
        #expect(JSONForm.snapshot(snapshot) == doc["end"]!["snapshot"])
        #expect(JSONForm.hex(snapshot.canonicalEncoding) == doc["end"]!["hex"]!.string)
        #expect(snapshot.digest.description == doc["end"]!["digest"]!.string)
        // The FrameEncoder's snapshot field is the canonical encoding.
        var field: [UInt8] = []
        FrameEncoder.encodeSnapshot(snapshot, into: &field)
        #expect(JSONForm.hex(field) == doc["end"]!["hex"]!.string)
        #expect(RoomSnapshot().digest.description == doc["empty"]!["digest"]!.string)
    }
}
