import SnapSyncWire

// Windowed subscriptions (protocol version 4, PROTOCOL.md §9 "Windows", §11.29–§11.31): the
// client's side of `WindowedReplica`.
//
// A WINDOW from a connection that is not a member of the room joins it windowed and is answered
// with WINDOW_STATE; from a windowed member it moves the window and is answered with a
// WINDOW_DIFF carrying its request id. Live WINDOW_DIFFs (request id 0) follow; their versions
// increase but may skip. In place of any WINDOW_DIFF the server may send a WINDOW_STATE with
// the same request id, which the replica takes whole. Windows have no resume: after a reconnect the client sends WINDOW
// again. A WINDOW_DIFF the replica cannot follow (another epoch, an older version, ops that do
// not apply) makes it LEAVE and send WINDOW again, so that the answer is a WINDOW_STATE (a
// windowed member's WINDOW would be answered with a diff from the state the server thinks it
// holds).
//
// A room is followed one way per connection: `joinWindow` of a room joined whole drops its
// `RoomReplica` (the server turns the member into a windowed one), and `join` of a windowed room
// drops its `WindowedReplica` (the server answers that JOIN with SNAPSHOT).

extension SnapSyncClient {
    struct WindowEntry {
        let replica: WindowedReplica
        var phase = WindowPhase.detached
        /// The replica holds a window state (the first WINDOW_STATE arrived).
        var loaded = false
        var joinCalls: [UInt64] = []
        /// The window `joinWindow` asked for: sent until the first WINDOW_STATE.
        var asked: [SectionWindow]
        /// `move(to:)` calls not answered yet, in the order they were made.
        var moves: [PendingMove] = []
        /// The window to ask for again instead of the effective one: re-anchored here when the
        /// server no longer found an anchor (the window is asked for again after a reconnect).
        var reanchored: [SectionWindow]?
        /// Anchors the server did not find while asking for the window again.
        var missingAnchors: Set<SnapshotIdentifier> = []
        /// Why the window is asked for afresh; its WINDOW_STATE is published as `.resync(reason)`.
        var resyncReason: ResyncReason?

        /// The window a WINDOW sent now asks for: the newest move's, else the one the replica
        /// follows (or, before the first state, the one asked for).
        var wanted: [SectionWindow] {
            moves.last?.window ?? reanchored ?? (loaded ? replica.window : asked)
        }
    }

    enum WindowPhase {
        /// No WINDOW sent on the current connection (or no connection).
        case detached
        /// A WINDOW that joins is on its way; its WINDOW_STATE replaces the replica.
        case joining(requestID: UInt64)
        case live
    }

    struct PendingMove {
        var call: UInt64
        var window: [SectionWindow]
        /// The WINDOW whose answer settles it; nil until one is sent.
        var requestID: UInt64?
    }

    /// Follows `room` through `window` (WINDOW, protocol version 4): returns its replica once
    /// the window's state has arrived. The room is joined (as `join` does: the read right, the
    /// rooms per connection) but the replica holds only the window's rows, every section and
    /// every section's item count. A room already followed through a window gets `window` (as
    /// `move(to:)`) and returns the same replica; a room joined whole is followed through the
    /// window instead (its `RoomReplica` finishes).
    /// - Throws: `.unsupportedByServer` on protocol version 3 or older; `.rejected` with
    ///   `window_too_large` (more rows than `serverLimits.maxWindowRows`), `duplicate_section`,
    ///   `anchor_item_not_found`, `too_many_rooms_for_connection`, `invalid_room_name`;
    ///   `.forbidden`; connection errors; `.timedOut`.
    public func joinWindow(_ room: String, _ window: [SectionWindow]) async throws(SnapSyncError) -> WindowedReplica {
        try checkUsable()
        if case .ready = link, !ProtocolVersion.hasPresence(protocolVersion) { throw windowUnsupported(room) }
        if let entry = windows[room], entry.loaded {
            if entry.wanted != window { try await moveWindow(room, to: window) }
            return entry.replica
        }
        if let entry = windows[room], entry.phase.isDetached {
            // Not asked for yet (no connection): the newest window is.
            windows[room]!.asked = window
        }
        if windows[room] == nil {
            if let entry = rooms.removeValue(forKey: room) {
                entry.replica.finish()
                for call in entry.joinCalls { complete(call, .failure(.notJoined(room: room))) }
            }
            windows[room] = WindowEntry(replica: WindowedReplica(room: room, client: self), asked: window)
            sendWindowJoin(room)
        }
        let call = newCallID()
        windows[room]!.joinCalls.append(call)
        windowCallRooms[call] = room
        guard case .windowed(let replica) = try await wait(call, what: "WINDOW \(room)").get() else {
            preconditionFailure("a window join completes with its replica")
        }
        return replica
    }

    /// The replica of a room followed through a window.
    public func windowedReplica(_ room: String) -> WindowedReplica? {
        windows[room]?.replica
    }

    /// `WindowedReplica.move(to:)`.
    func moveWindow(_ room: String, to window: [SectionWindow]) async throws(SnapSyncError) {
        try checkUsable()
        guard let entry = windows[room], entry.loaded else { throw .notJoined(room: room) }
        if case .ready = link, !ProtocolVersion.hasPresence(protocolVersion) { throw windowUnsupported(room) }
        let call = newCallID()
        windows[room]!.moves.append(PendingMove(call: call, window: window))
        sendQueuedMoves(room)
        _ = try await wait(call, what: "WINDOW \(room)").get()
    }

    /// `WindowedReplica.extend(section:by:at:)`: the window grown (or slid) from the newest one
    /// asked for, within the server's `max_window_rows`.
    func extendWindow(_ room: String, section: SnapshotIdentifier, by rows: Int, at edge: WindowEdge) async throws(SnapSyncError) -> Bool {
        try checkUsable()
        guard let entry = windows[room], entry.loaded else { throw .notJoined(room: room) }
        let base = entry.wanted
        let next = WindowedReplica.extended(
            base, section: section, by: UInt64(max(0, rows)), at: edge, rows: entry.replica.snapshot.windowRoots(inSection: section),
            budget: UInt64(max(0, serverLimits.maxWindowRows)))
        guard next != base else { return false }
        try await moveWindow(room, to: next)
        return true
    }

    /// `WindowedReplica.leave()`, and `leave(_:)` of a windowed room.
    func leaveWindow(_ room: String, replica: WindowedReplica? = nil) async throws(SnapSyncError) {
        guard let entry = windows[room], replica.map({ $0 === entry.replica }) ?? true else { return }
        dropWindow(room, .notJoined(room: room))
        guard case .ready = link, !entry.phase.isDetached else { return }
        let call = newCallID()
        sendLeave(room, call: call)
        _ = try await wait(call, what: "LEAVE \(room)").get()
    }

    // MARK: Requests

    /// WINDOW that joins: the window wanted, on the current connection (nothing without one:
    /// `ready` sends it). Every move waiting is settled by its answer.
    func sendWindowJoin(_ room: String) {
        guard case .ready(let connection) = link, var entry = windows[room] else { return }
        guard ProtocolVersion.hasPresence(protocolVersion) else { return windowLost(room, windowUnsupported(room)) }
        let requestID = newRequest(.window(room: room))
        entry.phase = .joining(requestID: requestID)
        for k in entry.moves.indices { entry.moves[k].requestID = requestID }
        windows[room] = entry
        connection.send(.window(requestID: requestID, room: room, window: entry.wanted))
    }

    /// WINDOW for the moves not sent yet, once the replica is live on a connection: one, with
    /// the newest window (each replaces the whole window), which settles them all.
    func sendQueuedMoves(_ room: String) {
        guard case .ready(let connection) = link, var entry = windows[room], case .live = entry.phase,
            let newest = entry.moves.last(where: { $0.requestID == nil })
        else { return }
        let requestID = newRequest(.window(room: room))
        for k in entry.moves.indices where entry.moves[k].requestID == nil { entry.moves[k].requestID = requestID }
        windows[room] = entry
        connection.send(.window(requestID: requestID, room: room, window: newest.window))
    }

    /// The replica cannot follow its WINDOW_DIFFs: LEAVE, then WINDOW, whose WINDOW_STATE is
    /// published as `.resync(reason)`; the WINDOW_DIFFs that arrive before it are ignored.
    func resyncWindow(_ room: String, _ reason: ResyncReason) {
        guard windows[room] != nil else { return }
        eventSink.yield(.resyncing(room: room, reason: reason))
        windows[room]!.resyncReason = reason
        windows[room]!.phase = .detached
        sendLeave(room, call: nil)
        sendWindowJoin(room)
    }

    // MARK: Answers

    /// WINDOW_STATE: the window's whole state, which replaces the replica's: the answer to a
    /// WINDOW that joins, or sent in place of a WINDOW_DIFF (request id 0 for a change of the
    /// room, else a move's), which is then published as that diff would have been, its ops
    /// those that turn the old window snapshot into the new one.
    func handleWindowState(
        requestID: UInt64, room: String, position: RoomPosition, window: [SectionWindow], counts: [UInt64], snapshot: RoomSnapshot
    ) {
        if requestID != 0 {
            guard case .window(let asked)? = requests.removeValue(forKey: requestID), asked == room else {
                return violation("WINDOW_STATE of \(room) answers no WINDOW of it (request \(requestID))")
            }
        }
        guard var entry = windows[room] else {
            if requestID != 0 { abandonedJoinAnswered(room) }
            return
        }
        // In place of a live WINDOW_DIFF: only a live replica follows those.
        if requestID == 0, !entry.loaded || !entry.phase.isLive { return }
        // An older WINDOW's answer while a newer one that joins is on its way: that one counts.
        if case .joining(let current) = entry.phase, current != requestID { return }
        guard counts.count == snapshot.numberOfSections else {
            return violation("WINDOW_STATE of \(room) has \(counts.count) counts for \(snapshot.numberOfSections) sections")
        }
        var byID: [SnapshotIdentifier: UInt64] = [:]
        for (section, count) in zip(snapshot.sectionIdentifiers, counts) { byID[section] = count }
        let old = entry.replica.current
        let kind: WindowChange.Kind
        if !entry.loaded {
            kind = .initial
        } else if let reason = entry.resyncReason {
            kind = .resync(reason)
        } else if case .joining = entry.phase {
            kind = .reloaded
        } else {
            kind = requestID == 0 ? .diff : .moved
        }
        let ordered = WindowedReplica.orderedCounts(of: snapshot, byID)
        let changedCounts = entry.loaded ? ordered.filter { old.counts[$0.section] != $0.items } : ordered
        entry.phase = .live
        entry.loaded = true
        entry.resyncReason = nil
        entry.reanchored = nil
        entry.missingAnchors = []
        let settled = Self.settle(&entry.moves, answeredBy: requestID)
        let calls = entry.joinCalls
        windows[room] = entry
        let base = kind == .initial ? RoomSnapshot() : old.snapshot
        let operations = kind == .diff || kind == .moved ? old.snapshot.difference(to: snapshot) : []
        entry.replica.publish(
            WindowChange(
                kind: kind,
                rows: RoomChange(
                    kind: kind.rowsKind, room: room, previousPosition: kind == .initial ? nil : old.position, position: position,
                    operations: operations, snapshot: snapshot, updates: BatchUpdates(from: base, to: snapshot, operations: operations)),
                previousWindow: kind == .initial ? nil : old.window, window: window, counts: byID, changedCounts: changedCounts))
        for call in calls { complete(call, .success(.windowed(entry.replica))) }
        for call in settled { complete(call, .success(.done)) }
        sendQueuedMoves(room)
    }

    /// WINDOW_DIFF: a change of the room within the window or the counts (request id 0), or the
    /// answer to a move.
    func handleWindowDiff(
        requestID: UInt64, room: String, position: RoomPosition, window: [SectionWindow]?, counts: [SectionCount],
        operations: [SnapshotOperation]
    ) {
        if requestID != 0 {
            guard case .window(let asked)? = requests.removeValue(forKey: requestID), asked == room else {
                return violation("WINDOW_DIFF of \(room) answers no WINDOW of it (request \(requestID))")
            }
        }
        // Left meanwhile; or asked for again, and that answer covers it.
        guard var entry = windows[room], case .live = entry.phase else { return }
        let old = entry.replica.current
        // Versions never decrease and may skip; two frames may share one (a move's answer and
        // counts held back until then, PROTOCOL.md §11.31).
        guard position.epoch == old.position.epoch, position.version >= old.position.version else {
            return resyncWindow(room, .outOfSequence(expected: old.position, received: position))
        }
        var snapshot = old.snapshot
        do {
            try snapshot.apply(operations, limits: serverLimits.model)
        } catch {
            return resyncWindow(room, .diffFailed(error))
        }
        var byID = old.counts
        var received: [SnapshotIdentifier: UInt64] = [:]
        for count in counts {
            byID[count.section] = count.items
            received[count.section] = count.items
        }
        if byID.count != snapshot.numberOfSections { byID = byID.filter { snapshot.contains(section: $0.key) } }
        guard byID.count == snapshot.numberOfSections else {
            return violation("WINDOW_DIFF of \(room) at \(position) leaves a section without its count")
        }
        let settled = requestID == 0 ? [] : Self.settle(&entry.moves, answeredBy: requestID)
        windows[room] = entry
        entry.replica.publish(
            WindowChange(
                kind: requestID == 0 ? .diff : .moved,
                rows: RoomChange(
                    kind: .diff, room: room, previousPosition: old.position, position: position, operations: operations, snapshot: snapshot,
                    updates: BatchUpdates(from: old.snapshot, to: snapshot, operations: operations)),
                previousWindow: old.window, window: window ?? old.window, counts: byID,
                changedCounts: WindowedReplica.orderedCounts(of: snapshot, received)))
        for call in settled { complete(call, .success(.done)) }
    }

    /// A REJECT of a WINDOW: of the one that joins (the first: the join fails; again after a
    /// reconnect: a move's window is given up, a missing anchor replaced, else the room is
    /// lost), or of a move (it fails; nothing changed).
    func windowRejected(room: String, requestID: UInt64, _ rejection: SnapSyncError.Rejection) {
        guard var entry = windows[room] else { return }
        let error: SnapSyncError =
            rejection.code == .forbidden ? .forbidden(room: room, right: "read", message: rejection.message) : .rejected(rejection)
        guard case .joining(let current) = entry.phase, current == requestID else {
            let refused = entry.moves.filter { $0.requestID == requestID }
            entry.moves.removeAll { $0.requestID == requestID }
            windows[room] = entry
            for move in refused { complete(move.call, .failure(error)) }
            return
        }
        entry.phase = .detached
        guard entry.loaded else {
            // The first WINDOW: nothing was joined.
            windows[room] = nil
            entry.replica.finish()
            for call in entry.joinCalls { complete(call, .failure(error)) }
            return
        }
        if !entry.moves.isEmpty {
            // The window the moves asked for was refused: they fail, and the replica's own is
            // asked for again.
            let refused = entry.moves
            entry.moves = []
            windows[room] = entry
            for move in refused { complete(move.call, .failure(error)) }
            return sendWindowJoin(room)
        }
        if rejection.code == .anchorItemNotFound, let anchor = rejection.identifier,
            let next = Self.reanchor(entry.wanted, missing: anchor, tried: &entry.missingAnchors, in: entry.replica.snapshot)
        {
            entry.reanchored = next
            windows[room] = entry
            return sendWindowJoin(room)
        }
        windowLost(room, error)
    }

    /// LEFT of a windowed room: as for a room joined whole (`handleLeft`).
    func windowLeft(room: String, code: UInt64, message: String) {
        let error: SnapSyncError =
            code == ErrorCode.forbidden.rawValue
            ? .forbidden(room: room, right: "read", message: message)
            : .rejected(.init(rawCode: code, operationIndex: nil, identifier: nil, message: message))
        guard let entry = windows[room] else { return }
        dropWindow(room, error)
        if entry.loaded { eventSink.yield(Self.event(forLeft: room, code: code, error: error)) }
    }

    // MARK: Ends

    /// The window can no longer be followed: the replica finishes, its calls fail, and the app
    /// hears `.roomLost` (when it had the replica).
    func windowLost(_ room: String, _ error: SnapSyncError) {
        guard let entry = windows[room] else { return }
        dropWindow(room, error)
        if entry.loaded { eventSink.yield(.roomLost(room: room, error: error)) }
    }

    /// Forgets a windowed room, if it is one: its streams finish, its waiting calls fail with
    /// `error`.
    func endWindow(_ room: String, _ error: SnapSyncError) {
        dropWindow(room, error)
    }

    private func dropWindow(_ room: String, _ error: SnapSyncError) {
        guard let entry = windows.removeValue(forKey: room) else { return }
        entry.replica.finish()
        for call in entry.joinCalls { complete(call, .failure(error)) }
        for move in entry.moves { complete(move.call, .failure(error)) }
    }

    /// A `joinWindow` call ended (answered, timed out, cancelled): a window nobody waits for any
    /// more before its first state is forgotten (a late WINDOW_STATE is answered with LEAVE).
    func windowCallCompleted(_ call: UInt64, room: String) {
        guard var entry = windows[room] else { return }
        entry.joinCalls.removeAll { $0 == call }
        if !entry.loaded && entry.joinCalls.isEmpty {
            windows[room] = nil
            entry.replica.finish()
        } else {
            windows[room] = entry
        }
    }

    func windowUnsupported(_ room: String) -> SnapSyncError {
        .unsupportedByServer("WINDOW \(room): the connection speaks protocol version \(protocolVersion), windows need 4")
    }

    // MARK: Helpers

    /// Removes the moves `requestID`'s answer settles (the server handles WINDOWs in order, and
    /// each replaces the whole window) and returns their calls.
    static func settle(_ moves: inout [PendingMove], answeredBy requestID: UInt64) -> [UInt64] {
        let settled = moves.filter { $0.requestID.map { $0 <= requestID } ?? false }.map(\.call)
        moves.removeAll { $0.requestID.map { $0 <= requestID } ?? false }
        return settled
    }

    /// `window` with the `around` windows anchored at `missing` moved to another of their rows
    /// in `snapshot` (the first after it, else the last before it, that the server has not
    /// refused yet: the rule the server re-anchors with), or to the section's first rows when
    /// none is left; nil when no window is anchored there.
    static func reanchor(
        _ window: [SectionWindow], missing: SnapshotIdentifier, tried: inout Set<SnapshotIdentifier>, in snapshot: RoomSnapshot
    ) -> [SectionWindow]? {
        guard window.contains(where: { $0.anchor == missing }) else { return nil }
        tried.insert(missing)
        return window.map { sectionWindow in
            guard case .around(let anchor, let before, let after) = sectionWindow.range, anchor == missing else { return sectionWindow }
            let rows = snapshot.windowRoots(inSection: sectionWindow.section)
            let at = rows.firstIndex(of: anchor) ?? -1
            let later = rows[(at + 1)...].first { !tried.contains($0) }
            let earlier = rows[..<max(at, 0)].last { !tried.contains($0) }
            guard let next = later ?? earlier else { return SectionWindow(section: sectionWindow.section, range: .first(sectionWindow.size)) }
            return SectionWindow(section: sectionWindow.section, range: .around(anchor: next, before: before, after: after))
        }
    }
}

extension SnapSyncClient.WindowPhase {
    var isDetached: Bool {
        if case .detached = self { return true }
        return false
    }

    var isLive: Bool {
        if case .live = self { return true }
        return false
    }
}
