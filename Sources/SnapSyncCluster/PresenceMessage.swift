package import SnapSyncWire

// The messages nodes exchange about presence over NATS core subjects (Protocol/CLUSTER.md,
// "Presence"): never stored, so a node's members end with it. Encoded with the wire protocol's
// primitives (PROTOCOL.md §2: big-endian integers, minimal LEB128 varints, length-prefixed bytes).

/// One node incarnation: a random tag chosen at each start, which is also the high 32 bits of
/// its session ids (so of its members' ids), and a random 64-bit incarnation that tells apart two
/// processes that drew the same tag.
package struct PresenceNode: Hashable, Sendable, CustomStringConvertible {
    package var tag: UInt32
    package var incarnation: UInt64

    package init(tag: UInt32, incarnation: UInt64) {
        self.tag = tag
        self.incarnation = incarnation
    }

    /// A fresh one: a tag in 1...2³¹−1 (so session ids stay below 2⁶³), a nonzero incarnation.
    package static func random() -> PresenceNode {
        PresenceNode(tag: UInt32.random(in: 1...0x7fff_ffff), incarnation: UInt64.random(in: 1...UInt64.max))
    }

    /// The tag as 8 lowercase hex digits: how logs and the node's subject name it.
    package var description: String {
        let hex = String(tag, radix: 16)
        return String(repeating: "0", count: max(0, 8 - hex.count)) + hex
    }
}

/// One local change of a room's presence, as CHANGES carries it.
package enum PresenceUpdate: Hashable, Sendable {
    /// The member joined or changed its state: its whole entry.
    case member(PresenceMember)
    /// The member left, for `reason`.
    case left(memberID: UInt64, reason: PresenceDeparture)
}

/// A presence message between nodes (Protocol/CLUSTER.md, "Presence").
package enum PresenceMessage: Hashable, Sendable {
    /// On `snapsync.presence.nodes`, every heartbeat interval: the node is alive. `name` is
    /// for operators' logs only (host and pid).
    case heartbeat(node: PresenceNode, name: String)
    /// On the room's subject: `node`'s local changes of `room`. `sequence` is the node's
    /// counter of presence messages (all rooms), `previous` the sequence of its previous
    /// CHANGES of this room, 0 when it had no member of the room before this one.
    case changes(node: PresenceNode, room: String, sequence: UInt64, previous: UInt64, updates: [PresenceUpdate])
    /// On the room's subject (every node with members of the room answers) or on a node's own
    /// subject (that node answers), with a reply subject: send me your members of `room`.
    case sync(node: PresenceNode, room: String)
    /// To a SYNC's reply subject, in one or more parts (`final` on the last): all of `node`'s
    /// members of `room` as of its message `position` (the sequence of its last CHANGES of
    /// the room, or its counter now when it has no member of it).
    case snapshot(node: PresenceNode, room: String, position: UInt64, final: Bool, members: [PresenceMember])

    /// The format byte every message starts with; a receiver ignores other formats.
    package static let format: UInt8 = 1

    package var node: PresenceNode {
        switch self {
        case .heartbeat(let node, _), .changes(let node, _, _, _, _), .sync(let node, _), .snapshot(let node, _, _, _, _): node
        }
    }

    package var kind: UInt8 {
        switch self {
        case .heartbeat: 1
        case .changes: 2
        case .sync: 3
        case .snapshot: 4
        }
    }

    /// - Complexity: O(size of the message).
    package func encode() -> [UInt8] {
        var out: [UInt8] = [Self.format, kind]
        out.appendBigEndian(node.tag)
        out.appendBigEndian(node.incarnation)
        switch self {
        case .heartbeat(_, let name):
            out.appendString(name)
        case .changes(_, let room, let sequence, let previous, let updates):
            out.appendString(room)
            out.appendVarint(sequence)
            out.appendVarint(previous)
            out.appendVarint(updates.count)
            for update in updates {
                switch update {
                case .member(let member):
                    out.append(0)
                    out.appendPresenceEntry(member)
                case .left(let memberID, let reason):
                    out.append(1)
                    out.appendVarint(memberID)
                    out.append(reason.rawValue)
                }
            }
        case .sync(_, let room):
            out.appendString(room)
        case .snapshot(_, let room, let position, let final, let members):
            out.appendString(room)
            out.appendVarint(position)
            out.append(final ? 1 : 0)
            out.appendVarint(members.count)
            for member in members { out.appendPresenceEntry(member) }
        }
        return out
    }

    /// Why bytes are not a presence message.
    package enum DecodingError: Error, Equatable {
        /// Another format (a newer node): ignored, not an error to log each time.
        case unknownFormat(UInt8)
        case unknownKind(UInt8)
        case malformed(String)
    }

    /// - Complexity: O(size of the message).
    package static func decode(_ bytes: [UInt8]) throws(DecodingError) -> PresenceMessage {
        guard let format = bytes.first else { throw .malformed("empty") }
        guard format == Self.format else { throw .unknownFormat(format) }
        var unknownKind: UInt8?
        let decoded: PresenceMessage?
        do {
            decoded = try bytes.withUnsafeBufferPointer { (buffer) throws(ByteCursor.Problem) -> PresenceMessage? in
                var cursor = ByteCursor(buffer, offset: 1)
                let kind = try cursor.u8()
                let node = PresenceNode(tag: try cursor.u32(), incarnation: try cursor.u64())
                let message: PresenceMessage
                switch kind {
                case 1:
                    message = .heartbeat(node: node, name: try cursor.string())
                case 2:
                    let room = try cursor.string()
                    let sequence = try cursor.varint()
                    let previous = try cursor.varint()
                    let count = try cursor.count()
                    var updates: [PresenceUpdate] = []
                    updates.reserveCapacity(count)
                    for _ in 0..<count {
                        switch try cursor.u8() {
                        case 0: updates.append(.member(try cursor.presenceEntry()))
                        case 1: updates.append(.left(memberID: try cursor.varint(), reason: PresenceDeparture(byte: try cursor.u8())))
                        default: throw .truncated
                        }
                    }
                    message = .changes(node: node, room: room, sequence: sequence, previous: previous, updates: updates)
                case 3:
                    message = .sync(node: node, room: try cursor.string())
                case 4:
                    let room = try cursor.string()
                    let position = try cursor.varint()
                    let final = try cursor.u8() != 0
                    let count = try cursor.count()
                    var members: [PresenceMember] = []
                    members.reserveCapacity(count)
                    for _ in 0..<count { members.append(try cursor.presenceEntry()) }
                    message = .snapshot(node: node, room: room, position: position, final: final, members: members)
                default:
                    unknownKind = kind
                    return nil
                }
                guard cursor.isAtEnd else { throw .truncated }
                return message
            }
        } catch {
            throw .malformed("\(error)")
        }
        guard let decoded else { throw .unknownKind(unknownKind ?? 0) }
        return decoded
    }
}

extension [UInt8] {
    /// A presence entry, as PRESENCE's `member` (PROTOCOL.md §11.27): varint member id, string
    /// principal, varint joined-at milliseconds, bytes state.
    fileprivate mutating func appendPresenceEntry(_ member: PresenceMember) {
        appendVarint(member.memberID)
        appendString(member.principal)
        appendVarint(member.joinedAt)
        appendBytes(member.state)
    }
}

extension ByteCursor {
    fileprivate mutating func bytesField() throws(Problem) -> [UInt8] {
        let length = try varint()
        guard length <= UInt64(remaining) else { throw .truncated }
        return Array(try raw(Int(length)))
    }

    fileprivate mutating func string() throws(Problem) -> String {
        String(decoding: try bytesField(), as: UTF8.self)
    }

    /// A count of items of at least one byte each: never more than the bytes left.
    fileprivate mutating func count() throws(Problem) -> Int {
        let count = try varint()
        guard count <= UInt64(remaining) else { throw .truncated }
        return Int(count)
    }

    fileprivate mutating func presenceEntry() throws(Problem) -> PresenceMember {
        PresenceMember(memberID: try varint(), principal: try string(), joinedAt: try varint(), state: try bytesField())
    }
}
