package import Logging
package import SnapSyncLoop
package import SnapSyncStore
package import SnapSyncWire

/// `RoomLog` on NATS JetStream (Protocol/CLUSTER.md): a room's records are the messages of its
/// subject in the stream `snapsync-rooms`, its checkpoint the value of its key in the bucket
/// `snapsync-checkpoints`. Every call is asynchronous on the daemon's libevent loop: nothing here
/// blocks the loop thread (the only blocking calls, stream and bucket creation, are in
/// `connect`, before the loop runs).
///
/// A request's reply comes to `<inbox>.r.<token>` (one wildcard subscription); a followed room's
/// consumer delivers to `<deliveryPrefix>.<follow>.<generation>` (a subscription each; its
/// deliveries keep their records' subjects and are told apart by subscription).
/// A one-second tick expires requests without an answer and notices a consumer gone silent.
///
/// Loop thread only, like the rest of the daemon.
package final class JetStreamRoomLog: RoomLog {
    let connection: NATSConnection
    let logger: Logger
    /// The first message of the rooms stream's salt subject, the salt of every epoch.
    package let salt: String
    /// How long a proposal, a checkpoint read or a consumer creation may wait for its answer.
    let requestTimeout: Duration
    /// Consumer creations (or reads of the room's last sequence) a recovering follow tries
    /// before it fails (`defaultRecoveryAttempts`).
    let recoveryAttempts: Int
    /// The consumers' idle heartbeat; a follow that hears nothing for three of them (for one,
    /// before it is current) recreates its consumer.
    let heartbeat: Duration

    /// Consumers deliver to `<deliveryPrefix>.<follow>.<generation>`.
    let deliveryPrefix: String

    /// Checkpoints not saved (too large, refused, no answer) since the start: logged each time.
    package private(set) var checkpointFailures = 0

    var follows: [UInt64: RoomFollow] = [:]
    var followsByRoom: [String: RoomFollow] = [:]
    var nextFollowID: UInt64 = 1
    /// The follow and generation of each consumer's deliver-subject subscription: a delivery
    /// keeps its record's subject, so its subscription is what says whose it is.
    var followsBySubscription: [UInt64: (follow: UInt64, generation: UInt64)] = [:]
    /// Requests awaiting their reply, by the token of their reply subject (0 is never used: it
    /// is the reply subject of requests whose answer nobody waits for).
    private var requests: [UInt64: PendingRequest] = [:]
    private var nextRequestToken: UInt64 = 1
    /// Message ids of writes without a write id: unique to this connection, so never de-duplicated.
    private var nextAnonymousID: UInt64 = 1
    /// Completions to run on the loop's next pass (those of calls refused on the spot), so that
    /// no completion runs inside the call that it answers.
    private var deferred: [() -> Void] = []
    private var deferredEvent: CallbackEvent?
    private var tick: CallbackEvent?
    /// Core NATS subscriptions of the node's other users of this connection (the presence
    /// exchange), by subscription id: their messages go to these handlers, on the loop thread.
    private var coreHandlers: [UInt64: (InboxMessage) -> Void] = [:]
    /// Told of every loss (nil) and re-connection (the server's URL) of the connection, after
    /// the log's own handling: the presence exchange asks the other nodes again.
    var connectionObservers: [(String?) -> Void] = []

    struct PendingRequest {
        var deadline: ContinuousClock.Instant
        var handler: (Result<InboxMessage, StoreError>) -> Void
    }

    /// Connects to `servers` for `loop` (made with locking, after
    /// `EventLoop.enableThreadedAccess()`) after making sure,
    /// on connections of their own, that the rooms stream (`retain` records per room) with its
    /// salt and the checkpoints bucket exist. All three connections reach the servers alike: over TLS when
    /// the URLs are `tls://`, trusting and showing what `tls` names. Blocking: call it before
    /// the loop runs.
    ///
    /// First of all, each server's version is read: one whose JetStream is known to lose
    /// acknowledged writes is refused (`NATSServerVersionCheck`), or with `allowUnsafeServer`
    /// logged as a warning.
    ///
    /// Each step (the version check with the rooms stream, the bucket, the connection) that
    /// fails because the servers cannot serve yet is tried again as `retry` says; the version
    /// check goes with the stream, so a server that did not answer it is checked again on the
    /// next attempt, once it may be up. `ClusterStartRetry.once` (the default) tries once.
    package static func connect(
        servers: [String], tls: NATSTLS = NATSTLS(), loop: EventLoop, retain: Int = 10_000, logger: Logger,
        requestTimeout: Duration = .seconds(5), heartbeat: Duration = .seconds(5),
        recoveryAttempts: Int = JetStreamRoomLog.defaultRecoveryAttempts, allowUnsafeServer: Bool = false,
        retry: ClusterStartRetry = .once
    ) throws(NATSError) -> JetStreamRoomLog {
        let rooms = try retry.run("stream \(RoomSubjects.roomsStream)") { () throws(NATSError) -> StreamInfo in
            try NATSServerVersionCheck.check(servers: servers, allowUnsafe: allowUnsafeServer, logger: logger)
            return try StreamProvisioning.ensureStream(.rooms(retain: retain), servers: servers, tls: tls)
        }
        if let replaced = rooms.replacedMaxMessagesPerSubject {
            // The update is kept (an operator changes the retention so), but the stream is
            // shared: the node started last sets it for all.
            let before = replaced < 0 ? "no limit" : "\(replaced)"
            logger.warning(
                "stream \(RoomSubjects.roomsStream) kept \(before) records per room (max_msgs_per_subject); this node's --cluster-retain \(retain) replaced that for every node: every node should be given the same --cluster-retain"
            )
        }
        guard let salt = rooms.salt else { preconditionFailure("StreamSpec.rooms has a salt subject, so ensureStream reads a salt") }
        _ = try retry.run("bucket snapsync-checkpoints") { () throws(NATSError) in
            try StreamProvisioning.ensureStream(.checkpoints, servers: servers, tls: tls)
        }
        let connection = try retry.run("the connection to NATS") { () throws(NATSError) in
            try NATSConnection(servers: servers, tls: tls, loop: loop)
        }
        do {
            return try JetStreamRoomLog(
                connection: connection, loop: loop, salt: salt, logger: logger,
                requestTimeout: requestTimeout, heartbeat: heartbeat, recoveryAttempts: recoveryAttempts)
        } catch {
            connection.close()
            throw error
        }
    }

    init(
        connection: NATSConnection, loop: EventLoop, salt: String, logger: Logger,
        requestTimeout: Duration, heartbeat: Duration, recoveryAttempts: Int = JetStreamRoomLog.defaultRecoveryAttempts
    ) throws(NATSError) {
        self.connection = connection
        self.salt = salt
        self.logger = logger
        self.requestTimeout = requestTimeout
        self.heartbeat = heartbeat
        self.recoveryAttempts = recoveryAttempts
        deliveryPrefix = try connection.makeInbox()
        // At the flush's priority, libevent's default on the daemon's base of two priorities,
        // which these events have always had: a pass runs them after its reads, accepts and
        // timers, with the flush that sends what they queued.
        deferredEvent = try Self.callbackEvent(loop: loop, every: nil, name: "room log completions") { [weak self] in
            self?.runDeferred()
        }
        tick = try Self.callbackEvent(loop: loop, every: .seconds(1), name: "room log tick") { [weak self] in
            self?.onTick()
        }
        connection.onMessage = { [weak self] message in self?.route(message) }
        connection.onConnectionChange = { [weak self] url in
            guard let self else { return }
            if let url {
                self.logger.info("reconnected to NATS at \(NATSURLRedaction.redacted(url))")
            } else {
                self.logger.warning("lost the connection to NATS; reconnecting (followed rooms recover their consumers)")
            }
            for observer in self.connectionObservers { observer(url) }
        }
    }

    deinit { close() }

    /// A `CallbackEvent` at the flush's priority, its failure told as the room log's errors are.
    private static func callbackEvent(loop: EventLoop, every interval: Duration?, name: String, _ fire: @escaping () -> Void) throws(NATSError)
        -> CallbackEvent
    {
        do {
            return try CallbackEvent(loop: loop, every: interval, priority: .flush, fire)
        } catch {
            throw NATSError(operation: error.function, identifier: name, code: .status(0), text: "libevent could not make an event")
        }
    }

    /// The largest record or checkpoint the servers accept, in bytes (their `max_payload`).
    package var maxPayload: Int { connection.maxPayload }

    /// Stops every follow (no more events), deletes their consumers (without waiting), fails
    /// the proposals still pending (their completions run now) and closes the connection.
    package func close() {
        guard let tick else { return }
        tick.close()
        self.tick = nil
        for follow in follows.values {
            follow.active = false
            if let consumer = follow.consumer { deleteConsumer(consumer) }
        }
        follows.removeAll()
        followsByRoom.removeAll()
        requests.removeAll()
        coreHandlers.removeAll()
        connectionObservers.removeAll()
        connection.close()
        runDeferred()
        deferredEvent?.close()
        deferredEvent = nil
    }

    // MARK: - RoomLog

    package func propose(
        room: String, expectedSequence: UInt64, messageID: [UInt8], entry: RoomLogEntry,
        completion: @escaping (ProposalOutcome) -> Void
    ) {
        let id: String
        if messageID.isEmpty {
            id = "\(connection.inboxPrefix).\(nextAnonymousID)"
            nextAnonymousID += 1
        } else {
            id = RoomSubjects.messageID(room: room, writeID: messageID, expected: expectedSequence)
        }
        do {
            try connection.publish(
                subject: RoomSubjects.subject(room: room), payload: entry.encode(room: room),
                expectedLastSubjectSequence: expectedSequence, messageID: id, timeout: requestTimeout
            ) { result in
                switch result {
                case .success(let ack):
                    completion(.stored(sequence: ack.sequence))
                case .failure(let error) where error.isWrongLastSequence:
                    completion(.superseded)
                case .failure(let error) where error.isDuplicateInProcess:
                    completion(.pending)
                case .failure(let error):
                    completion(.failed(.logUnavailable("propose to room \(room) after sequence \(expectedSequence): \(error)")))
                }
            }
        } catch {
            later { completion(.failed(.logUnavailable("propose to room \(room) after sequence \(expectedSequence): \(error)"))) }
        }
    }

    /// A `$JS.API.STREAM.MSG.GET` of the room subject's last message: answered by the stream's
    /// leader (not a direct get, which any replica may answer from behind), so it covers every
    /// acknowledged record. 404 (`err_code` 10037, no message): the subject is empty. It carries
    /// the whole message, at most `maxPayload`; only its sequence is read.
    package func lastSequence(room: String, completion: @escaping (Result<UInt64, StoreError>) -> Void) {
        let operation = "read the last sequence of room \(room)"
        let body = #"{"last_by_subj":"\#(RoomSubjects.subject(room: room))"}"#
        request(subject: "$JS.API.STREAM.MSG.GET.\(RoomSubjects.roomsStream)", payload: Array(body.utf8), operation: operation) { result in
            switch result {
            case .failure(let error):
                completion(.failure(error))
            case .success(let reply):
                let response = reply.status == nil ? JetStreamAPIResponse.decode(reply.data) : nil
                if let sequence = response?.message?.seq {
                    completion(.success(sequence))
                } else if let error = response?.error, error.code == 404, error.err_code == JetStreamAPIResponse.noMessageFound {
                    completion(.success(0))
                } else {
                    let why = reply.status.map { "status \($0) \(reply.statusDescription ?? "")" } ?? response?.errorText ?? "an answer that is not JSON"
                    completion(.failure(.logUnavailable("\(operation): \(why)")))
                }
            }
        }
    }

    package func saveCheckpoint(_ image: RoomImage, history: [WriteRecord], sequence: UInt64, chain: RoomChain?) {
        saveCheckpoint(image, history: history, sequence: sequence, chain: chain, completion: nil)
    }

    /// `saveCheckpoint`, telling `completion` (once, on the loop thread, never inside this call)
    /// whether JetStream stored it.
    package func saveCheckpoint(
        _ image: RoomImage, history: [WriteRecord], sequence: UInt64, chain: RoomChain?, completion: ((_ stored: Bool) -> Void)?
    ) {
        let room = image.room
        let notSaved = { [weak self] (why: String) in
            guard let self else { return }
            self.checkpointFailures += 1
            self.logger.warning("checkpoint of room \(room) at sequence \(sequence) not saved: \(why)")
            if let completion { self.later { completion(false) } }
        }
        // The subject, the message id and JetStream's headers share max_payload with the value.
        let limit = connection.maxPayload - 1024
        let checkpoint = RoomLogCheckpoint(image: image, history: history, sequence: sequence, chain: chain)
        var value = checkpoint.encode()
        if value.count > limit, !history.isEmpty {
            // The newest records that fit, found in one pass over the records' sizes, then one
            // more encoding: O(history + value), not an encoding per record dropped.
            if let dropped = CheckpointHistoryCut.oldestToDrop(valueSize: value.count, history: history, limit: limit) {
                let full = value.count
                value = checkpoint.droppingOldest(dropped).encode()
                logger.warning(
                    "checkpoint of room \(room) at sequence \(sequence) is \(full) bytes with its \(history.count) history records, over \(limit): saved without the \(dropped) oldest (\(value.count) bytes)"
                )
            } else {
                return notSaved(
                    "over the servers' max_payload less 1 KiB (\(limit)) even without its history (\(value.count) bytes with its \(history.count) records)")
            }
        }
        guard value.count <= limit else {
            return notSaved("\(value.count) bytes, over the servers' max_payload less 1 KiB (\(limit))")
        }
        let key = RoomSubjects.key(room: room)
        do {
            try connection.publish(
                subject: RoomSubjects.checkpointSubject(room: room), payload: value, expectedLastSubjectSequence: nil,
                messageID: "ckpt.\(key).\(sequence)", timeout: requestTimeout
            ) { result in
                switch result {
                case .success: completion?(true)
                case .failure(let error): notSaved("\(error)")
                }
            }
        } catch {
            notSaved("\(error)")
        }
    }

    package func epoch(room: String, after sequence: UInt64) -> UInt64 {
        RoomEpoch.derive(salt: salt, room: room, after: sequence)
    }

    // MARK: - Requests

    /// Sends `payload` to `subject` with a reply subject of this connection's inbox; `handler`
    /// gets the reply (a status reply too: 503 when nothing answers the subject) or, after
    /// `requestTimeout` without one, `.logUnavailable` naming `operation`. Exactly once, on the
    /// loop thread, never inside this call.
    func request(subject: String, payload: [UInt8], operation: String, handler: @escaping (Result<InboxMessage, StoreError>) -> Void) {
        let token = nextRequestToken
        nextRequestToken += 1
        do {
            try connection.send(subject: subject, reply: "\(connection.inboxPrefix).r.\(token)", payload: payload)
        } catch {
            later { handler(.failure(.logUnavailable("\(operation): \(error)"))) }
            return
        }
        let timeout = requestTimeout
        requests[token] = PendingRequest(
            deadline: .now + timeout,
            handler: { result in handler(result.mapError { _ in .logUnavailable("\(operation): no answer within \(timeout)") }) })
    }

    /// Asks JetStream to delete a consumer, without waiting for its answer (its reply goes to
    /// token 0, which nothing waits on).
    func deleteConsumer(_ name: String) {
        try? connection.send(
            subject: "$JS.API.CONSUMER.DELETE.\(RoomSubjects.roomsStream).\(name)", reply: "\(connection.inboxPrefix).r.0", payload: [])
    }

    // MARK: - Core NATS (presence)

    /// Subscribes to `subject` (core NATS: only what is published while subscribed): its
    /// messages go to `handler` on the loop thread. Returns the subscription's id.
    func subscribeCore(_ subject: String, handler: @escaping (InboxMessage) -> Void) throws(NATSError) -> UInt64 {
        let id = try connection.subscribe(subject)
        coreHandlers[id] = handler
        return id
    }

    /// Ends a `subscribeCore`: nothing more reaches its handler.
    func unsubscribeCore(_ id: UInt64) {
        coreHandlers[id] = nil
        connection.unsubscribe(id)
    }

    /// Dispatches an inbox message: a request's reply, or a consumer's delivery. O(1) besides
    /// the handler.
    private func route(_ message: InboxMessage) {
        if let handler = coreHandlers[message.subscription] { return handler(message) }
        if let (follow, generation) = followsBySubscription[message.subscription] {
            return deliver(message, follow: follow, generation: generation)
        }
        let prefix = connection.inboxPrefix
        guard message.subject.count > prefix.count + 3, message.subject.hasPrefix(prefix) else { return }
        let rest = message.subject.dropFirst(prefix.count + 1).split(separator: ".")
        if rest.count == 2, rest[0] == "r", let token = UInt64(rest[1]) {
            requests.removeValue(forKey: token)?.handler(.success(message))
        }
    }

    private func onTick() {
        let now = ContinuousClock.now
        let expired = requests.filter { $0.value.deadline <= now }
        for token in expired.keys.sorted() {
            requests.removeValue(forKey: token)?.handler(.failure(.logUnavailable("timeout")))
        }
        checkHeartbeats(now: now)
    }

    /// Runs `work` on the loop's next pass (at once after `close`, which has no loop pass left).
    func later(_ work: @escaping () -> Void) {
        guard let deferredEvent else { return work() }
        deferred.append(work)
        deferredEvent.activate()
    }

    private func runDeferred() {
        while !deferred.isEmpty {
            let batch = deferred
            deferred.removeAll()
            for work in batch { work() }
        }
    }
}
