import Foundation
import SnapSyncModel
import SnapSyncWire

/// A parsed JSON value. Integers are kept exact up to 2^64 - 1, which `JSONSerialization` does
/// not promise and the vectors need (varints are 64-bit).
enum JSON: Hashable, Decodable, CustomStringConvertible {
    case null
    case bool(Bool)
    case uint(UInt64)
    case int(Int64)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let v = try? c.decode(Bool.self) {
            self = .bool(v)
        } else if let v = try? c.decode(UInt64.self) {
            self = .uint(v)
        } else if let v = try? c.decode(Int64.self) {
            self = .int(v)
        } else if let v = try? c.decode(String.self) {
            self = .string(v)
        } else if let v = try? c.decode([JSON].self) {
            self = .array(v)
        } else {
            self = .object(try c.decode([String: JSON].self))
        }
    }

    static func parse(file path: String) throws -> JSON {
        try JSONDecoder().decode(JSON.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    subscript(key: String) -> JSON? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    var string: String? { if case .string(let s) = self { s } else { nil } }
    var uint: UInt64? { if case .uint(let v) = self { v } else { nil } }
    var array: [JSON]? { if case .array(let a) = self { a } else { nil } }

    var description: String {
        switch self {
        case .null: "null"
        case .bool(let b): "\(b)"
        case .uint(let v): "\(v)"
        case .int(let v): "\(v)"
        case .string(let s): "\"\(s)\""
        case .array(let a): "[" + a.map(\.description).joined(separator: ",") + "]"
        case .object(let o): "{" + o.keys.sorted().map { "\"\($0)\":\(o[$0]!)" }.joined(separator: ",") + "}"
        }
    }
}

/// The JSON form of PROTOCOL.md ("JSON form"), written here from the spec so that a vector's
/// `message` is compared with what the Swift decoder produced.
enum JSONForm {
    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    static func bytes(fromHex hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            out.append(UInt8(hex[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    /// A byte string: text when it is valid UTF-8 with no C0, DEL or C1 control characters,
    /// else {"hex": ...}.
    static func bytes(_ b: [UInt8]) -> JSON {
        if let s = utf8(b),
            !s.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        {
            return .string(s)
        }
        return .object(["hex": .string(hex(b))])
    }

    /// The bytes as text when they are valid UTF-8 (decoding repairs invalid input, so the
    /// round trip differs exactly then). Avoids `String(validating:)`, which is macOS 15+.
    static func utf8(_ b: [UInt8]) -> String? {
        let s = String(decoding: b, as: UTF8.self)
        return s.utf8.elementsEqual(b) ? s : nil
    }

    static func element(_ e: SnapshotElement) -> JSON {
        .object(["id": bytes(e.id.bytes), "payload": bytes(e.payload.bytes)])
    }

    static func elements(_ es: [SnapshotElement]) -> JSON { .array(es.map(element)) }

    static func placement(_ p: SnapshotOperation.Placement) -> JSON {
        switch p {
        case .before(let a): .object(["side": .string("before"), "anchor": bytes(a.bytes)])
        case .after(let a): .object(["side": .string("after"), "anchor": bytes(a.bytes)])
        }
    }

    static func op(_ op: SnapshotOperation) -> JSON {
        var o: [String: JSON]
        switch op {
        case .appendSections(let e): o = ["op": .string("append_sections"), "elements": elements(e)]
        case .insertSections(let e, let p): o = ["op": .string("insert_sections"), "placement": placement(p), "elements": elements(e)]
        case .deleteSections(let ids): o = ["op": .string("delete_sections"), "ids": .array(ids.map { bytes($0.bytes) })]
        case .moveSection(let id, let p): o = ["op": .string("move_section"), "id": bytes(id.bytes), "placement": placement(p)]
        case .updateSections(let e): o = ["op": .string("update_sections"), "elements": elements(e)]
        case .appendItems(let e, let s): o = ["op": .string("append_items"), "section": s.map { bytes($0.bytes) } ?? .null, "elements": elements(e)]
        case .insertItems(let e, let p): o = ["op": .string("insert_items"), "placement": placement(p), "elements": elements(e)]
        case .deleteItems(let ids): o = ["op": .string("delete_items"), "ids": .array(ids.map { bytes($0.bytes) })]
        case .deleteAllItems: o = ["op": .string("delete_all_items")]
        case .moveItem(let id, let p): o = ["op": .string("move_item"), "id": bytes(id.bytes), "placement": placement(p)]
        case .moveItemToSection(let id, let s): o = ["op": .string("move_item_to_section"), "id": bytes(id.bytes), "section": bytes(s.bytes)]
        case .updateItems(let e, let k): o = ["op": .string("update_items"), "kind": .string(k == .reload ? "reload" : "reconfigure"), "elements": elements(e)]
        case .appendChildren(let e, let parent): o = ["op": .string("append_children"), "parent": bytes(parent.bytes), "elements": elements(e)]
        case .moveItemToParent(let id, let parent): o = ["op": .string("move_item_to_parent"), "id": bytes(id.bytes), "parent": bytes(parent.bytes)]
        }
        return .object(o)
    }

    static func snapshot(_ s: RoomSnapshot) -> JSON {
        .array(
            s.sections.map { section in
                let items = Array(s.items(inSection: section.id))
                return .object([
                    "id": bytes(section.id.bytes), "payload": bytes(section.payload.bytes),
                    "items": nested(items, levels: items.map { s.level(of: $0.id)! }),
                ])
            })
    }

    /// Depth-first items with their levels as the JSON form nests them (§14): the roots, each
    /// with "children" when it has any.
    static func nested(_ items: [SnapshotElement], levels: [Int]) -> JSON {
        // Built bottom-up: each item's children are the run after it one level deeper.
        func build(_ start: Int, _ level: Int) -> (JSON, Int) {
            var result: [JSON] = []
            var k = start
            while k < items.count, levels[k] == level {
                var node: [String: JSON] = ["id": bytes(items[k].id.bytes), "payload": bytes(items[k].payload.bytes)]
                let (children, next) = build(k + 1, level + 1)
                if case .array(let list) = children, !list.isEmpty { node["children"] = children }
                result.append(.object(node))
                k = next
            }
            return (.array(result), k)
        }
        return build(0, 0).0
    }

    /// The nested JSON items -> depth-first elements and levels.
    static func flattened(_ json: JSON, level: Int = 0) -> [(SnapshotElement, Int)] {
        (json.array ?? []).flatMap { item in
            [(element(from: item), level)] + flattened(item["children"] ?? .array([]), level: level + 1)
        }
    }

    static func sectionItems(_ items: SectionSnapshot) -> JSON {
        nested(items.elements, levels: items.levels)
    }

    static func opt(_ v: UInt64?) -> JSON { v.map { .uint($0) } ?? .null }

    static func message(_ m: Message) -> JSON {
        var o: [String: JSON] = ["type": .string(m.type.name)]
        switch m {
        case .hello(let versions, let clientName, let credentials):
            o["magic"] = .string("SNAP")
            o["versions"] = .array(versions.map { .uint($0) })
            o["client_name"] = .string(clientName)
            o["credentials"] = bytes(credentials)
        case .welcome(let version, let sessionID, let serverName, let limits):
            o["version"] = .uint(version)
            o["session_id"] = .uint(sessionID)
            o["server_name"] = .string(serverName)
            o["limits"] = .array(limits.map { .object(["key": .uint($0.key), "value": .uint($0.value)]) })
        case .error(let code, let message):
            o["code"] = .uint(code)
            o["message"] = .string(message)
        case .ping(let nonce), .pong(let nonce):
            o["nonce"] = .uint(nonce)
        case .join(let requestID, let room, let resume, let chain):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["resume"] =
                resume.map { position in
                    var fields: [String: JSON] = ["epoch": .uint(position.epoch), "version": .uint(position.version)]
                    if let chain { fields["chain"] = bytes(chain.bytes) }
                    return .object(fields)
                } ?? .null
        case .leave(let requestID, let room):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
        case .mutate(let requestID, let room, let expected, let writeID, let ops):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["expected_version"] = opt(expected)
            o["write_id"] = bytes(writeID)
            o["ops"] = .array(ops.map { JSONForm.op($0) })
        case .replace(let requestID, let room, let expected, let writeID, let snap):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["expected_version"] = opt(expected)
            o["write_id"] = bytes(writeID)
            o["snapshot"] = snapshot(snap)
        case .replaceSection(let requestID, let room, let expected, let writeID, let section, let items):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["expected_version"] = opt(expected)
            o["write_id"] = bytes(writeID)
            o["section"] = bytes(section.bytes)
            o["items"] = sectionItems(items)
        case .stats(let requestID):
            o["request_id"] = .uint(requestID)
        case .snapshot(let requestID, let room, let epoch, let version, let reason, let digest, let snap, let chain):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["epoch"] = .uint(epoch)
            o["version"] = .uint(version)
            o["reason"] = .string(reason == .initial ? "initial" : "resync")
            o["digest"] = bytes(digest.bytes)
            if let chain { o["chain"] = bytes(chain.bytes) }
            o["snapshot"] = snapshot(snap)
        case .catchup(let requestID, let room, let epoch, let from, let to, _):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["epoch"] = .uint(epoch)
            o["from_version"] = .uint(from)
            o["to_version"] = .uint(to)
        case .diff(let room, let epoch, let version, let ops, let chain):
            o["room"] = .string(room)
            o["epoch"] = .uint(epoch)
            o["version"] = .uint(version)
            o["ops"] = .array(ops.map { JSONForm.op($0) })
            if let chain { o["chain"] = bytes(chain.bytes) }
        case .ack(let requestID, let epoch, let version):
            o["request_id"] = .uint(requestID)
            o["epoch"] = .uint(epoch)
            o["version"] = .uint(version)
        case .reject(let requestID, let code, let opIndex, let identifier, let message):
            o["request_id"] = .uint(requestID)
            o["code"] = .uint(code)
            o["op_index"] = opt(opIndex)
            o["identifier"] = identifier.map { bytes($0.bytes) } ?? .null
            o["message"] = .string(message)
        case .statsReply(let requestID, let stats):
            o["request_id"] = .uint(requestID)
            o["stats"] = .array(stats.map { .object(["name": .string($0.name), "value": .uint($0.value)]) })
        case .auth(let requestID, let credentials):
            o["request_id"] = .uint(requestID)
            o["credentials"] = bytes(credentials)
        case .left(let room, let code, let message):
            o["room"] = .string(room)
            o["code"] = .uint(code)
            o["message"] = .string(message)
        case .drop(let requestID, let room):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
        case .setTTL(let requestID, let room, let seconds):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["seconds"] = .uint(seconds)
        case .verify(let requestID, let room):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
        case .digest(let requestID, let room, let epoch, let version, let digest, let chain):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["epoch"] = .uint(epoch)
            o["version"] = .uint(version)
            o["digest"] = bytes(digest.bytes)
            o["chain"] = bytes(chain.bytes)
        case .presenceWatch(let requestID, let room, let watch):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["watch"] = .uint(watch ? 1 : 0)
        case .presenceList(let requestID, let room, let after, let limit):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["after"] = .uint(after)
            o["limit"] = .uint(limit)
        case .setPresence(let requestID, let room, let state):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["state"] = bytes(state)
        case .presence(let requestID, let room, let count, let members, let next):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["count"] = .uint(count)
            o["members"] = .array(members.map(presenceMember))
            o["next"] = .uint(next)
        case .presenceDiff(let room, let count, let changes):
            o["room"] = .string(room)
            o["count"] = .uint(count)
            o["changes"] = .array(changes.map(presenceChange))
        case .window(let requestID, let room, let window):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["window"] = .array(window.map(sectionWindow))
        case .windowState(let requestID, let room, let epoch, let version, let chain, let window, let counts, let snap):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["epoch"] = .uint(epoch)
            o["version"] = .uint(version)
            o["chain"] = bytes(chain.bytes)
            o["window"] = .array(window.map(sectionWindow))
            o["counts"] = .array(counts.map { .uint($0) })
            o["snapshot"] = snapshot(snap)
        case .windowDiff(let requestID, let room, let epoch, let version, let window, let counts, let ops):
            o["request_id"] = .uint(requestID)
            o["room"] = .string(room)
            o["epoch"] = .uint(epoch)
            o["version"] = .uint(version)
            o["window"] = window.map { .array($0.map(sectionWindow)) } ?? .null
            o["counts"] = .array(counts.map { .object(["section": bytes($0.section.bytes), "items": .uint($0.items)]) })
            o["ops"] = .array(ops.map { JSONForm.op($0) })
        }
        return .object(o)
    }

    /// A section window in the JSON form (PROTOCOL.md §14).
    static func sectionWindow(_ window: SectionWindow) -> JSON {
        var o: [String: JSON] = ["section": bytes(window.section.bytes)]
        switch window.range {
        case .first(let count): o["first"] = .uint(count)
        case .last(let count): o["last"] = .uint(count)
        case .around(let anchor, let before, let after):
            o["around"] = bytes(anchor.bytes)
            o["before"] = .uint(before)
            o["after"] = .uint(after)
        }
        return .object(o)
    }

    /// A presence member in the JSON form (PROTOCOL.md §14).
    static func presenceMember(_ member: PresenceMember) -> JSON {
        .object([
            "member_id": .uint(member.memberID), "principal": .string(member.principal),
            "joined_at": .uint(member.joinedAt), "state": bytes(member.state),
        ])
    }

    static let presenceKinds = ["joined", "left", "state", "shown", "hidden"]

    /// A PRESENCE_DIFF change in the JSON form: its kind's name and its fields (§14).
    static func presenceChange(_ change: PresenceChange) -> JSON {
        var o: [String: JSON] = ["kind": .string(presenceKinds[Int(change.kind)])]
        switch change {
        case .joined(let member), .shown(let member): o["member"] = presenceMember(member)
        case .left(let id, let reason):
            o["member_id"] = .uint(id)
            o["reason"] = .uint(UInt64(reason))
        case .state(let id, let state):
            o["member_id"] = .uint(id)
            o["state"] = bytes(state)
        case .hidden(let id): o["member_id"] = .uint(id)
        }
        return .object(o)
    }

    /// Builds a RoomSnapshot from its JSON form (used by the replay set).
    static func snapshot(from json: JSON) throws -> RoomSnapshot {
        var sections: [(section: SnapshotElement, items: [SnapshotElement])] = []
        var levels: [Int] = []
        for s in json.array ?? [] {
            let items = flattened(s["items"] ?? .array([]))
            sections.append((element(from: s), items.map(\.0)))
            levels += items.map(\.1)
        }
        var snapshot = try RoomSnapshot(sections)
        if levels.contains(where: { $0 > 0 }) { try snapshot.setOutlineLevels(levels, maxOutlineDepth: .max) }
        return snapshot
    }

    static func byteString(from json: JSON) -> [UInt8] {
        if let s = json.string { return Array(s.utf8) }
        return bytes(fromHex: json["hex"]!.string!)
    }

    static func element(from json: JSON) -> SnapshotElement {
        SnapshotElement(SnapshotIdentifier(byteString(from: json["id"]!)), payload: SnapshotPayload(byteString(from: json["payload"]!)))
    }
}
