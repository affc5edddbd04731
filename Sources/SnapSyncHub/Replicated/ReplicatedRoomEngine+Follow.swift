import Logging
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// Cluster mode: a room is resident while this node follows it in the cluster's log
// (`RoomLog`). The first JOIN, write or DROP of a room creates its `ReplicatedRoom` in the loading
// state and follows it; the log delivers the base (the latest checkpoint, or nothing: an empty
// room at the epoch every node derives alike), the records after it, then `.current`, and the
// requests that waited are answered in order. Writes: ReplicatedRoomEngine+Writes.swift; records:
// ReplicatedRoomEngine+Records.swift.

extension ReplicatedRoomEngine {
    /// The replica of the room `name`, created and followed if this node does not follow it
    /// (refused at `--max-rooms` unless `beyondLimit`). The caller has validated the name and the
    /// right.
    func replica(named name: String, beyondLimit: Bool = false) -> Result<ReplicatedRoom, Rejection> {
        let key = RoomName(name)
        if let replica = replicas[key] { return .success(replica) }
        guard beyondLimit || replicas.count < hub.configuration.maxRooms else {
            return .failure(Rejection(.tooManyRooms, "the server is at its limit of \(hub.configuration.maxRooms) rooms"))
        }
        let replica = ReplicatedRoom(name: name, now: hub.monotonicNow())
        replicas[key] = replica
        follow(replica)
        return .success(replica)
    }

    /// Asks the log for the room's events; they are ignored once the hub has forgotten this
    /// replica (a later one of the same name follows again).
    func follow(_ replica: ReplicatedRoom) {
        replica.waitingSince = hub.monotonicNow()
        log.follow(room: replica.name) { [weak self, weak replica] event in
            guard let self, let replica, self.replicas[RoomName(replica.name)] === replica else { return }
            let applied = replica.logSequence
            self.handle(event, for: replica)
            // Progress: the stall bound counts from the last record (or base) that moved the
            // replica, so a long backlog applied record by record is no stall.
            if replica.logSequence > applied { replica.waitingSince = self.hub.monotonicNow() }
            self.releaseBarriers(of: replica)
            self.hub.resumeSessions()
        }
    }

    private func handle(_ event: RoomLogEvent, for replica: ReplicatedRoom) {
        switch event {
        case .base(let checkpoint): loadBase(checkpoint, into: replica)
        case .record(let sequence, let expected, let entry): apply(entry, at: sequence, expected: expected, to: replica)
        case .current: becameCurrent(replica)
        case .failed(let error): followFailed(replica, error: error)
        }
    }

    /// JOIN in cluster mode: answered at once from a loaded room (even one whose follow broke:
    /// reads go on), or when the room has loaded; a resume ahead of the replica first waits for
    /// a read barrier (ReplicatedRoomEngine+Barriers.swift).
    func join(requestID: UInt64, roomName: String, resume: ResumePoint?, from session: Session) {
        let replica: ReplicatedRoom
        switch self.replica(named: roomName) {
        case .success(let found): replica = found
        case .failure(let rejection):
            hub.send(rejection.message(requestID: requestID), to: session)
            return
        }
        guard replica.phase != .loading, let room = replica.room else {
            replica.joins.append(.init(requestID: requestID, resume: resume, session: session))
            hub.awaitLog(session)
            return
        }
        if Self.resumeNeedsBarrier(resume, room: room) {
            hub.awaitLog(session)
            startBarrier(.join(.init(requestID: requestID, resume: resume, session: session)), for: replica)
            return
        }
        hub.completeJoin(requestID: requestID, room: room, resume: resume, from: session)
    }

    // MARK: Loading

    /// The room a checkpoint holds. Its chain before the history, advanced over the history by
    /// `Room.init` (one SHA-256 per DIFF), gives the chain after each kept DIFF, which a version 3
    /// CATCHUP through it carries; when that does not end at the checkpoint's own chain, the
    /// history's chains are not trusted (unknown) and the checkpoint's chain alone is taken.
    /// A checkpoint of version 0 is an incarnation's start, whose chain every node knows.
    func room(named name: String, from checkpoint: RoomLogCheckpoint) -> Room {
        let image = checkpoint.image
        func make(chainBeforeHistory: RoomChain?) -> Room {
            Room(
                name: name, epoch: image.epoch, version: image.version, snapshot: image.snapshot, limits: hub.configuration.wire,
                maxHistoryBytes: hub.configuration.historyBytes, history: checkpoint.history, chain: chainBeforeHistory,
                foldsResumes: hub.configuration.foldResumes, idleSince: hub.monotonicNow())
        }
        var room = make(chainBeforeHistory: image.chain ?? (image.version == 0 && checkpoint.history.isEmpty ? .start(epoch: image.epoch) : nil))
        if let chain = checkpoint.chain, room.chain != chain {
            if room.chain != nil { room = make(chainBeforeHistory: nil) }
            room.chain = chain
        }
        return room
    }

    /// `.base`: the room as the checkpoint has it, or empty at the first epoch. Following again
    /// after a failure keeps the replica unless the checkpoint is past it (the log delivers only
    /// the records after the checkpoint): then the replica is replaced by the checkpoint's room,
    /// and each member is sent the DIFFs it missed from the checkpoint's history, or LEFT
    /// `storage_failure` when the history does not reach back to it (PROTOCOL.md §8.4).
    /// A checkpoint over this node's content limits is not loaded (`refuseOverLimit`).
    private func loadBase(_ checkpoint: RoomLogCheckpoint?, into replica: ReplicatedRoom) {
        if replica.room != nil {
            guard let checkpoint, checkpoint.sequence > replica.logSequence else { return }
        }
        // As at a restart (`restore`): a room over this node's content limits could not be
        // served (a conforming client refuses its SNAPSHOT).
        if let checkpoint, let violation = checkpoint.image.snapshot.firstLimitViolation(hub.configuration.wire.model) {
            refuseOverLimit(replica, Hub.overLimit(room: replica.name, snapshot: checkpoint.image.snapshot, violation))
            return
        }
        var members: [Session] = []
        var old: Room?
        if let current = replica.room {
            members = current.members.sessions
            for member in members { hub.removeMember(member, from: current, reason: .removed) }
            hub.forget(current)
            old = current
        }
        let room: Room
        if let checkpoint {
            room = self.room(named: replica.name, from: checkpoint)
            replica.logSequence = checkpoint.sequence
        } else {
            let epoch = log.epoch(room: replica.name, after: 0)
            room = Room(
                name: replica.name, epoch: epoch, version: 0, snapshot: RoomSnapshot(), limits: hub.configuration.wire,
                maxHistoryBytes: hub.configuration.historyBytes, chain: .start(epoch: epoch), foldsResumes: hub.configuration.foldResumes,
                idleSince: hub.monotonicNow())
            replica.logSequence = 0
        }
        replica.room = room
        hub.install(room)
        guard let old else { return }
        // A replica whose follow failed (a record that did not follow it) may have been on
        // another history than the log's: its members are brought up to date from the
        // checkpoint's history only if the replica's chain leads to the checkpoint's.
        let continues = checkpoint.map { Self.chain(of: old, leadsTo: $0) } ?? true
        if !continues {
            hub.logger.error(
                "room \(LogEscaping.line(room.name)) diverged from the cluster's log: this node's copy at version \(old.version) of epoch \(old.epoch) does not lead to the checkpoint at version \(room.version); its members are sent LEFT"
            )
            hub.stats.clusterDivergences += 1
        }
        for member in members {
            if continues, hub.refuseOutline(room, to: member) == nil,
                case .catchup(_, _, let frames) = hub.answerJoin(
                    room, resume: ResumePoint(position: RoomPosition(epoch: old.epoch, version: old.version)), for: member)
            {
                hub.addMember(member, to: room)
                hub.sendHistory(frames, after: old.version, of: room, to: member)
            } else {
                hub.send(
                    .left(
                        room: room.name, code: ErrorCode.storageFailure.rawValue,
                        message: "room \(LogEscaping.line(room.name)): this node missed versions the cluster's log no longer holds; join again"),
                    to: member)
            }
        }
    }

    /// Whether `old`'s chain, advanced by the DIFFs of `checkpoint`'s history after `old`'s
    /// version, is the checkpoint's chain: `old` is then a state of the history the checkpoint
    /// ends. True when that cannot be told (a chain not known, another epoch, a history that
    /// does not reach back to `old`): a catch-up is then refused by `Hub.answerJoin` anyway, or
    /// the chains were not kept.
    /// - Complexity: O(size of the history's frames after `old`).
    static func chain(of old: Room, leadsTo checkpoint: RoomLogCheckpoint) -> Bool {
        guard let chain = old.chain, let target = checkpoint.chain, old.epoch == checkpoint.image.epoch,
            old.version <= checkpoint.image.version
        else { return true }
        let later = checkpoint.history.filter { $0.version > old.version }
        guard later.count == Int(checkpoint.image.version - old.version) else { return true }
        return later.reduce(chain) { $0.next(frame: $1.diffFrame) } == target
    }

    /// The room as the log has it is over this node's content limits: this node cannot serve
    /// it. The follow ends and the replica is forgotten as one that could not load: what waits
    /// is refused, and the members of the room it had (followed again after a failure) are sent
    /// LEFT `storage_failure` (the room has not ended: a node with larger limits serves it).
    private func refuseOverLimit(_ replica: ReplicatedRoom, _ error: ServerError) {
        log.unfollow(room: replica.name)
        if let current = replica.room {
            hub.endRoom(
                current, code: .storageFailure,
                "room \(LogEscaping.line(replica.name)) cannot be served by this node as the cluster's log now has it: \(error)")
            replica.room = nil
            // No room: loading again, which `followFailed` ends by forgetting the replica.
            replica.phase = .loading
        }
        followFailed(replica, error: error)
    }

    /// `.current`: the JOINs that waited are answered, in order (a resume ahead of the replica
    /// after a read barrier: a JOIN that came after the follow began may name records stored
    /// since), then the writes go.
    private func becameCurrent(_ replica: ReplicatedRoom) {
        replica.phase = .current
        replica.failedFollows = 0
        let joins = replica.joins
        replica.joins = []
        if let room = replica.room {
            for join in joins { answerLoadedJoin(join, of: replica, room: room) }
        }
        proposeNext(replica)
    }

    /// `.failed`: while loading, every request that waited is refused and the room forgotten;
    /// after, the room goes on serving reads and refuses writes until it is followed again.
    func followFailed(_ replica: ReplicatedRoom, error: any Error) {
        hub.stats.clusterFollowFailures += 1
        let name = LogEscaping.line(replica.name)
        if replica.phase == .loading {
            hub.logger.warning("cannot load room \(name) from the cluster's log: \(error)")
            forgetReplica(replica, Rejection(.storageFailure, "room \(name) cannot be loaded from the cluster's log: \(error)"))
            return
        }
        let delay = replica.scheduleRefollow(now: hub.monotonicNow())
        hub.logger.warning(
            "lost the follow of room \(name) in the cluster's log, following it again in \(delay) (failure \(replica.failedFollows) in a row): \(error)")
        replica.phase = .broken
        refuseWrites(
            of: replica,
            Rejection(
                .storageFailure,
                "room \(name): this node lost its place in the cluster's log (\(error)); a write in flight may still be applied: a retry with the same write id is safe"
            ))
    }

    /// Takes `replica` out of the hub (its follow has ended or is no longer wanted). Whatever
    /// waits on it is refused with `rejection` first: the JOINs waiting for it to load or for a
    /// read barrier, and its writes, so that every session's wait for the log (`awaitLog`) ends;
    /// then its room leaves the hub. A later request follows the room anew.
    /// - Complexity: O(what waits + members).
    func forgetReplica(_ replica: ReplicatedRoom, _ rejection: Rejection) {
        let joins = replica.joins
        replica.joins = []
        for join in joins {
            hub.send(rejection.message(requestID: join.requestID), to: join.session)
            hub.logAnswered(join.session)
        }
        refuseBarriers(of: replica, rejection)
        refuseWrites(of: replica, rejection)
        if let room = replica.room {
            for member in room.members.sessions { hub.removeMember(member, from: room, reason: .removed) }
            hub.forget(room)
        }
        if replicas[RoomName(replica.name)] === replica { replicas[RoomName(replica.name)] = nil }
    }

    // MARK: The one-second timer

    /// Gives up the read barriers waiting for `ReplicatedRoom.stallSeconds`, proposes again the
    /// records the log left undecided (`.pending`), follows again the rooms whose follow failed, ends the follows stalled for as long, and stops following the rooms nobody here uses (no member,
    /// nothing in flight or waiting) idle for `clusterIdleSeconds`.
    /// - Complexity: O(followed rooms) per call, once a second.
    package func maintainReplicas(now: ContinuousClock.Instant) {
        expireBarriers(now: now)
        let idleFor = Duration.seconds(hub.configuration.clusterIdleSeconds)
        let stall = Duration.seconds(ReplicatedRoom.stallSeconds)
        var unused: [ReplicatedRoom] = []
        var stalled: [ReplicatedRoom] = []
        for replica in replicas.values {
            if replica.waitsForRecords && now - replica.waitingSince >= stall {
                stalled.append(replica)
                continue
            }
            if replica.inFlight?.pending == true, replica.phase == .current { publish(replica) }
            switch replica.phase {
            case .broken:
                if replica.isUnused {
                    unused.append(replica)
                } else if now >= replica.followAgainAt {
                    replica.phase = .refollowing
                    follow(replica)
                }
            case .current:
                if replica.isUnused, let room = replica.room, now - room.idleSince >= idleFor { unused.append(replica) }
            case .loading, .refollowing:
                break
            }
        }
        for replica in stalled {
            log.unfollow(room: replica.name)
            followFailed(
                replica, error: StoreError.logUnavailable("room \(replica.name): the log delivered nothing for \(ReplicatedRoom.stallSeconds) s"))
        }
        for replica in unused {
            log.unfollow(room: replica.name)
            forgetReplica(replica, Rejection(.storageFailure, "room \(LogEscaping.line(replica.name)) is no longer followed by this node"))
            hub.logger.debug("room unfollowed", metadata: ["room": "\(LogEscaping.line(replica.name))"])
        }
        hub.resumeSessions()
    }
}
