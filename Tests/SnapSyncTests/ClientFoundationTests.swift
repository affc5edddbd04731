// An app imports Foundation (UIKit does) next to SnapSync. The model's operation type is named
// `SnapshotOperation`, not `Operation`, because Foundation has an `Operation` (NSOperation) and the
// unqualified name would be ambiguous in every such file: this file compiling is the check.
#if canImport(Foundation)
    import Foundation
    import SnapSync
    import Testing
    import SnapSyncTestThreads

    @Suite("Client: Foundation interop and README", .unitTests)
    struct ClientFoundationTests {
        @Test("the model's names do not clash with Foundation's")
        func noClashWithFoundation() throws {
            let ops: [SnapshotOperation] = [.appendSections(["s"]), .appendItems(["a"], toSection: nil)]
            var snapshot = RoomSnapshot()
            try snapshot.apply(ops)
            #expect(snapshot.itemIdentifiers == ["a"])
            #expect(Operation.self != BlockOperation.self)  // Foundation's Operation is still reachable
        }

        @Test("ItemIndexPath converts to and from Foundation's IndexPath")
        func foundationIndexPath() {
            let path = ItemIndexPath(item: 7, section: 2)
            #expect(path.indexPath.count == 2)
            #expect(path.indexPath[0] == 2 && path.indexPath[1] == 7)
            #expect(ItemIndexPath(path.indexPath) == path)
        }

        @Test("the README's client example is exactly Sources/snapsync-example/main.swift")
        func readmeExample() throws {
            // This file is Tests/SnapSyncTests/<name>.swift: the root is two levels up.
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
            let program = try String(contentsOf: root.appendingPathComponent("Sources/snapsync-example/main.swift"), encoding: .utf8)
            guard let section = readme.range(of: "\n## Client library\n") else {
                Issue.record("README.md has no \"## Client library\" section")
                return
            }
            let rest = readme[section.upperBound...]
            let body = rest.range(of: "\n## ").map { rest[..<$0.lowerBound] } ?? rest
            guard let open = body.range(of: "```swift\n"), let close = body[open.upperBound...].range(of: "\n```") else {
                Issue.record("the Client library section has no ```swift code block")
                return
            }
            let block = String(body[open.upperBound..<close.lowerBound]) + "\n"
            #expect(block == program, "README's example and main.swift differ: copy main.swift into the README")
        }
    }
#endif
