import Foundation
import Testing
import SnapSyncTestThreads

/// Every fuzz target over its seeds, its corpus and every input that ever crashed it
/// (Tests/Fuzz/{seeds,corpus,crashes}/<target>/), through the same entry points as the
/// sanitized fuzzer but without fuzzing: a fixed crash stays fixed, and a law that a change
/// breaks on a known input fails here. New crash inputs go to crashes/<target>/ (scripts/fuzz
/// writes them there).
@Suite(.unitTests) struct FuzzReplayTests {
    /// Tests/Fuzz, found from this file (Tests/Fuzz/Sources/Replay/).
    static let fuzzDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The input files of one kind for one target, sorted; none when the directory is absent
    /// (crashes/<target>/ exists only once the target has crashed).
    static func inputs(_ kind: String, _ target: FuzzTarget) -> [URL] {
        let directory = fuzzDirectory.appendingPathComponent(kind).appendingPathComponent(target.rawValue)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { !$0.hasPrefix(".") && !$0.hasSuffix(".md") }.sorted()
            .map { directory.appendingPathComponent($0) }
    }

    @Test(arguments: FuzzTarget.allCases)
    func seedsCorpusAndCrashesReplay(_ target: FuzzTarget) throws {
        #expect(!Self.inputs("seeds", target).isEmpty, "no seeds for \(target.rawValue)")
        for kind in ["seeds", "corpus", "crashes"] {
            for file in Self.inputs(kind, target) {
                let input = try [UInt8](Data(contentsOf: file))
                do {
                    try target.run(input)
                } catch {
                    Issue.record("\(kind)/\(target.rawValue)/\(file.lastPathComponent): \(error)")
                }
            }
        }
    }
}
