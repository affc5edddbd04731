// `SectionSnapshot`: UIKit's section snapshot names, with typed errors where UIKit crashes.

import Testing
import SnapSyncTestThreads
import SnapSyncModel

@Suite(.unitTests) struct SectionSnapshotTests {
    /// The seeds' outline screen: root categories with children.
    func emoji() throws -> SectionSnapshot {
        var s = SectionSnapshot()
        try s.append(["smileys", "animals", "food"])
        try s.append(["grin", "wink"], to: "smileys")
        try s.append(["cat", "dog"], to: "animals")
        try s.append(["tabby"], to: "cat")
        return s
    }

    @Test func buildsAnOutlineWithAppleNames() throws {
        let s = try emoji()
        #expect(s.items == ["smileys", "grin", "wink", "animals", "cat", "tabby", "dog", "food"])
        #expect(s.rootItems == ["smileys", "animals", "food"])
        #expect(s.levels == [0, 1, 1, 0, 1, 2, 1, 0])
        #expect(s.parent(of: "tabby") == "cat")
        #expect(s.parent(of: "food") == nil)
        #expect(s.level(of: "tabby") == 2)
        #expect(s.level(of: "nope") == nil)
        #expect(s.children(of: "animals") == ["cat", "dog"])
        #expect(s.contains("dog"))
        #expect(!s.contains("nope"))
        #expect(s.index(of: "dog") == 6)
        #expect(s.count == 8)
        #expect(s.isOutline)
        #expect(
            s.visualDescription() == """
                SectionSnapshot: 8 items
                ├─ smileys
                │  ├─ grin
                │  └─ wink
                ├─ animals
                │  ├─ cat
                │  │  └─ tabby
                │  └─ dog
                └─ food

                """)
    }

    @Test func insertsAreSiblings() throws {
        var s = try emoji()
        try s.insert(["lion"], before: "dog")
        try s.insert(["cow"], after: "cat")
        #expect(s.children(of: "animals") == ["cat", "cow", "lion", "dog"])
        try s.insert(["travel"], after: "animals")
        #expect(s.rootItems == ["smileys", "animals", "travel", "food"])
    }

    @Test func deleteTakesDescendantsAndForgivesListedDescendants() throws {
        var s = try emoji()
        try s.delete(["tabby", "animals", "cat", "grin", "grin"])
        #expect(s.items == ["smileys", "wink", "food"])
        s.deleteAll()
        #expect(s.isEmpty)
        #expect(s == SectionSnapshot())
    }

    @Test func crashConditionsAreTypedErrors() throws {
        let s = try emoji()
        func refused(_ violation: BatchError.Violation, sourceLocation: SourceLocation = #_sourceLocation, _ body: (inout SectionSnapshot) throws -> Void) {
            var copy = s
            do {
                try body(&copy)
                Issue.record("accepted, expected \(violation)", sourceLocation: sourceLocation)
            } catch {
                #expect(error as? BatchError == BatchError(operationIndex: 0, violation: violation), sourceLocation: sourceLocation)
            }
            #expect(copy == s, sourceLocation: sourceLocation)
        }
        refused(.parentNotFound("nope")) { try $0.append(["x"], to: "nope") }
        refused(.duplicateItem("cat")) { try $0.append(["x", "cat"], to: "food") }
        refused(.duplicateItem("x")) { try $0.append(["x", "x"]) }
        refused(.anchorItemNotFound("nope")) { try $0.insert(["x"], before: "nope") }
        refused(.anchorItemNotFound("nope")) { try $0.insert(["x"], after: "nope") }
        refused(.itemNotFound("nope")) { try $0.delete(["cat", "nope"]) }
        refused(.parentNotFound("nope")) { try $0.replace(childrenOf: "nope", using: SectionSnapshot()) }
        refused(.duplicateItem("grin")) { try $0.replace(childrenOf: "animals", using: try SectionSnapshot(["grin"])) }
    }

    @Test func replaceChildrenAndSubSnapshots() throws {
        var s = try emoji()
        let cats = try #require(s.snapshot(of: "cat", includingParent: true))
        #expect(cats.items == ["cat", "tabby"])
        #expect(cats.levels == [0, 1])
        let animals = try #require(s.snapshot(of: "animals"))
        #expect(animals.items == ["cat", "tabby", "dog"])
        #expect(animals.rootItems == ["cat", "dog"])
        #expect(s.snapshot(of: "food")?.isEmpty == true)
        #expect(s.snapshot(of: "nope") == nil)

        var replacement = try SectionSnapshot(["bird", "cat"])
        try replacement.append(["kitten", "tabby"], to: "cat")
        try s.replace(childrenOf: "animals", using: replacement)
        #expect(s.items == ["smileys", "grin", "wink", "animals", "bird", "cat", "kitten", "tabby", "food"])
        #expect(s.level(of: "tabby") == 2)
        #expect(s.parent(of: "bird") == "animals")
        try s.replace(childrenOf: "smileys", using: SectionSnapshot())
        #expect(s.children(of: "smileys") == [])
    }

    @Test func snapshotSectionsRoundTrip() throws {
        let emoji = try emoji()
        var room = try RoomSnapshot([(SnapshotElement("outline"), []), (SnapshotElement("list"), ["a"])])
        let ops = try room.operations(replacingSection: "outline", with: emoji, limits: .default)
        try room.apply(ops)
        #expect(room.sectionSnapshot(of: "outline") == emoji)
        #expect(room.itemIdentifiers(inSection: "outline") == emoji.items)
        #expect(room.sectionSnapshot(of: "list")?.items == ["a"])
        #expect(room.sectionSnapshot(of: "nope") == nil)
        // The wire form: elements and levels, then back.
        var decoded = try SectionSnapshot(emoji.elements)
        try decoded.setOutlineLevels(emoji.levels, maxOutlineDepth: 64)
        #expect(decoded == emoji)
    }
}
