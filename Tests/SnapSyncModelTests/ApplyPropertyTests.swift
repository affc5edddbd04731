// Property: random batches applied to a RoomSnapshot and to the naive ReferenceModel agree on the
// result, on the error (rule and operation index) and on the encoded size; the invariants hold
// after every batch, and a rejected batch changes nothing.

import Testing
import SnapSyncTestThreads
import SnapSyncModel

@Suite(.unitTests) struct ApplyPropertyTests {
    /// Tight limits, so every limit is hit now and then.
    static let tight = SnapshotLimits(maxIdentifierBytes: 8, maxPayloadBytes: 8, maxItems: 20, maxSections: 6, maxSnapshotBytes: 200)

    @Test(arguments: [(1, tight), (2, tight), (3, tight), (4, .unlimited), (5, .unlimited), (6, .default)] as [(UInt64, SnapshotLimits)])
    func randomBatchesAgreeWithTheReferenceModel(seed: UInt64, limits: SnapshotLimits) throws {
        var random = RandomOperations(seed: seed)
        var s = RoomSnapshot()
        var model = ReferenceModel()
        var accepted = 0, rejected = 0
        var seenViolations = Set<String>()
        for round in 0..<600 {
            let batch = random.batch(for: model, limits: limits)
            let before = s
            var modelError: BatchError?
            do { try model.apply(batch, limits: limits) } catch { modelError = error }
            var snapshotError: BatchError?
            do { try s.apply(batch, limits: limits) } catch { snapshotError = error }
            #expect(snapshotError == modelError, "seed \(seed), round \(round): \(batch)")
            try s.checkInvariants()
            #expect(matches(s, model), "seed \(seed), round \(round): \(batch)\n\(s.visualDescription())")
            if let snapshotError {
                rejected += 1
                seenViolations.insert("\(snapshotError.violation)".split(separator: " ").prefix(2).joined(separator: " "))
                #expect(s == before)
            } else {
                accepted += 1
            }
            // Keep states small enough to stay interesting under the unlimited runs.
            if s.numberOfItems > 60 { s.deleteAllItems(); model = ReferenceModel() }
        }
        // The generator must exercise both outcomes, or the property says little.
        #expect(accepted > 60, "accepted \(accepted)")
        #expect(rejected > 50, "rejected \(rejected)")
    }

    @Test func everyViolationKindOccursUnderTightLimits() throws {
        var kinds = Set<String>()
        for seed in UInt64(1)...3 {
            var random = RandomOperations(seed: seed)
            var s = RoomSnapshot()
            var model = ReferenceModel()
            for _ in 0..<600 {
                let batch = random.batch(for: model, limits: Self.tight)
                try? model.apply(batch, limits: Self.tight)
                do { try s.apply(batch, limits: Self.tight) } catch { kinds.insert(Self.kind(error.violation)) }
            }
        }
        #expect(
            kinds == [
                "duplicateSection", "duplicateItem", "sectionNotFound", "itemNotFound", "anchorSectionNotFound",
                "anchorItemNotFound", "noSections", "anchorIsSelf", "identifierTooLong", "payloadTooLarge",
                "tooManyItems", "tooManySections", "snapshotTooLarge",
            ])
    }

    static func kind(_ v: BatchError.Violation) -> String {
        switch v {
        case .duplicateSection: "duplicateSection"
        case .duplicateItem: "duplicateItem"
        case .sectionNotFound: "sectionNotFound"
        case .itemNotFound: "itemNotFound"
        case .anchorSectionNotFound: "anchorSectionNotFound"
        case .anchorItemNotFound: "anchorItemNotFound"
        case .noSections: "noSections"
        case .anchorIsSelf: "anchorIsSelf"
        case .identifierTooLong: "identifierTooLong"
        case .payloadTooLarge: "payloadTooLarge"
        case .tooManyItems: "tooManyItems"
        case .tooManySections: "tooManySections"
        case .snapshotTooLarge: "snapshotTooLarge"
        case .parentNotFound: "parentNotFound"
        case .moveIntoOwnSubtree: "moveIntoOwnSubtree"
        case .outlineTooDeep: "outlineTooDeep"
        }
    }
}
