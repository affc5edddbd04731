import Foundation
import Testing
import SnapSyncTestThreads
import SnapSyncModel
@testable import SnapSyncWire

/// Protocol/vectors/windows.json's `models`: PROTOCOL.md §9 "Windows" pinned without a server.
/// For each, the Swift model must find the same window snapshot, counts and effective window as
/// the generator's reference model, before and after the batch; and the reference WINDOW_DIFF,
/// decoded, must take the one to the other, as the daemon's own diff must.
@Suite(.unitTests) struct WindowVectorTests {
    static let doc = try! JSON.parse(file: Vectors.directory.appendingPathComponent("windows.json").path)
    static let models: [JSON] = doc["models"]!.array!

    @Test(arguments: models.indices)
    func theModelFindsTheVectorsWindow(_ index: Int) throws {
        let m = Self.models[index]
        let context = "windows.json model #\(m["tcId"]!.uint!): \(m["description"]!.string!)"
        var room = try JSONForm.snapshot(from: m["room"]!)
        let window = m["window"]!.array!.map(Self.sectionWindow)
        let before = room.windowSnapshot(window)
        #expect(JSONForm.snapshot(before) == m["before"]!["snapshot"], "\(context): window before")
        #expect(room.sectionItemCounts.map { JSON.uint($0) } == m["before"]!["counts"]!.array, "\(context): counts before")

        try room.apply(m["ops"]!.array!.map(Self.op), limits: .unlimited)
        #expect(JSONForm.snapshot(room) == m["roomAfter"], "\(context): the room after")
        let effective = window.map { room.reanchored($0, previousRows: before.rootItems(inSection: $0.section) ?? []) }
        #expect(effective == m["after"]!["window"]!.array!.map(Self.sectionWindow), "\(context): the effective window")
        let after = room.windowSnapshot(effective)
        #expect(JSONForm.snapshot(after) == m["after"]!["snapshot"], "\(context): window after")
        #expect(room.sectionItemCounts.map { JSON.uint($0) } == m["after"]!["counts"]!.array, "\(context): counts after")
        let due = after != before || effective != window || m["before"]!["counts"] != m["after"]!["counts"]
        #expect(due == (m["frameDue"]! == .bool(true)), "\(context): frame due")

        // The reference model's frame and the daemon's diff both take the window across.
        if case .object = m["diff"] ?? .null {
            let frame = try FrameDecoder.decode(
                frame: JSONForm.bytes(fromHex: m["diff"]!["hex"]!.string!), accepting: .server, version: ProtocolVersion.current)
            guard case .windowDiff(_, _, _, _, _, _, let ops) = frame else {
                Issue.record("\(context): the diff is not a WINDOW_DIFF")
                return
            }
            var replica = before
            try replica.apply(ops, limits: .default)
            #expect(replica == after, "\(context): the reference WINDOW_DIFF")
        }
        var replica = before
        try replica.apply(before.difference(to: after, limits: .default), limits: .default)
        #expect(replica == after, "\(context): the daemon's diff")
    }

    static func id(_ json: JSON) -> SnapshotIdentifier { SnapshotIdentifier(JSONForm.byteString(from: json)) }

    static func sectionWindow(_ json: JSON) -> SectionWindow {
        let section = id(json["section"]!)
        if let count = json["first"]?.uint { return SectionWindow(section: section, range: .first(count)) }
        if let count = json["last"]?.uint { return SectionWindow(section: section, range: .last(count)) }
        return SectionWindow(section: section, range: .around(anchor: id(json["around"]!), before: json["before"]!.uint!, after: json["after"]!.uint!))
    }

    static func placement(_ json: JSON) -> SnapshotOperation.Placement {
        json["side"]!.string == "before" ? .before(id(json["anchor"]!)) : .after(id(json["anchor"]!))
    }

    /// An op in the JSON form (PROTOCOL.md §14), the inverse of `JSONForm.op`.
    static func op(_ json: JSON) -> SnapshotOperation {
        let elements = { (json["elements"]?.array ?? []).map(JSONForm.element(from:)) }
        let ids = { (json["ids"]?.array ?? []).map(id) }
        switch json["op"]!.string! {
        case "append_sections": return .appendSections(elements())
        case "insert_sections": return .insertSections(elements(), placement(json["placement"]!))
        case "delete_sections": return .deleteSections(ids())
        case "move_section": return .moveSection(id(json["id"]!), placement(json["placement"]!))
        case "update_sections": return .updateSections(elements())
        case "append_items": return .appendItems(elements(), toSection: json["section"].flatMap { $0 == .null ? nil : id($0) })
        case "insert_items": return .insertItems(elements(), placement(json["placement"]!))
        case "delete_items": return .deleteItems(ids())
        case "delete_all_items": return .deleteAllItems
        case "move_item": return .moveItem(id(json["id"]!), placement(json["placement"]!))
        case "move_item_to_section": return .moveItemToSection(id(json["id"]!), section: id(json["section"]!))
        case "update_items": return .updateItems(elements(), json["kind"]!.string == "reload" ? .reload : .reconfigure)
        case "append_children": return .appendChildren(elements(), toParent: id(json["parent"]!))
        case "move_item_to_parent": return .moveItemToParent(id(json["id"]!), parent: id(json["parent"]!))
        case let other: preconditionFailure("unknown op \(other)")
        }
    }
}
