import SnapSyncAuth
import SnapSyncModel
import SnapSyncWire

// Windowed members (PROTOCOL.md §9, "Windows"): WINDOW joins a room through a window, or moves
// one; every applied version is translated for each windowed member into a WINDOW_DIFF.
//
// Cost per version of a room with windowed members: one decode of the DIFF's ops, O(ops) to
// collect what they touch, O(sections) to compare the counts, O(ops) to find in the room's index
// the members the change may reach (Room+Windows.swift), O(1) for every other member (the counts
// it is owed), and for each member reached O(sections + window) to build its new window snapshot
// and diff it against the old. A change elsewhere in the room costs a member a share of one count
// frame per --window-counts-interval, encoded once. Nothing is O(items of the room).

extension Hub {
    /// WINDOW (§11.29), checked in the order §11.29 gives: JOIN's checks (the name, the `read`
    /// right, the rooms of the connection), the window's size, then each section window
    /// (named twice, its anchor). A member's window changes at once; a non-member joins through
    /// the engine, and its section windows are checked once the room is there.
    func setWindow(requestID: UInt64, roomName: String, window: [SectionWindow], from session: Session) {
        guard admit(requestID: requestID, roomName: roomName, right: .read, from: session) else { return }
        guard let room = session.memberships[roomName] else {
            // A WINDOW waiting for its room counts as a room joined: the bound holds in flight too.
            guard session.memberships.count + session.pendingWindows.count < configuration.wire.maxRoomsPerConnection else {
                send(
                    Rejection(
                        .tooManyRoomsForConnection,
                        "this connection has joined \(session.memberships.count) rooms and is joining \(session.pendingWindows.count), the limit is \(configuration.wire.maxRoomsPerConnection)"
                    ).message(requestID: requestID), to: session)
                return
            }
            if let rejection = checkSize(window) {
                send(rejection.message(requestID: requestID), to: session)
                return
            }
            session.pendingWindows[requestID] = window
            engine.join(requestID: requestID, roomName: roomName, resume: nil, from: session)
            return
        }
        if let rejection = checkSize(window) ?? checkSections(window, in: room) {
            send(rejection.message(requestID: requestID), to: session)
        } else if let member = room.windows[session.id] {
            move(member, to: window, requestID: requestID, in: room)
        } else {
            startWindow(window, requestID: requestID, room: room, for: session)
        }
    }

    /// The engine found the room of a WINDOW from a non-member (`completeJoin`).
    func completeWindowJoin(requestID: UInt64, room: Room, window: [SectionWindow], from session: Session) {
        if let rejection = checkSections(window, in: room) {
            send(rejection.message(requestID: requestID), to: session)
            return
        }
        startWindow(window, requestID: requestID, room: room, for: session)
        if session.memberships[room.name] == nil && session.state != .closing { addMember(session, to: room) }
    }

    /// A member is windowed no more: it left, or a JOIN made it a full member.
    func stopWindow(of session: Session, in room: Room) {
        guard room.windows[session.id] != nil else { return }
        // Pending DIFFs were made while it was windowed: it has their WINDOW_DIFFs.
        flushBroadcast(of: room)
        guard let member = room.windows.removeValue(forKey: session.id) else { return }
        room.unindex(member)
        stats.windowedMembers -= 1
        if room.windows.isEmpty { room.windowCounts = [:] }
    }

    /// The window's size against `max_window_rows` (saturating, as §9 says).
    private func checkSize(_ window: [SectionWindow]) -> Rejection? {
        var rows: UInt64 = 0
        for sectionWindow in window {
            rows = rows.addingReportingOverflow(sectionWindow.size).overflow ? .max : rows + sectionWindow.size
        }
        guard rows <= UInt64(configuration.wire.maxWindowRows) else {
            return Rejection(
                .windowTooLarge,
                "the window asks for \(rows == .max ? "2^64 - 1 or more" : "\(rows)") rows, over max_window_rows \(configuration.wire.maxWindowRows)")
        }
        return nil
    }

    /// Each section window in order: a section named twice, then an `around` window's anchor,
    /// which must be a root of its section.
    private func checkSections(_ window: [SectionWindow], in room: Room) -> Rejection? {
        var sections = Set<SnapshotIdentifier>(minimumCapacity: window.count)
        for sectionWindow in window {
            guard sections.insert(sectionWindow.section).inserted else {
                return Rejection(
                    .duplicateSection, "the window names section \(sectionWindow.section) twice", identifier: sectionWindow.section)
            }
            guard let anchor = sectionWindow.anchor, !room.snapshot.isRoot(anchor, inSection: sectionWindow.section) else { continue }
            return Rejection(
                .anchorItemNotFound,
                "the window's anchor \(anchor) is not a root item of section \(sectionWindow.section) in room \(LogEscaping.line(room.name))",
                identifier: anchor)
        }
        return nil
    }

    /// Makes `session` a windowed member of `room` and sends WINDOW_STATE (§11.30).
    private func startWindow(_ window: [SectionWindow], requestID: UInt64, room: Room, for session: Session) {
        // A full member turning windowed gets the DIFFs made before its window first.
        flushBroadcast(of: room)
        if room.windows.isEmpty { room.windowCounts = currentCounts(of: room) }
        let snapshot = room.snapshot.windowSnapshot(window)
        let member = MemberWindow(session: session, window: window, snapshot: snapshot)
        room.windows[session.id] = member
        room.index(member)
        stats.windowedMembers += 1
        send(
            .windowState(
                requestID: requestID, room: room.name, epoch: room.epoch, version: room.version, chain: room.chain ?? .unknown,
                window: window, counts: room.snapshot.sectionItemCounts, snapshot: snapshot), to: session)
    }

    /// A windowed member's new window: WINDOW_DIFF from its window snapshot to the new one.
    private func move(_ member: MemberWindow, to window: [SectionWindow], requestID: UInt64, in room: Room) {
        let snapshot = room.snapshot.windowSnapshot(window)
        let ops = member.snapshot.difference(to: snapshot, limits: room.limits.model)
        member.window = window
        sendWindowChange(member, snapshot: snapshot, requestID: requestID, window: window, ops: ops, in: room)
    }

    private func currentCounts(of room: Room) -> [SnapshotIdentifier: UInt64] {
        Dictionary(uniqueKeysWithValues: zip(room.snapshot.sectionIdentifiers, room.snapshot.sectionItemCounts))
    }

    /// The WINDOW_DIFF of a change, or, when that frame would not fit `max_frame_bytes`,
    /// WINDOW_STATE (the replica replaces its window, §11.30). The member holds `snapshot` after,
    /// and every count it was owed.
    private func sendWindowChange(
        _ member: MemberWindow, snapshot: RoomSnapshot, requestID: UInt64, window: [SectionWindow]?, ops: [SnapshotOperation], in room: Room
    ) {
        room.setWindowSnapshot(member, snapshot)
        // A frame that changes the window brings the counts up to date too.
        let counts = counts(of: member.staleCounts, in: room)
        member.staleCounts = []
        let diff = Message.windowDiff(
            requestID: requestID, room: room.name, epoch: room.epoch, version: room.version, window: window, counts: counts, ops: ops)
        let frame = FrameEncoder().encode(diff)
        if frame.count - 4 <= configuration.wire.maxFrameBytes {
            send(shared: .frozen(frame), to: member.session, type: .windowDiff)
        } else {
            send(
                .windowState(
                    requestID: requestID, room: room.name, epoch: room.epoch, version: room.version, chain: room.chain ?? .unknown,
                    window: member.window, counts: room.snapshot.sectionItemCounts, snapshot: snapshot), to: member.session)
        }
    }

    /// Translates the version `diff` just applied to `room` for each windowed member (`fanOut`).
    func fanOutWindows(_ diff: OutputChunk, in room: Room) {
        let ops: [SnapshotOperation]
        do {
            guard case .diff(_, _, _, let decoded, _) = try FrameDecoder.decode(frame: diff.bytes, limits: .permissive, accepting: .server) else {
                preconditionFailure("a room's history holds DIFF frames")
            }
            ops = decoded
        } catch {
            preconditionFailure("a DIFF the room applied does not decode: \(error)")
        }
        let change = WindowChange(ops, in: room.snapshot)
        let current = currentCounts(of: room)
        let changedCounts = Set(current.compactMap { room.windowCounts[$0.key] != $0.value ? $0.key : nil })
        room.windowCounts = current
        var countsOnly: OutputChunk?
        let reached: Set<UInt64>? =
            change.sectionsChanged ? nil : room.windowMembers(touching: change.touched, filling: change.filledSections)
        var owesCounts = false
        // Copied first: a member cut off as a slow consumer leaves the room.
        for member in Array(room.windows.values) where member.session.state != .closing {
            if !changedCounts.isEmpty { member.staleCounts.formUnion(changedCounts) }
            if change.isSectionsOnly, passThrough(ops, to: member, in: room) { continue }
            if reached?.contains(member.session.id) ?? true {
                let window = member.window.map {
                    room.snapshot.reanchored($0, previousRows: member.snapshot.rootItems(inSection: $0.section) ?? [])
                }
                let snapshot = room.snapshot.windowSnapshot(window)
                let ops = change.keepingReconfigure(member.snapshot.difference(to: snapshot, limits: room.limits.model))
                stats.windowRebuilds += 1
                let moved = window != member.window
                if !ops.isEmpty || moved {
                    member.window = window
                    sendWindowChange(member, snapshot: snapshot, requestID: 0, window: moved ? window : nil, ops: ops, in: room)
                    continue
                }
            }
            guard !member.staleCounts.isEmpty else { continue }
            if configuration.windowCountsInterval > .zero {
                owesCounts = true
                continue
            }
            // Every member's stale sections are this version's when nothing is coalesced.
            let frame = countsOnly ?? .frozen(FrameEncoder().encode(countsFrame(member.staleCounts, of: room)))
            countsOnly = frame
            member.staleCounts = []
            send(shared: frame, to: member.session, type: .windowDiff)
        }
        if owesCounts { queueWindowCounts(room) }
    }

    /// A batch of section ops alone moves no row in or out of any window: unless an `around`
    /// window loses its anchor (with its section), the member's window snapshot takes the batch
    /// as it is, and so does its replica. O(ops) instead of rebuilding the window. False, having
    /// changed nothing, when the window must be rebuilt.
    private func passThrough(_ ops: [SnapshotOperation], to member: MemberWindow, in room: Room) -> Bool {
        for sectionWindow in member.window {
            if let anchor = sectionWindow.anchor, !room.snapshot.isRoot(anchor, inSection: sectionWindow.section) { return false }
        }
        var snapshot = member.snapshot
        guard (try? snapshot.apply(ops, limits: .unlimited)) != nil else { return false }
        sendWindowChange(member, snapshot: snapshot, requestID: 0, window: nil, ops: ops, in: room)
        return true
    }

    /// A count-only WINDOW_DIFF of `sections` at the room's version, in section order.
    private func countsFrame(_ sections: Set<SnapshotIdentifier>, of room: Room) -> Message {
        .windowDiff(requestID: 0, room: room.name, epoch: room.epoch, version: room.version, window: nil, counts: counts(of: sections, in: room), ops: [])
    }

    /// The room's current counts of `sections` that still exist, in section order.
    private func counts(of sections: Set<SnapshotIdentifier>, in room: Room) -> [SectionCount] {
        guard !sections.isEmpty else { return [] }
        var counts = sections.compactMap { section in room.windowCounts[section].map { SectionCount(section: section, items: $0) } }
        if counts.count > 1 {
            let order = Dictionary(uniqueKeysWithValues: room.snapshot.sectionIdentifiers.enumerated().map { ($1, $0) })
            counts.sort { order[$0.section]! < order[$1.section]! }
        }
        return counts
    }

    private func queueWindowCounts(_ room: Room) {
        guard !room.isWindowCountsQueued else { return }
        room.isWindowCountsQueued = true
        windowCountsQueue.append(room)
        if windowCountsQueue.count == 1 { windowCountsTimerNeeded(configuration.windowCountsInterval) }
    }

    /// The counts timer: each queued room's members get the counts they are owed, one frame per
    /// distinct set of sections (usually one per room), shared.
    /// - Complexity: O(windowed members of the queued rooms).
    package func flushWindowCounts() {
        let queue = windowCountsQueue
        windowCountsQueue = []
        for room in queue {
            room.isWindowCountsQueued = false
            // A room ended since (its members left with it) owes nothing.
            guard rooms[RoomName(room.name)] === room else { continue }
            var frames: [Set<SnapshotIdentifier>: OutputChunk] = [:]
            for member in Array(room.windows.values) where !member.staleCounts.isEmpty && member.session.state != .closing {
                let frame = frames[member.staleCounts] ?? .frozen(FrameEncoder().encode(countsFrame(member.staleCounts, of: room)))
                frames[member.staleCounts] = frame
                member.staleCounts = []
                send(shared: frame, to: member.session, type: .windowDiff)
            }
        }
    }
}

/// What one applied batch touched, for `Room.windowMembers(touching:filling:)`: every item it names, the
/// neighbours of every item it placed (read after the batch), and the sections it placed items
/// in; and whether it changed sections, which every window shows.
/// - Complexity: O(ids in the batch), expected.
struct WindowChange {
    var touched = Set<SnapshotIdentifier>()
    var filledSections = Set<SnapshotIdentifier>()
    var sectionsChanged = false
    /// Every op is a section op (not `delete_all_items`): `Hub.passThrough` applies.
    var isSectionsOnly = true
    /// Items the batch updated with `reconfigure`, which a window's diff (all `reload`) shows
    /// the same way, so that UIKit keeps their cells (`keepingReconfigure`).
    var reconfigured = Set<SnapshotIdentifier>()

    init(_ ops: [SnapshotOperation], in snapshot: RoomSnapshot) {
        func placed(_ id: SnapshotIdentifier) {
            touched.insert(id)
            for neighbour in snapshot.adjacentItems(of: id) { touched.insert(neighbour) }
            if let section = snapshot.sectionIdentifier(containingItem: id) { filledSections.insert(section) }
        }
        for op in ops {
            switch op {
            case .appendSections, .insertSections, .deleteSections, .moveSection, .updateSections:
                sectionsChanged = true
            case .deleteAllItems:
                sectionsChanged = true
                isSectionsOnly = false
            case .appendItems(let elements, _):
                isSectionsOnly = false
                for element in elements { placed(element.id) }
            case .insertItems(let elements, let placement):
                isSectionsOnly = false
                touched.insert(placement.anchor)
                for element in elements { placed(element.id) }
            case .deleteItems(let ids):
                isSectionsOnly = false
                touched.formUnion(ids)
            case .moveItem(let id, let placement):
                isSectionsOnly = false
                touched.insert(placement.anchor)
                placed(id)
            case .moveItemToSection(let id, _):
                isSectionsOnly = false
                placed(id)
            case .updateItems(let elements, let kind):
                isSectionsOnly = false
                for element in elements { touched.insert(element.id) }
                if kind == .reconfigure { reconfigured.formUnion(elements.map(\.id)) }
            case .appendChildren(let elements, let parent):
                isSectionsOnly = false
                touched.insert(parent)
                for element in elements { placed(element.id) }
            case .moveItemToParent(let id, let parent):
                isSectionsOnly = false
                touched.insert(parent)
                placed(id)
            }
        }
    }

    /// `ops` with each payload update of an item the batch reconfigured said as `reconfigure`.
    /// O(ops) when the batch reconfigured nothing, else O(elements updated).
    func keepingReconfigure(_ ops: [SnapshotOperation]) -> [SnapshotOperation] {
        guard !reconfigured.isEmpty else { return ops }
        return ops.flatMap { op -> [SnapshotOperation] in
            guard case .updateItems(let elements, .reload) = op else { return [op] }
            let kept = elements.filter { reconfigured.contains($0.id) }
            guard !kept.isEmpty else { return [op] }
            let reloaded = elements.filter { !reconfigured.contains($0.id) }
            return (reloaded.isEmpty ? [] : [.updateItems(reloaded, .reload)]) + [.updateItems(kept, .reconfigure)]
        }
    }
}
