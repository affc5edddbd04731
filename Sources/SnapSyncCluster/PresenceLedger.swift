package import SnapSyncWire

/// What the ledger asks of the hub and of the exchange.
package enum PresenceEffect: Hashable, Sendable {
    /// Another node's member of `room` joined or changed its state.
    case upsert(room: String, member: PresenceMember)
    /// Another node's member of `room` left (`reason`).
    case leave(room: String, memberID: UInt64, reason: PresenceDeparture)
    /// Ask `node` for its members of `room` again (a SYNC to its own subject): messages of it
    /// were missed.
    case resync(room: String, node: PresenceNode)
}

/// A node the ledger heard from, and what hearing it meant.
package enum NodeHeard: Hashable, Sendable {
    /// Heard before, and not lost since.
    case known
    /// First heard.
    case new
    /// Heard again after it was declared lost (a partition healed, a paused process): its
    /// members of the followed rooms are asked for again.
    case returned
}

/// Other nodes' presence as this node holds it (Protocol/CLUSTER.md, "Presence"): the nodes
/// heard and when, and per followed room, each node's members and the position of its last
/// message of the room. Pure: it is told what arrived and when, and answers with the effects
/// (`PresenceEffect`) that the exchange applies to the hub and to NATS. Loop thread.
package struct PresenceLedger {
    package struct NodeState: Hashable, Sendable {
        package var node: PresenceNode
        package var name: String
        package var lastHeard: ContinuousClock.Instant
    }

    /// One node's part of a followed room.
    struct Part {
        /// Its last message of the room applied: a CHANGES' sequence or a snapshot's position.
        var position: UInt64 = 0
        var members: Set<UInt64> = []
        /// A snapshot arriving in parts: its position and the members so far.
        var pending: (position: UInt64, members: [PresenceMember])?
    }

    /// The rooms this node follows (it has members of them), by name, then by node tag.
    private(set) var rooms: [String: [UInt32: Part]] = [:]
    /// Nodes heard and not lost, by tag.
    package private(set) var nodes: [UInt32: NodeState] = [:]
    /// Nodes declared lost, by tag, with when: so that one heard again is told apart (and
    /// resynced). Forgotten after `lostMemory`.
    private(set) var lost: [UInt32: ContinuousClock.Instant] = [:]
    /// How long a lost node is remembered: well beyond any pause that a node survives.
    static let lostMemory: Duration = .seconds(3600)

    package init() {}

    package var followedRooms: [String] { Array(rooms.keys) }

    /// Members of `room` the ledger holds for `tag`.
    package func members(room: String, tag: UInt32) -> Set<UInt64> { rooms[room]?[tag]?.members ?? [] }

    // MARK: Rooms

    /// This node gained a member of `room`: it follows the room's presence from now.
    package mutating func follow(room: String) {
        if rooms[room] == nil { rooms[room] = [:] }
    }

    /// This node has no member of `room` left: it stops following it; the entries held leave
    /// (no local member sees them).
    package mutating func unfollow(room: String) -> [PresenceEffect] {
        guard let parts = rooms.removeValue(forKey: room) else { return [] }
        return parts.values.flatMap { $0.members.sorted().map { PresenceEffect.leave(room: room, memberID: $0, reason: .disconnected) } }
    }

    // MARK: Nodes

    /// Any message of `node` was received at `now`: it is alive. A new incarnation of a known
    /// tag replaces the old one, whose members leave as lost.
    package mutating func heard(_ node: PresenceNode, name: String? = nil, now: ContinuousClock.Instant) -> (NodeHeard, [PresenceEffect]) {
        if var state = nodes[node.tag], state.node == node {
            state.lastHeard = now
            if let name { state.name = name }
            nodes[node.tag] = state
            return (.known, [])
        }
        var effects: [PresenceEffect] = []
        if nodes[node.tag] != nil { effects = dropMembers(of: node.tag, reason: .nodeLost) }
        nodes[node.tag] = NodeState(node: node, name: name ?? "", lastHeard: now)
        if lost.removeValue(forKey: node.tag) != nil {
            for room in rooms.keys.sorted() { effects.append(.resync(room: room, node: node)) }
            return (.returned, effects)
        }
        return (.new, effects)
    }

    /// Nodes not heard for `timeout` at `now`: declared lost, each once; every member of theirs
    /// leaves with `node_lost`. Lost nodes remembered past `lostMemory` are forgotten.
    /// - Complexity: O(nodes + followed rooms × lost nodes).
    package mutating func expire(now: ContinuousClock.Instant, timeout: Duration) -> (lost: [(state: NodeState, members: Int)], effects: [PresenceEffect]) {
        let silent = nodes.values.filter { now - $0.lastHeard >= timeout }.sorted { $0.node.tag < $1.node.tag }
        var lostNodes: [(state: NodeState, members: Int)] = []
        var effects: [PresenceEffect] = []
        for state in silent {
            nodes[state.node.tag] = nil
            lost[state.node.tag] = now
            let left = dropMembers(of: state.node.tag, reason: .nodeLost)
            lostNodes.append((state, left.count))
            effects += left
        }
        lost = lost.filter { now - $0.value < Self.lostMemory }
        return (lostNodes, effects)
    }

    /// Every member of `tag` in every followed room leaves for `reason`; its parts are dropped.
    private mutating func dropMembers(of tag: UInt32, reason: PresenceDeparture) -> [PresenceEffect] {
        var effects: [PresenceEffect] = []
        for room in rooms.keys.sorted() {
            guard let part = rooms[room]?.removeValue(forKey: tag) else { continue }
            effects += part.members.sorted().map { .leave(room: room, memberID: $0, reason: reason) }
        }
        return effects
    }

    // MARK: Messages

    /// A CHANGES of `node` for `room`. Applied when `room` is followed and the message is not
    /// older than what was applied. A `previous` that is not the last message applied means
    /// messages were missed (core NATS may drop): applied, and the node is asked again.
    package mutating func changes(
        node: PresenceNode, room: String, sequence: UInt64, previous: UInt64, updates: [PresenceUpdate]
    ) -> [PresenceEffect] {
        guard var parts = rooms[room] else { return [] }
        var part = parts[node.tag]
        var effects: [PresenceEffect] = []
        if let known = part, sequence <= known.position { return [] }
        if previous == 0 {
            // The node had no member of the room before this message: any still held left
            // while their messages were missed.
            if let known = part {
                effects += known.members.sorted().map { .leave(room: room, memberID: $0, reason: .disconnected) }
                part?.members = []
            }
        } else if part?.position != previous {
            effects.append(.resync(room: room, node: node))
        }
        var current = part ?? Part()
        current.position = sequence
        for update in updates {
            switch update {
            case .member(let member):
                current.members.insert(member.memberID)
                effects.append(.upsert(room: room, member: member))
            case .left(let memberID, let reason):
                current.members.remove(memberID)
                effects.append(.leave(room: room, memberID: memberID, reason: reason))
            }
        }
        parts[node.tag] = current
        rooms[room] = parts
        return effects
    }

    /// A part of a SNAPSHOT of `node` for `room`: once `final`, the node's members of the room
    /// are exactly the snapshot's (those no longer in it left while their messages were
    /// missed), unless a later message of it was applied already.
    package mutating func snapshot(
        node: PresenceNode, room: String, position: UInt64, final: Bool, members: [PresenceMember]
    ) -> [PresenceEffect] {
        guard var parts = rooms[room] else { return [] }
        var part = parts[node.tag] ?? Part()
        var collected = members
        if let pending = part.pending, pending.position == position { collected = pending.members + members }
        guard final else {
            part.pending = (position, collected)
            parts[node.tag] = part
            rooms[room] = parts
            return []
        }
        part.pending = nil
        guard parts[node.tag] == nil || position >= part.position else {
            parts[node.tag] = part
            rooms[room] = parts
            return []
        }
        let ids = Set(collected.map(\.memberID))
        var effects: [PresenceEffect] = part.members.subtracting(ids).sorted().map { .leave(room: room, memberID: $0, reason: .disconnected) }
        effects += collected.map { .upsert(room: room, member: $0) }
        part.members = ids
        part.position = position
        parts[node.tag] = part
        rooms[room] = parts
        return effects
    }
}
