import SnapSyncWire

// Keeping replicas in step with their rooms: SNAPSHOT (initial or resync), CATCHUP and the DIFFs
// that follow it, live DIFFs, and the answers to writes and leaves.
//
// A replica moves only forward, one version at a time, within one epoch. Anything else (a gap, a
// DIFF that does not apply, a digest that does not match) means the replica can no longer be
// trusted, and the client fetches a fresh snapshot rather than guess.

extension SnapSyncClient {
    /// The answer to a JOIN: the replica is replaced, whatever the SNAPSHOT's `reason` says (a
    /// fresh JOIN after a digest mismatch is answered `initial`, a resume `resync`); the change's
    /// kind says how it got here.
    func handleSnapshot(
        requestID: UInt64, room: String, position: RoomPosition, reason: SnapshotReason,
        digest: SnapshotDigest, snapshot: RoomSnapshot, chain: RoomChain? = nil
    ) {
        guard case .join(let joined)? = requests.removeValue(forKey: requestID), joined == room else {
            return violation("SNAPSHOT of \(room) answers no JOIN of it (request \(requestID))")
        }
        guard var entry = rooms[room], case .joining(let current) = entry.phase, current == requestID else {
            abandonedJoinAnswered(room)
            return
        }
        // After the entry is written back: presence is restored on this connection.
        defer { joinAnswered(room) }
        guard snapshot.digest == digest else {
            entry.digestFailures += 1
            rooms[room] = entry
            // A server that keeps sending bad snapshots is broken; a new connection is the most
            // a client can try (and the backoff keeps that cheap).
            guard entry.digestFailures < 3 else {
                return violation("the SNAPSHOT of \(room) failed its digest check 3 times")
            }
            return resync(room, .digestMismatch)
        }
        entry.digestFailures = 0
        let old = entry.replica.current
        let kind: RoomChange.Kind
        if !entry.loaded {
            kind = .initial
        } else if let reason = entry.resyncReason {
            // `resync(_:_:)` announced it when it asked.
            kind = .resync(reason)
        } else {
            // A resume the server answered with a SNAPSHOT: the history no longer reaches back
            // (or the room has a new epoch). Announced here, as every resync is.
            kind = .resync(.historyUnavailable)
            eventSink.yield(.resyncing(room: room, reason: .historyUnavailable))
        }
        entry.phase = .live
        entry.loaded = true
        entry.resyncReason = nil
        entry.distrusted = false
        entry.chain = chain
        let calls = entry.joinCalls
        rooms[room] = entry
        let base = kind == .initial ? RoomSnapshot() : old.snapshot
        entry.replica.publish(
            RoomChange(
                kind: kind, room: room, previousPosition: kind == .initial ? nil : old.position,
                position: position, operations: [], snapshot: snapshot,
                updates: BatchUpdates(from: base, to: snapshot)))
        for call in calls { complete(call, .success(.replica(entry.replica))) }
    }

    /// CATCHUP: the DIFFs that follow take the replica to `to`, one per version or (version 3,
    /// `form` folded) one for them all.
    func handleCatchUp(requestID: UInt64, room: String, epoch: UInt64, from: UInt64, to: UInt64, form: CatchupForm? = nil) {
        guard case .join(let joined)? = requests.removeValue(forKey: requestID), joined == room else {
            return violation("CATCHUP of \(room) answers no JOIN of it (request \(requestID))")
        }
        guard var entry = rooms[room], case .joining(let current) = entry.phase, current == requestID else {
            abandonedJoinAnswered(room)
            return
        }
        defer { joinAnswered(room) }
        let replica = entry.replica.current
        var foldedDigest: SnapshotDigest?
        if case .folded(let digest)? = form { foldedDigest = digest }
        guard entry.loaded, epoch == replica.position.epoch, from == replica.position.version, to >= from,
            foldedDigest == nil || to > from
        else {
            // The server answered a resume from another position: do not resume again.
            rooms[room]!.distrusted = true
            return resync(room, .outOfSequence(expected: replica.position, received: RoomPosition(epoch: epoch, version: from)))
        }
        entry.phase = .catchingUp(
            CatchUp(
                epoch: epoch, version: from, toVersion: to, working: replica.snapshot, operations: [], chain: entry.chain,
                foldedDigest: foldedDigest))
        rooms[room] = entry
        if to == from { finishCatchUp(room) }
    }

    func handleDiff(room: String, position: RoomPosition, operations: [SnapshotOperation], chain: RoomChain? = nil) {
        // Take the entry out while advancing it, so that a catch-up's working snapshot is not
        // shared with the dictionary's copy (which would cost a full copy per DIFF).
        guard var entry = rooms.removeValue(forKey: room) else { return }  // left; DIFFs were in flight
        let outcome = Self.advance(&entry, to: position, by: operations, chain: chain, limits: serverLimits.model)
        rooms[room] = entry
        switch outcome {
        case .ignored:
            break
        case .applied(let change):
            entry.replica.publish(change)
        case .caughtUp:
            finishCatchUp(room)
        case .broken(let reason, let fresh):
            if fresh { rooms[room]!.distrusted = true }
            switch reason {
            case .diverged, .corrupted: countDivergence(reason)
            default: break
            }
            resync(room, reason)
        }
    }

    enum DiffOutcome {
        case ignored
        case applied(RoomChange)
        case caughtUp
        /// `fresh`: resuming from the replica's position cannot help (a catch-up went wrong).
        case broken(ResyncReason, fresh: Bool)
    }

    /// Applies one DIFF to a room's state under the server's limits (PROTOCOL.md §5: a replica
    /// applies a DIFF with the rules the server applied it with), or says why it cannot be.
    static func advance(
        _ entry: inout RoomEntry, to position: RoomPosition, by operations: [SnapshotOperation], chain: RoomChain? = nil,
        limits: SnapshotLimits
    ) -> DiffOutcome {
        switch entry.phase {
        case .detached, .joining:
            // The SNAPSHOT or CATCHUP that answers the JOIN covers it.
            return .ignored
        case .catchingUp(var catchUp):
            entry.phase = .detached  // drops the enum's reference to the working snapshot
            if let digest = catchUp.foldedDigest {
                return Self.applyFolded(&catchUp, digest: digest, &entry, at: position, by: operations, chain: chain, limits: limits)
            }
            let expected = RoomPosition(epoch: catchUp.epoch, version: catchUp.version + 1)
            guard position == expected else { return .broken(.outOfSequence(expected: expected, received: position), fresh: true) }
            let next: RoomChain?
            switch Self.chain(after: catchUp.chain, room: entry.replica.room, position: position, operations: operations, received: chain) {
            case .follows(let chain): next = chain
            case .diverged(let reason): return .broken(reason, fresh: true)
            }
            do {
                try catchUp.working.apply(operations, limits: limits)
            } catch {
                return .broken(.diffFailed(error), fresh: true)
            }
            catchUp.operations += operations
            catchUp.version = position.version
            catchUp.chain = next
            entry.phase = .catchingUp(catchUp)
            return catchUp.version == catchUp.toVersion ? .caughtUp : .ignored
        case .live:
            let current = entry.replica.current
            // An old DIFF (its version is already in the replica) changes nothing.
            if position.epoch == current.position.epoch && position.version <= current.position.version { return .ignored }
            let expected = RoomPosition(epoch: current.position.epoch, version: current.position.version + 1)
            guard position == expected else { return .broken(.outOfSequence(expected: expected, received: position), fresh: false) }
            switch Self.chain(after: entry.chain, room: entry.replica.room, position: position, operations: operations, received: chain) {
            case .follows(let next): entry.chain = next
            case .diverged(let reason): return .broken(reason, fresh: true)
            }
            // A copy of the previous snapshot, which the previous change still holds: O(n).
            var snapshot = current.snapshot
            do {
                // Every prefix of a correct server's DIFF is within its limits; one that is not
                // is a DIFF this replica cannot follow, like one that does not apply.
                try snapshot.apply(operations, limits: limits)
            } catch {
                return .broken(.diffFailed(error), fresh: true)
            }
            return .applied(
                RoomChange(
                    kind: .diff, room: entry.replica.room, previousPosition: current.position,
                    position: position, operations: operations, snapshot: snapshot,
                    updates: BatchUpdates(from: current.snapshot, to: snapshot, operations: operations)))
        }
    }

    /// The one DIFF of a folded catch-up (PROTOCOL.md §11.12): at the CATCHUP's `to_version`,
    /// applied to the replica's state, which must then have the CATCHUP's digest. Its chain is
    /// the room's at that version and is taken, not computed: the replica did not see the DIFFs
    /// it folds, and the digest checks the state instead.
    /// - Complexity: the apply plus O(n) for the digest.
    static func applyFolded(
        _ catchUp: inout CatchUp, digest: SnapshotDigest, _ entry: inout RoomEntry, at position: RoomPosition,
        by operations: [SnapshotOperation], chain: RoomChain?, limits: SnapshotLimits
    ) -> DiffOutcome {
        let expected = RoomPosition(epoch: catchUp.epoch, version: catchUp.toVersion)
        guard position == expected else { return .broken(.outOfSequence(expected: expected, received: position), fresh: true) }
        do {
            try catchUp.working.apply(operations, limits: limits)
        } catch {
            return .broken(.diffFailed(error), fresh: true)
        }
        let computed = catchUp.working.digest
        guard computed == digest else { return .broken(.corrupted(expected: digest, computed: computed), fresh: true) }
        catchUp.operations = operations
        catchUp.version = position.version
        catchUp.chain = chain
        entry.phase = .catchingUp(catchUp)
        return .caughtUp
    }

    /// The chain after a DIFF whose chain field is `received` (nil: the connection's version has
    /// none), applied to a replica whose chain is `held` (PROTOCOL.md §9, "The room's chain"):
    /// the hash of `held` and the DIFF's frame without its chain, which is the canonical
    /// encoding of the DIFF's fields (the decoder refuses any other: minimal varints, known
    /// flag values), so it is encoded again here rather than kept from the socket. A chain of
    /// 32 zero bytes on either side is one the server does not know: taken, not compared.
    /// - Complexity: O(size of the DIFF): one encoding and one SHA-256.
    static func chain(
        after held: RoomChain?, room: String, position: RoomPosition, operations: [SnapshotOperation], received: RoomChain?
    ) -> ChainCheck {
        guard let received else { return .follows(nil) }
        guard let held, held != .unknown, received != .unknown else { return .follows(received) }
        let frame = FrameEncoder().encode(.diff(room: room, epoch: position.epoch, version: position.version, ops: operations))
        let expected = held.next(frame: frame)
        return expected == received ? .follows(received) : .diverged(.diverged(expected: expected, received: received))
    }

    enum ChainCheck {
        /// The DIFF follows the replica; the replica's chain after it.
        case follows(RoomChain?)
        case diverged(ResyncReason)
    }

    /// The catch-up reached its target version: publish it as one change.
    func finishCatchUp(_ room: String) {
        guard var entry = rooms[room], case .catchingUp(let catchUp) = entry.phase else { return }
        entry.phase = .live
        entry.chain = catchUp.chain
        entry.resyncReason = nil
        rooms[room] = entry
        let old = entry.replica.current
        entry.replica.publish(
            RoomChange(
                kind: .catchUp, room: room, previousPosition: old.position,
                position: RoomPosition(epoch: catchUp.epoch, version: catchUp.version),
                operations: catchUp.operations, snapshot: catchUp.working,
                updates: BatchUpdates(
                    from: old.snapshot, to: catchUp.working,
                    operations: catchUp.operations)))
    }

    /// Re-synchronises a replica that can no longer follow its DIFFs: JOIN again (a server
    /// answers a JOIN of a room already joined with its state and keeps the membership, so no
    /// DIFF is missed; the DIFFs that arrive before the answer are older than it and ignored).
    ///
    /// A replica that is merely behind (a gap, another epoch) resumes from its position: a
    /// CATCHUP if the history still has the versions, else a SNAPSHOT. A replica whose content is
    /// suspect (a DIFF did not apply, a digest or a chain did not match) asks for a fresh SNAPSHOT. A
    /// SNAPSHOT answer is published as `.resync(reason)`.
    func resync(_ room: String, _ reason: ResyncReason) {
        guard rooms[room] != nil else { return }
        eventSink.yield(.resyncing(room: room, reason: reason))
        rooms[room]!.resyncReason = reason
        switch reason {
        case .digestMismatch, .diffFailed, .diverged, .corrupted: rooms[room]!.distrusted = true
        case .historyUnavailable, .outOfSequence: break
        }
        rooms[room]!.phase = .detached
        // Without a connection, the rejoin after the reconnect is the fresh JOIN.
        sendJoin(room)
    }

    /// A SNAPSHOT or CATCHUP arrived for a join nobody waits for any more (it timed out, or the
    /// room was left meanwhile): the server counts this connection as a member, so leave again,
    /// unless a LEAVE is already on its way.
    func abandonedJoinAnswered(_ room: String) {
        // The room is followed another way now (joined whole, or through a window): the
        // membership the answer reports is the one wanted.
        guard rooms[room] == nil, windows[room] == nil else { return }
        let leaving = requests.values.contains { request in
            switch request {
            // A DROP ends the membership too, so a join answered meanwhile needs no LEAVE.
            case .leave(let r, _), .drop(let r, _): return r == room
            default: return false
            }
        }
        if !leaving { sendLeave(room, call: nil) }
    }

    /// LEFT: the server removed this connection from `room` (a refreshed token no longer grants
    /// reading it). The replica is dropped at once, before any other change could be published
    /// to it, so a UI never receives batch updates for a room it was told is gone; joins still
    /// waiting for it fail. Writes to the room in flight are left to the server's answer: one
    /// may have been applied.
    func handleLeft(room: String, code: UInt64, message: String) {
        if windows[room] != nil { return windowLeft(room: room, code: code, message: message) }
        guard let entry = rooms.removeValue(forKey: room) else { return }  // the app left it meanwhile
        entry.replica.finish()
        let error: SnapSyncError =
            code == ErrorCode.forbidden.rawValue
            ? .forbidden(room: room, right: "read", message: message)
            : .rejected(.init(rawCode: code, operationIndex: nil, identifier: nil, message: message))
        if entry.loaded { eventSink.yield(Self.event(forLeft: room, code: code, error: error)) }
        for call in entry.joinCalls { complete(call, .failure(error)) }
    }

    func handleAck(requestID: UInt64, position: RoomPosition) {
        switch requests.removeValue(forKey: requestID) {
        case .write? where loseNextWriteAck:
            // The write stays in `writes`: it is resent after the reconnect.
            loseNextWriteAck = false
            link.connection?.drop()
        case .write(let call)?:
            complete(call, .success(.position(position)))
        case .leave(_, let call)?:
            if let call { complete(call, .success(.done)) }
        case .drop(_, let call)?:
            complete(call, .success(.done))
        case .auth(let fresh)?:
            refreshAcknowledged(fresh)
        case .join(let room)?:
            violation("ACK answers JOIN \(room) (request \(requestID))")
        case .verify(let room, _)?:
            violation("ACK answers VERIFY \(room) (request \(requestID))")
        case .setPresence(_, let call)?:
            if let call { complete(call, .success(.done)) }
        case .presenceWatch(let room)?, .presenceList(let room, _)?:
            violation("ACK answers a presence read of \(room) (request \(requestID))")
        case .window(let room)?:
            violation("ACK answers WINDOW \(room) (request \(requestID))")
        case nil:
            violation("ACK answers no request (request \(requestID))")
        }
    }

    func handleReject(requestID: UInt64, _ rejection: SnapSyncError.Rejection) {
        switch requests.removeValue(forKey: requestID) {
        case .write(let call)?:
            let room = writes[call]?.room ?? ""
            complete(call, .failure(rejection.code == .forbidden ? .forbidden(room: room, right: "write", message: rejection.message) : .rejected(rejection)))
        case .leave(_, let call)?:
            // Not joined server-side is what a LEAVE wants.
            guard let call else { return }
            complete(call, rejection.code == .notJoined ? .success(.done) : .failure(.rejected(rejection)))
        case .drop(let room, let call)?:
            complete(
                call,
                .failure(rejection.code == .forbidden ? .forbidden(room: room, right: "admin", message: rejection.message) : .rejected(rejection)))
        case .join(let room)?:
            guard let entry = rooms[room], case .joining(let current) = entry.phase, current == requestID else { return }
            rooms[room] = nil
            entry.replica.finish()
            let error: SnapSyncError =
                rejection.code == .forbidden ? .forbidden(room: room, right: "read", message: rejection.message) : .rejected(rejection)
            if entry.loaded { eventSink.yield(.roomLost(room: room, error: error)) }
            for call in entry.joinCalls { complete(call, .failure(error)) }
        case .verify(let room, let call)?:
            complete(call, .failure(rejection.code == .notJoined ? .notJoined(room: room) : .rejected(rejection)))
        case .presenceWatch(let room)?:
            presenceWatchRefused(room, presenceError(rejection, "PRESENCE_WATCH", room))
        case .presenceList(let room, let call)?:
            complete(call, .failure(presenceError(rejection, "PRESENCE_LIST", room)))
        case .setPresence(let room, let call)?:
            // The state set again after a reconnect (no call) is not worth a retry: a state
            // refused is not set, and the app's next one will be.
            if let call { complete(call, .failure(presenceError(rejection, "SET_PRESENCE", room))) }
        case .window(let room)?:
            windowRejected(room: room, requestID: requestID, rejection)
        case .auth?:
            // A server answers AUTH with ACK, refuses it with ERROR and closes, or declines a new
            // token for now (REJECT busy, PROTOCOL.md §8.4): the token in use stays, and the
            // refresh is tried again later, as after a provider failure.
            guard rejection.code == .busy else { return violation("REJECT answers AUTH (request \(requestID))") }
            refreshFailures += 1
            scheduleRefresh()
        case nil:
            violation("REJECT answers no request (request \(requestID))")
        }
    }
}
