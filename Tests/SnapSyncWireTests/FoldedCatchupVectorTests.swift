import Foundation
import Testing
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncWire

/// chain.json's `foldedCatchups` (PROTOCOL.md §11.12): a replica at `start` (state and chain)
/// receives a folded CATCHUP and its one DIFF. Applying the DIFF's ops to its state under the
/// file's limits gives `end`; the replica takes the DIFF's chain, the room's at `to_version`; and
/// the digest of `end` is the CATCHUP's `folded` exactly when the scenario `holds`. `replay`, the
/// other form of the same answer, leads from `start` to the same state and chain, one chained
/// DIFF per version.
@Suite(.unitTests) struct FoldedCatchupVectorTests {
    static let doc = try! JSON.parse(file: Vectors.directory.appendingPathComponent("chain.json").path)
    static let limits = Vectors.limits(from: doc["limits"]!)
    static let scenarios = doc["foldedCatchups"]?.array ?? []

    @Test func scenariosArePresent() {
        #expect(Self.scenarios.count >= 2)
        #expect(Self.scenarios.contains { $0["holds"] == .bool(true) && $0["replay"] != nil })
        #expect(Self.scenarios.contains { $0["holds"] == .bool(false) })
    }

    /// One frame of a scenario: decoded as version 3 to its `message`, encoded back to its bytes.
    static func decode(_ json: JSON, _ context: String) throws -> Message {
        let bytes = JSONForm.bytes(fromHex: json["hex"]!.string!)
        let message = try FrameDecoder.decode(frame: bytes, limits: limits, version: 3)
        #expect(JSONForm.vectorMessage(message) == json["message"], "\(context)")
        #expect(FrameEncoder().encode(message) == bytes, "\(context)")
        return message
    }

    /// A state of a scenario: its snapshot (checked against its canonical encoding and digest)
    /// and the chain the replica holds with it.
    static func state(_ json: JSON, _ context: String) throws -> (snapshot: RoomSnapshot, chain: RoomChain) {
        let snapshot = try JSONForm.snapshot(from: json["snapshot"]!)
        #expect(JSONForm.hex(snapshot.canonicalEncoding) == json["hex"]!.string, "\(context)")
        #expect(snapshot.digest.description == json["digest"]!.string, "\(context)")
        let chain = try #require(RoomChain(bytes: JSONForm.bytes(fromHex: json["chain"]!.string!)), "\(context)")
        return (snapshot, chain)
    }

    /// F of §9: the DIFF as versions 1 and 2 encode it, which a chain is computed over.
    static func chainInput(_ room: String, _ epoch: UInt64, _ version: UInt64, _ ops: [SnapshotOperation]) -> [UInt8] {
        FrameEncoder().encode(.diff(room: room, epoch: epoch, version: version, ops: ops))
    }

    @Test(arguments: scenarios.indices)
    func foldedCatchup(_ index: Int) throws {
        let scenario = Self.scenarios[index]
        let context = "foldedCatchups[\(index)]: \(scenario["comment"]!.string!)"
        let (startSnapshot, startChain) = try Self.state(scenario["start"]!, context + ", start")
        let (endSnapshot, endChain) = try Self.state(scenario["end"]!, context + ", end")
        let from = scenario["start"]!["version"]!.uint!
        let to = scenario["end"]!["version"]!.uint!

        guard
            case .catchup(_, let room, let epoch, let catchupFrom, let catchupTo, .folded(let digest)?) = try Self.decode(
                scenario["catchup"]!, context + ", CATCHUP")
        else {
            Issue.record("\(context): the CATCHUP is not of the folded form")
            return
        }
        #expect(room == scenario["room"]!.string && epoch == scenario["epoch"]!.uint, "\(context)")
        #expect(catchupFrom == from && catchupTo == to && to >= from + 2, "\(context)")

        // Exactly one DIFF follows, at to_version (not from_version + 1).
        guard case .diff(let diffRoom, let diffEpoch, let version, let ops, let chain?) = try Self.decode(scenario["diff"]!, context + ", DIFF") else {
            Issue.record("\(context): the folded CATCHUP's DIFF is not a version 3 DIFF")
            return
        }
        #expect(diffRoom == room && diffEpoch == epoch && version == to, "\(context)")
        // Its chain is not one the replica can compute from what it holds: it takes it.
        #expect(startChain.next(frame: Self.chainInput(room, epoch, version, ops)) != chain, "\(context)")
        #expect(chain == endChain, "\(context): the chain taken")

        var replica = startSnapshot
        try replica.apply(ops, limits: Self.limits.model)
        try replica.checkInvariants()
        #expect(replica == endSnapshot, "\(context)")
        #expect(JSONForm.snapshot(replica) == scenario["end"]!["snapshot"], "\(context)")
        // The digest check stands in for the chain check.
        #expect((replica.digest == digest) == (scenario["holds"] == .bool(true)), "\(context)")

        guard let replay = scenario["replay"]?.array else { return }
        // The replay form of the same answer: the CATCHUP, then one DIFF per version, each chained.
        guard
            case .catchup(_, room, epoch, from, to, .replay?) = try Self.decode(replay[0], context + ", replay CATCHUP")
        else {
            Issue.record("\(context): the replay's CATCHUP is not the same answer's replay form")
            return
        }
        #expect(UInt64(replay.count - 1) == to - from, "\(context): to_version − from_version DIFFs")
        var replayed = startSnapshot
        var held = startChain
        for (offset, entry) in replay.dropFirst().enumerated() {
            guard case .diff(room, epoch, let version, let ops, let chain?) = try Self.decode(entry, context + ", replay DIFF") else {
                Issue.record("\(context): replay entry \(offset + 1) is not a version 3 DIFF of the room")
                return
            }
            #expect(version == from + UInt64(offset) + 1, "\(context)")
            held = held.next(frame: Self.chainInput(room, epoch, version, ops))
            #expect(held == chain, "\(context): the chain after version \(version)")
            try replayed.apply(ops, limits: Self.limits.model)
        }
        #expect(replayed == replica && replayed.digest == digest, "\(context): both forms reach the room at \(to)")
        #expect(held == chain, "\(context): both forms hold the same chain")
    }
}
