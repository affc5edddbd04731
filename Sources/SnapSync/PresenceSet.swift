/// A watched room's presence as this client knows it (PROTOCOL.md §9, "Presence"): the room's
/// member count and its **view**, the `presence_view` members with the smallest member ids
/// (`WireLimits.presenceView`; all of them in a smaller room), each with its principal, the
/// time it joined and its state.
///
/// A value: `RoomReplica.presence` delivers one per `PresenceUpdate`, and `apply(count:changes:)`
/// takes it from one PRESENCE_DIFF to the next (§11.28). `selfMemberID` is this client's member
/// id on the connection the set was read on (its WELCOME's session id, `SnapSyncClient.sessionID`),
/// so `me` finds this client's own entry. Members outside the view are only counted.
///
/// - Complexity: lookups by member id are O(log view); `apply` is O(changes × view).
public struct PresenceSet: Hashable, Sendable {
    /// The room's name.
    public let room: String
    /// Every member of the room, those outside the view included.
    public private(set) var count: Int
    /// The view, in ascending member id order, each member once.
    public private(set) var members: [PresenceMember]
    /// This client's member id on the connection the set belongs to (nil when not known).
    public var selfMemberID: UInt64?

    public init(room: String, count: Int, members: [PresenceMember], selfMemberID: UInt64? = nil) {
        self.room = room
        self.members = members.sorted { $0.memberID < $1.memberID }
        self.count = max(count, members.count)
        self.selfMemberID = selfMemberID
    }

    /// No member: the set of a room before its first PRESENCE.
    public init(room: String) {
        self.init(room: room, count: 0, members: [])
    }

    /// This client's own entry, when it is in the view.
    public var me: PresenceMember? { selfMemberID.flatMap { self[memberID: $0] } }

    /// The view's members other than this client.
    public var others: [PresenceMember] { members.filter { $0.memberID != selfMemberID } }

    /// Whether `member` is this client.
    public func isSelf(_ member: PresenceMember) -> Bool { member.memberID == selfMemberID }

    /// The member of the view with this id, or nil. O(log view)
    public subscript(memberID memberID: UInt64) -> PresenceMember? {
        guard let index = index(of: memberID) else { return nil }
        return members[index]
    }

    /// The members of the view whose principal is `principal` (a user may have several
    /// connections). O(view)
    public func members(principal: String) -> [PresenceMember] { members.filter { $0.principal == principal } }

    /// Applies one PRESENCE_DIFF whole (§11.28): `joined` and `shown` add the member (replacing
    /// an entry with the same id), `left` and `hidden` remove it, `state` replaces its state;
    /// then `count` is the room's. A change about a member the view does not hold (`left`,
    /// `hidden`, `state`: a conforming server sends none) changes nothing.
    public mutating func apply(count: Int, changes: [PresenceChange]) {
        for change in changes {
            switch change {
            case .joined(let member), .shown(let member):
                insert(member)
            case .left(let id, _), .hidden(let id):
                if let index = index(of: id) { members.remove(at: index) }
            case .state(let id, let state):
                if let index = index(of: id) { members[index].state = state }
            }
        }
        self.count = max(count, members.count)
    }

    /// The set's invariants, checked in O(view): the members ascend strictly by member id, none
    /// has id 0, and `count` is at least the view's size.
    /// - Returns: the violations found, described (empty when it holds).
    public func checkInvariants() -> [String] {
        var problems: [String] = []
        if count < members.count { problems.append("count \(count) is below the view's \(members.count) members") }
        for (index, member) in members.enumerated() {
            if member.memberID == 0 { problems.append("member at \(index) has id 0") }
            if index > 0, members[index - 1].memberID >= member.memberID {
                problems.append("member ids do not ascend at \(index): \(members[index - 1].memberID), \(member.memberID)")
            }
        }
        return problems
    }

    private mutating func insert(_ member: PresenceMember) {
        let at = insertionIndex(of: member.memberID)
        if at < members.count, members[at].memberID == member.memberID {
            members[at] = member
        } else {
            members.insert(member, at: at)
        }
    }

    /// The index of the first member whose id is not below `id`.
    private func insertionIndex(of id: UInt64) -> Int {
        var low = 0, high = members.count
        while low < high {
            let middle = (low + high) / 2
            if members[middle].memberID < id { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private func index(of id: UInt64) -> Int? {
        let at = insertionIndex(of: id)
        return at < members.count && members[at].memberID == id ? at : nil
    }
}

/// One element of `RoomReplica.presence`: the room's presence after a change, and the change.
public struct PresenceUpdate: Hashable, Sendable {
    public enum Kind: Hashable, Sendable {
        /// The whole set, as the server's PRESENCE gave it: the first element of a stream, and
        /// again after a reconnect (a new connection, a new member id, a new watch), which
        /// replaces everything known before.
        case initial
        /// One PRESENCE_DIFF applied to the previous element's set.
        case diff
    }

    public var kind: Kind
    /// The room's presence after the update.
    public var presence: PresenceSet
    /// The PRESENCE_DIFF's changes, in the server's order (empty for `.initial`).
    public var changes: [PresenceChange]

    public init(kind: Kind, presence: PresenceSet, changes: [PresenceChange] = []) {
        self.kind = kind
        self.presence = presence
        self.changes = changes
    }

    public var room: String { presence.room }

    /// The members that joined the room (and are in the view).
    public var joined: [PresenceMember] {
        changes.compactMap { change -> PresenceMember? in
            guard case .joined(let member) = change else { return nil }
            return member
        }
    }

    /// The members of the view that left the room, with why.
    public var departures: [(memberID: UInt64, reason: PresenceDeparture)] {
        changes.compactMap { change -> (memberID: UInt64, reason: PresenceDeparture)? in
            guard case .left(let id, let reason) = change else { return nil }
            return (id, PresenceDeparture(byte: reason))
        }
    }

    /// The members of the view whose state changed.
    public var stateChanges: [UInt64] {
        changes.compactMap { change -> UInt64? in
            guard case .state(let id, _) = change else { return nil }
            return id
        }
    }
}

/// One page of a room's presence (`RoomReplica.listPresence(after:limit:)`, PRESENCE_LIST).
public struct PresencePage: Hashable, Sendable {
    public var room: String
    /// Every member of the room.
    public var count: Int
    /// The members listed, in ascending member id order.
    public var members: [PresenceMember]
    /// The `after` of the next page, or nil when this page is the last.
    public var next: UInt64?

    public init(room: String, count: Int, members: [PresenceMember], next: UInt64?) {
        self.room = room
        self.count = count
        self.members = members
        self.next = next
    }
}

extension PresenceMember {
    /// The state decoded with `coder` (e.g. `.json`), or nil when the member has set none
    /// (empty). `room` names the room in the error.
    /// - Throws: `SnapSyncError` of kind `.presenceCoding` when the bytes do not decode.
    public func state<State: Sendable>(as coder: ElementCoder<State>, room: String) throws(SnapSyncError) -> State? {
        guard !state.isEmpty else { return nil }
        do throws(ElementCodingError) {
            return try coder.decode(state, as: .itemPayload, identifier: nil)
        } catch {
            throw .presenceCoding(
                "the presence state of member \(memberID) (\(principal)) in \(room) did not decode: \(error.message)")
        }
    }
}

extension PresenceSet {
    /// Every member of the view with its state decoded by `coder` (nil: no state set), in
    /// member id order.
    /// - Throws: `.presenceCoding` naming the first member whose state does not decode.
    public func states<State: Sendable>(as coder: ElementCoder<State>) throws(SnapSyncError) -> [(member: PresenceMember, state: State?)] {
        var result: [(member: PresenceMember, state: State?)] = []
        result.reserveCapacity(members.count)
        for member in members {
            let state = try member.state(as: coder, room: room)
            result.append((member, state))
        }
        return result
    }
}
