// Property: random batches mixing the outline operations with the flat ones, applied to a
// RoomSnapshot and to the naive ReferenceModel (levels in depth-first order), agree on the result
// (hierarchy included), the error and the encoded size; the invariants (every parent an earlier
// item of the same section one level up, no cycle, depth-first order, unique identifiers, exact
// counts) hold after every operation; a rejected batch changes nothing.

import SnapSyncTestSupport
import Testing
import SnapSyncTestThreads
@testable import SnapSyncModel

@Suite(.unitTests) struct OutlinePropertyTests {
    static let tight = SnapshotLimits(maxIdentifierBytes: 8, maxPayloadBytes: 8, maxItems: 24, maxSections: 5, maxSnapshotBytes: 260, maxOutlineDepth: 3)

    @Test(arguments: [(61, tight), (62, tight), (63, .unlimited), (64, .default)] as [(UInt64, SnapshotLimits)])
    func randomOutlineBatchesAgreeWithTheReferenceModel(seed: UInt64, limits: SnapshotLimits) throws {
        var random = RandomOperations(seed: seed)
        var s = random.forest(sections: 3, items: 20, universe: 30, maxDepth: 3)
        var model = ReferenceModel(s)
        var accepted = 0, rejected = 0, nested = 0
        for round in 0..<700 {
            let batch = random.outlineBatch(for: model, limits: limits)
            let before = s
            var modelError: BatchError?
            do { try model.apply(batch, limits: limits) } catch { modelError = error }
            var snapshotError: BatchError?
            do { try s.apply(batch, limits: limits) } catch { snapshotError = error }
            #expect(snapshotError == modelError, "seed \(seed), round \(round): \(batch)\n\(before.visualDescription())")
            try s.checkInvariants()
            #expect(matches(s, model), "seed \(seed), round \(round): \(batch)\n\(s.visualDescription())")
            #expect(s.canonicalEncoding.count == s.canonicalByteCount)
            if snapshotError != nil {
                rejected += 1
                #expect(s == before)
                #expect(s.digest == before.digest)
            } else {
                accepted += 1
            }
            if s.isOutline { nested += 1 }
            if s.numberOfItems > 40 || s.numberOfItems < 3 {
                s = random.forest(sections: 3, items: 20, universe: 30, maxDepth: 3)
                model = ReferenceModel(s)
            }
        }
        #expect(accepted > 100, "accepted \(accepted)")
        #expect(rejected > 50, "rejected \(rejected)")
        #expect(nested > 200, "an outline in only \(nested) rounds")
    }

    /// Every operation alone, so that the invariants are checked after each one.
    @Test(arguments: [UInt64(65), 66])
    func invariantsHoldAfterEveryOperation(seed: UInt64) throws {
        var random = RandomOperations(seed: seed)
        var s = random.forest(sections: 3, items: 25, universe: 30)
        var model = ReferenceModel(s)
        for round in 0..<1500 {
            let op = random.outlineOperation(in: model)
            let before = s
            if (try? s.apply(op, limits: Self.tight)) != nil {
                try model.apply([op], limits: Self.tight)
            } else {
                #expect(s == before)
            }
            try s.checkInvariants()
            #expect(matches(s, model), "seed \(seed), round \(round): \(op)")
            if s.numberOfItems > 40 || s.numberOfSections == 0 {
                s = random.forest(sections: 3, items: 25, universe: 30)
                model = ReferenceModel(s)
            }
        }
    }

    @Test func everyOutlineViolationOccurs() throws {
        var kinds = Set<String>()
        for seed in UInt64(61)...62 {
            var random = RandomOperations(seed: seed)
            var s = RoomSnapshot()
            var model = ReferenceModel()
            for _ in 0..<700 {
                let batch = random.outlineBatch(for: model, limits: Self.tight)
                try? model.apply(batch, limits: Self.tight)
                do { try s.apply(batch, limits: Self.tight) } catch { kinds.insert(ApplyPropertyTests.kind(error.violation)) }
                if s.numberOfItems > 60 { s.deleteAllItems(); model = ReferenceModel() }
            }
        }
        #expect(
            kinds.isSuperset(of: ["parentNotFound", "moveIntoOwnSubtree", "outlineTooDeep", "itemNotFound", "duplicateItem", "snapshotTooLarge"]), "\(kinds)")
    }
}
