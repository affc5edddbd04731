internal import Logging
package import SnapSyncStore

/// One followed room: where its follow stands (Protocol/CLUSTER.md, "Following a room").
final class RoomFollow {
    let id: UInt64
    let room: String
    let events: (RoomLogEvent) -> Void
    /// False once unfollowed, failed or closed: nothing more reaches `events`.
    var active = true
    /// The consumer in use is this follow's `generation`-th; its deliveries come to
    /// `<deliveryPrefix>.<id>.<generation>`, so those of a replaced consumer are told apart and dropped.
    var generation: UInt64 = 0
    /// The connection's subscription to that deliver subject.
    var subscription: UInt64?
    /// The consumer's name, once its creation answered or its first delivery named it.
    var consumer: String?
    /// The server the consumer runs on, as its creation said (for the logs).
    var consumerServer: String?
    var awaitingCreation = false
    /// Failed creations in a row while recovering; a new attempt is due at the next tick.
    var failedCreations = 0
    var creationDue = false
    /// The stream sequence of the last record delivered (or of the base).
    var lastStreamSequence: UInt64 = 0
    /// The consumer sequence of the last delivery of this generation: each delivery must be the
    /// next one, else something was lost (a slow-consumer drop, a reconnect).
    var lastConsumerSequence: UInt64 = 0
    var isCurrent = false
    /// The subject's last sequence as the stream's leader answered after the checkpoint read
    /// (`lastSequence`): caught up once `lastStreamSequence` reaches it. Not the consumer's own
    /// count of what is pending, which can say 0 while a record it never delivers is stored.
    var target: UInt64?
    /// Not current, with records known to be stored after the last one delivered: its consumer
    /// is never idle, so a heartbeat's silence already means it delivers nothing. O(1).
    var hasRecordsToDeliver: Bool { !isCurrent && (target.map { $0 > lastStreamSequence } ?? false) }
    var awaitingTarget = false
    /// Failed target reads in a row while recovering; a new one is due at the next tick.
    var failedTargetReads = 0
    var targetDue = false
    /// The last time the consumer was heard from (a delivery, a heartbeat, its creation).
    var lastHeard: ContinuousClock.Instant = .now

    init(id: UInt64, room: String, events: @escaping (RoomLogEvent) -> Void) {
        self.id = id
        self.room = room
        self.events = events
    }
}

extension JetStreamRoomLog {
    package func follow(room: String, events: @escaping (RoomLogEvent) -> Void) {
        precondition(followsByRoom[room] == nil, "room \(room) is followed already")
        let follow = RoomFollow(id: nextFollowID, room: room, events: events)
        nextFollowID += 1
        follows[follow.id] = follow
        followsByRoom[room] = follow
        readCheckpoint(follow)
    }

    package func unfollow(room: String) {
        guard let follow = followsByRoom[room] else { return }
        end(follow)
    }

    /// Step 1: the room's checkpoint, by a direct get of its key's last value (any replica of the
    /// bucket answers; 404: none).
    private func readCheckpoint(_ follow: RoomFollow) {
        let room = follow.room
        let body = #"{"last_by_subj":"\#(RoomSubjects.checkpointSubject(room: room))"}"#
        request(
            subject: "$JS.API.DIRECT.GET.\(RoomSubjects.checkpointsStream)", payload: Array(body.utf8),
            operation: "read the checkpoint of room \(room)"
        ) { [weak self] result in
            guard let self, follow.active else { return }
            let checkpoint: RoomLogCheckpoint?
            switch result {
            case .failure(let error):
                return self.fail(follow, error)
            case .success(let reply) where reply.status == "404":
                checkpoint = nil
            case .success(let reply) where reply.status != nil:
                return self.fail(
                    follow,
                    .logUnavailable("read the checkpoint of room \(room): status \(reply.status ?? "") \(reply.statusDescription ?? "")"))
            case .success(let reply):
                let key = RoomSubjects.key(room: room)
                do throws(StoreError) {
                    let read = try RoomLogCheckpoint(value: reply.data, key: key)
                    guard read.image.room == room else {
                        return self.fail(follow, .corrupt(path: "checkpoint \(key)", offset: 0, reason: "it is room \(read.image.room)'s, not \(room)'s"))
                    }
                    checkpoint = read
                } catch {
                    return self.fail(follow, error)
                }
            }
            follow.lastStreamSequence = checkpoint?.sequence ?? 0
            follow.events(.base(checkpoint))
            guard follow.active else { return }
            // Both at once: a record stored after the target's read is delivered anyway, and
            // is simply not waited for.
            self.readTarget(follow)
            self.createConsumer(follow)
        }
    }

    /// Step 3, the catch-up's barrier: the subject's last sequence from the stream's leader. A
    /// failure ends a starting follow (as a failed checkpoint read does); a recovering one tries
    /// again at the next tick, as many times as a consumer creation.
    private func readTarget(_ follow: RoomFollow) {
        follow.awaitingTarget = true
        lastSequence(room: follow.room) { [weak self] result in
            guard let self, follow.active else { return }
            follow.awaitingTarget = false
            switch result {
            case .success(let target):
                follow.failedTargetReads = 0
                follow.target = target
                self.reachCurrentIfCaughtUp(follow)
            case .failure(let error):
                follow.failedTargetReads += 1
                guard follow.generation > 1, follow.failedTargetReads < self.recoveryAttempts else {
                    return self.fail(follow, error)
                }
                self.logger.warning(
                    "follow of room \(follow.room): \(error); trying again (attempt \(follow.failedTargetReads + 1) of \(self.recoveryAttempts))")
                follow.targetDue = true
            }
        }
    }

    /// Step 2: a consumer delivering the room's subject from the record after
    /// `lastStreamSequence`. Also how a follow recovers from a lost delivery or a silent consumer.
    private func createConsumer(_ follow: RoomFollow) {
        unsubscribe(follow)
        follow.generation += 1
        follow.consumer = nil
        follow.awaitingCreation = true
        follow.lastConsumerSequence = 0
        follow.lastHeard = .now
        let generation = follow.generation
        let room = follow.room
        let deliverSubject = "\(deliveryPrefix).\(follow.id).\(generation)"
        // Subscribed before the consumer exists (SUB goes out before the request, on one
        // connection), so that its first deliveries find the interest.
        do {
            let subscription = try connection.subscribe(deliverSubject)
            follow.subscription = subscription
            followsBySubscription[subscription] = (follow.id, generation)
        } catch {
            return later { [weak self] in
                guard follow.active, follow.generation == generation else { return }
                self?.fail(follow, .logUnavailable("follow room \(room): \(error)"))
            }
        }
        let request = ConsumerCreateRequest(
            stream_name: RoomSubjects.roomsStream,
            config: .init(
                deliver_subject: deliverSubject,
                opt_start_seq: follow.lastStreamSequence + 1, filter_subject: RoomSubjects.subject(room: room),
                idle_heartbeat: heartbeat.nanoseconds, inactive_threshold: (heartbeat * 6).nanoseconds))
        self.request(
            subject: "$JS.API.CONSUMER.CREATE.\(RoomSubjects.roomsStream)", payload: request.encoded(),
            operation: "create the consumer of room \(room)"
        ) { [weak self] result in
            guard let self else { return }
            let response: JetStreamAPIResponse?
            switch result {
            case .success(let reply) where reply.status == nil: response = JetStreamAPIResponse.decode(reply.data)
            default: response = nil
            }
            guard follow.active, follow.generation == generation else {
                // Unfollowed (or replaced) while being created: it must not deliver for ever.
                if let name = response?.name { self.deleteConsumer(name) }
                return
            }
            follow.awaitingCreation = false
            guard let response, let name = response.name else {
                let why: String
                switch result {
                case .failure(let error): why = "\(error)"
                case .success(let reply):
                    why =
                        reply.status.map { "create the consumer of room \(room): status \($0) \(reply.statusDescription ?? "")" }
                        ?? "create the consumer of room \(room): \(response?.errorText ?? "an answer that is not JSON")"
                }
                // A recovery follows a server's death, after which JetStream's API may not answer
                // until its leaders are elected again (seen: over 20 s): it tries again, at each
                // tick, for as many attempts; a first follow says at once that it cannot start.
                follow.failedCreations += 1
                guard generation > 1, follow.failedCreations < self.recoveryAttempts else {
                    return self.fail(follow, .logUnavailable(why))
                }
                self.logger.warning("follow of room \(room): \(why); trying again (attempt \(follow.failedCreations + 1) of \(self.recoveryAttempts))")
                follow.creationDue = true
                return
            }
            follow.failedCreations = 0
            follow.consumer = name
            follow.consumerServer = response.cluster?.leader
            follow.lastHeard = .now
            self.reachCurrentIfCaughtUp(follow)
        }
    }

    /// A message to a consumer's deliver subject: a record, or a status (a heartbeat).
    func deliver(_ message: InboxMessage, follow id: UInt64, generation: UInt64) {
        // `route` sends only the messages of a current generation's subscription: defensive.
        guard let follow = follows[id], follow.generation == generation else { return }
        follow.lastHeard = .now
        if let status = message.status {
            // 100: an idle heartbeat, which says what the consumer sent last.
            if status == "100", let last = message.lastConsumerSequence, last > follow.lastConsumerSequence {
                recover(follow, "its consumer sent delivery \(last), the last one received is \(follow.lastConsumerSequence)")
            } else if status != "100" {
                recover(follow, "its consumer answered status \(status) \(message.statusDescription ?? "")")
            }
            return
        }
        guard let metadata = DeliveryMetadata(replySubject: message.reply) else {
            return fail(follow, .logUnavailable("follow room \(follow.room): a delivery without JetStream metadata (\(message.reply))"))
        }
        if follow.consumer == nil { follow.consumer = metadata.consumer }
        guard metadata.consumerSequence == follow.lastConsumerSequence + 1 else {
            if metadata.consumerSequence > follow.lastConsumerSequence {
                recover(follow, "delivery \(metadata.consumerSequence) came after \(follow.lastConsumerSequence)")
            }
            return
        }
        follow.lastConsumerSequence = metadata.consumerSequence
        let entry: RoomLogEntry
        do {
            entry = try RoomLogEntry(payload: message.data)
        } catch {
            return fail(
                follow,
                .corrupt(path: "room \(follow.room) record at sequence \(metadata.streamSequence)", offset: 0, reason: "\(error)"))
        }
        guard let expected = message.expectedLastSubjectSequence else {
            return fail(
                follow,
                .corrupt(
                    path: "room \(follow.room) record at sequence \(metadata.streamSequence)", offset: 0,
                    reason: "no Nats-Expected-Last-Subject-Sequence header"))
        }
        follow.lastStreamSequence = metadata.streamSequence
        follow.events(.record(sequence: metadata.streamSequence, expected: expected, entry))
        guard follow.active else { return }
        reachCurrentIfCaughtUp(follow)
    }

    /// Caught up once the record at the target (or a later one, or a base past it) is applied
    /// and the consumer exists (its creation answered, or it delivered): a follow whose consumer
    /// cannot be made (no meta leader) fails without having been current. The delivery's
    /// `pending` and the creation's `num_pending` are not used: they are the consumer's view,
    /// which runs on any replica of the stream, and one that has not applied the latest records
    /// yet, or whose deliver subject's interest has not reached its server, says 0 and delivers
    /// nothing.
    private func reachCurrentIfCaughtUp(_ follow: RoomFollow) {
        guard !follow.isCurrent, follow.consumer != nil, let target = follow.target, follow.lastStreamSequence >= target else { return }
        follow.isCurrent = true
        follow.events(.current)
    }

    /// A follow whose consumer lost a delivery or went silent gets a new consumer from the
    /// record after the last one delivered: the events go on as if nothing happened.
    private func recover(_ follow: RoomFollow, _ why: String) {
        logger.warning(
            "follow of room \(follow.room): \(why) (consumer \(follow.consumer ?? "?") on \(follow.consumerServer ?? "?")); recreating it from sequence \(follow.lastStreamSequence + 1)"
        )
        if let consumer = follow.consumer { deleteConsumer(consumer) }
        createConsumer(follow)
    }

    /// The tick's check: a consumer heard from neither by a delivery nor by a heartbeat for three
    /// heartbeats is gone (its server died, or it was removed): recover. Before the follow is
    /// current, with records to deliver (`hasRecordsToDeliver`), one heartbeat of silence is
    /// enough (an idle consumer's first heartbeat comes one heartbeat after it was created, so a
    /// follow without records to deliver keeps three): a consumer with records to deliver is never
    /// idle, so its silence means it delivers nothing (no interest reached its server), and a
    /// JOIN waiting for the room must not wait three heartbeats. A recovery whose creation or
    /// target read failed tries again. O(follows).
    func checkHeartbeats(now: ContinuousClock.Instant) {
        for follow in follows.values {
            if follow.targetDue, !follow.awaitingTarget {
                follow.targetDue = false
                readTarget(follow)
            }
            guard !follow.awaitingCreation else { continue }
            if follow.creationDue {
                follow.creationDue = false
                createConsumer(follow)
            } else if now - follow.lastHeard > heartbeat * (follow.hasRecordsToDeliver ? 1 : 3) {
                let state = follow.isCurrent ? "" : ", before the follow was current"
                recover(follow, "its consumer has been silent for \(now - follow.lastHeard)\(state)")
            }
        }
    }

    /// Consumer creations a recovering follow tries (each waits up to `requestTimeout`) before
    /// it fails, unless `connect` is given another number: a minute with the default 5 s
    /// timeout, since after a server's death JetStream's API has been seen silent for over 30 s
    /// on a loaded machine while publishes already worked.
    package static var defaultRecoveryAttempts: Int { 12 }

    private func fail(_ follow: RoomFollow, _ error: StoreError) {
        logger.warning("follow of room \(follow.room) failed: \(error)")
        end(follow)
        follow.events(.failed(error))
    }

    private func end(_ follow: RoomFollow) {
        follow.active = false
        follows.removeValue(forKey: follow.id)
        if followsByRoom[follow.room] === follow { followsByRoom.removeValue(forKey: follow.room) }
        if let consumer = follow.consumer { deleteConsumer(consumer) }
        follow.consumer = nil
        unsubscribe(follow)
    }

    private func unsubscribe(_ follow: RoomFollow) {
        guard let subscription = follow.subscription else { return }
        connection.unsubscribe(subscription)
        followsBySubscription.removeValue(forKey: subscription)
        follow.subscription = nil
    }
}
