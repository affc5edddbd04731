package import Logging
package import SnapSyncHub
package import SnapSyncLoop
package import SnapSyncWire

#if canImport(Glibc)
    internal import Glibc
#endif

/// Cluster mode's presence between nodes (docs/cluster.md, "Presence"; Protocol/CLUSTER.md,
/// "Presence"): the hub's `PresenceRelay`, over NATS core subjects on the room log's connection.
/// Presence is ephemeral, so nothing goes to JetStream: a node publishes its local members'
/// changes of a room to `snapsync.presence.<hex room>`, where the nodes with members of the
/// room listen; a node that gains a member of a room asks the others for theirs (SYNC, answered
/// with SNAPSHOTs); every node announces itself on `snapsync.presence.nodes` each heartbeat, and
/// the members of a node not heard for `timeout` leave with `node_lost`. A gap in a node's
/// messages of a room (core NATS may drop) makes this node ask that node again.
///
/// Loop thread only: NATS deliveries reach it through the connection's mailbox
/// (`JetStreamRoomLog.subscribeCore`), like the room log's.
package final class PresenceExchange: PresenceRelay {
    /// This node's incarnation: its tag is the high half of the hub's session ids.
    package let node: PresenceNode
    /// What the heartbeat says of the node, for the other nodes' logs: host and pid.
    package let name: String
    /// How long a node may stay silent before it is declared lost.
    package let timeout: Duration
    /// How often this node announces itself: a third of the timeout, at most 1 s.
    package let heartbeatInterval: Duration
    /// How often silent nodes are looked for: the most a loss is noticed after the timeout.
    static let checkInterval: Duration = .milliseconds(100)

    private let log: JetStreamRoomLog
    private let hub: Hub
    private let logger: Logger
    private var ledger = PresenceLedger()
    /// This node's counter of CHANGES (all rooms): the last one's sequence.
    private var sequence: UInt64 = 0
    /// The sequence of this node's last CHANGES of each room it has members of.
    private var lastSent: [String: UInt64] = [:]
    /// The subscription to each followed room's subject.
    private var roomSubscriptions: [String: UInt64] = [:]
    private var fixedSubscriptions: [UInt64] = []
    /// Where SNAPSHOTs for this node's SYNCs come.
    private let inbox: String
    private var tick: CallbackEvent?
    private var lastHeartbeat: ContinuousClock.Instant?
    /// The incarnations of other processes seen with this node's tag, each logged once.
    private var clashes: Set<UInt64> = []

    /// `snapsync.presence.nodes`: every node's heartbeat.
    static let nodesSubject = "snapsync.presence.nodes"

    /// `snapsync.presence.<hex room>`: a room's CHANGES and broadcast SYNCs.
    static func subject(room: String) -> String { "snapsync.presence." + RoomSubjects.key(room: room) }

    /// `snapsync.presence.node.<tag as 8 hex digits>`: SYNCs meant for one node.
    static func subject(node: PresenceNode) -> String { "snapsync.presence.node.\(node)" }

    /// Joins the exchange on `log`'s connection, for `hub` (its session ids take `node`'s
    /// tag, so call this before the server accepts anyone), and becomes its `presenceRelay`.
    package init(
        log: JetStreamRoomLog, hub: Hub, loop: EventLoop, timeout: Duration = .seconds(3), logger: Logger,
        node: PresenceNode = .random()
    ) throws(NATSError) {
        self.log = log
        self.hub = hub
        self.logger = logger
        self.node = node
        self.timeout = timeout
        heartbeatInterval = min(.seconds(1), timeout / 3)
        name = Self.hostName() + " pid \(getpid())"
        inbox = try log.connection.makeInbox()
        hub.useSessionIDTag(node.tag)
        for subject in [Self.nodesSubject, Self.subject(node: node), inbox] {
            fixedSubscriptions.append(try log.subscribeCore(subject) { [weak self] message in self?.receive(message) })
        }
        do {
            tick = try CallbackEvent(loop: loop, every: Self.checkInterval, priority: .flush) { [weak self] in self?.onTick(now: .now) }
        } catch {
            throw NATSError(operation: error.function, identifier: "presence tick", code: .status(0), text: "libevent could not make an event")
        }
        log.connectionObservers.append { [weak self] url in self?.connectionChanged(url) }
        hub.presenceRelay = self
        logger.info(
            "presence: this node is \(node) (\(name)); heartbeat every \(heartbeatInterval), other nodes lost after \(timeout) of silence")
        sendHeartbeat(now: .now)
    }

    deinit { close() }

    /// Stops the heartbeat and the subscriptions; the other nodes declare this one lost after
    /// the timeout. Before the room log closes.
    package func close() {
        guard let tick else { return }
        tick.close()
        self.tick = nil
        for id in fixedSubscriptions + Array(roomSubscriptions.values) { log.unsubscribeCore(id) }
        fixedSubscriptions.removeAll()
        roomSubscriptions.removeAll()
    }

    // MARK: - PresenceRelay

    package func localPresenceChanged(room: String, memberID: UInt64, member: PresenceMember?, reason: PresenceDeparture) {
        sequence += 1
        let update: PresenceUpdate = member.map { .member($0) } ?? .left(memberID: memberID, reason: reason)
        let message = PresenceMessage.changes(node: node, room: room, sequence: sequence, previous: lastSent[room] ?? 0, updates: [update])
        lastSent[room] = sequence
        send(message, to: Self.subject(room: room))
    }

    package func presenceInterest(room: String, active: Bool) {
        if active {
            ledger.follow(room: room)
            if roomSubscriptions[room] == nil {
                do {
                    roomSubscriptions[room] = try log.subscribeCore(Self.subject(room: room)) { [weak self] message in self?.receive(message) }
                } catch {
                    logger.warning("presence: cannot follow room \(room)'s presence on other nodes: \(error)")
                }
            }
            send(.sync(node: node, room: room), to: Self.subject(room: room), reply: inbox)
        } else {
            // The last local member's leave went out already: the next CHANGES starts anew.
            lastSent[room] = nil
            if let id = roomSubscriptions.removeValue(forKey: room) { log.unsubscribeCore(id) }
            apply(ledger.unfollow(room: room))
        }
    }

    // MARK: - Receiving

    private func receive(_ message: InboxMessage) {
        let decoded: PresenceMessage
        do {
            decoded = try PresenceMessage.decode(message.data)
        } catch {
            hub.stats.clusterPresenceMessagesIgnored += 1
            logger.debug("presence: ignored a message on \(message.subject): \(error)")
            return
        }
        let from = decoded.node
        // Core NATS echoes this node's own messages back to it.
        if from == node { return }
        if from.tag == node.tag {
            hub.stats.clusterPresenceMessagesIgnored += 1
            if clashes.insert(from.incarnation).inserted {
                logger.error(
                    "presence: another node drew this node's tag \(node) (incarnation \(from.incarnation)); its members' ids may clash with ours: restart one of the two"
                )
            }
            return
        }
        hub.stats.clusterPresenceMessagesIn += 1
        let now = ContinuousClock.now
        var name: String?
        if case .heartbeat(_, let said) = decoded { name = said }
        let (heard, effects) = ledger.heard(from, name: name, now: now)
        switch heard {
        case .known: break
        case .new: logger.info("presence: node \(from) (\(name ?? "name not heard yet")) heard")
        case .returned: logger.notice("presence: node \(from) heard again after it was declared lost; asking it for its members again")
        }
        apply(effects)
        hub.stats.clusterPresenceNodes = UInt64(ledger.nodes.count)
        switch decoded {
        case .heartbeat:
            break
        case .changes(_, let room, let sequence, let previous, let updates):
            apply(ledger.changes(node: from, room: room, sequence: sequence, previous: previous, updates: updates))
        case .snapshot(_, let room, let position, let final, let members):
            apply(ledger.snapshot(node: from, room: room, position: position, final: final, members: members))
        case .sync(_, let room):
            guard !message.reply.isEmpty else { return }
            answerSync(room: room, reply: message.reply)
        }
    }

    /// SNAPSHOTs of this node's members of `room` to `reply`: as many as the servers'
    /// `max_payload` needs, the last one `final`. Position: the room's last CHANGES, or the
    /// counter now when the node has no member of it (any later CHANGES is newer).
    private func answerSync(room: String, reply: String) {
        let members = lastSent[room] == nil ? [] : hub.localPresence(room: room)
        let position = lastSent[room] ?? sequence
        let budget = max(4096, log.maxPayload - 1024)
        var part: [PresenceMember] = []
        var size = 0
        for member in members {
            let cost = 32 + member.principal.utf8.count + member.state.count
            if !part.isEmpty, size + cost > budget {
                send(.snapshot(node: node, room: room, position: position, final: false, members: part), to: reply)
                part.removeAll()
                size = 0
            }
            part.append(member)
            size += cost
        }
        send(.snapshot(node: node, room: room, position: position, final: true, members: part), to: reply)
    }

    private func apply(_ effects: [PresenceEffect]) {
        for effect in effects {
            switch effect {
            case .upsert(let room, let member):
                hub.remotePresenceChanged(room: room, member)
            case .leave(let room, let memberID, let reason):
                hub.remotePresenceLeft(room: room, memberID: memberID, reason: reason)
            case .resync(let room, let target):
                hub.stats.clusterPresenceResyncs += 1
                logger.debug("presence: asking node \(target) again for its members of room \(room)")
                send(.sync(node: node, room: room), to: Self.subject(node: target), reply: inbox)
            }
        }
    }

    // MARK: - Time

    func onTick(now: ContinuousClock.Instant) {
        if lastHeartbeat.map({ now - $0 >= heartbeatInterval }) ?? true { sendHeartbeat(now: now) }
        let (lost, effects) = ledger.expire(now: now, timeout: timeout)
        guard !lost.isEmpty else { return }
        for (state, members) in lost {
            hub.stats.clusterPresenceNodesLost += 1
            logger.warning(
                "presence: node \(state.node) (\(state.name.isEmpty ? "name not heard" : state.name)) not heard for \(timeout): declared lost; its \(members) members of the rooms followed here leave with node_lost"
            )
        }
        apply(effects)
        hub.stats.clusterPresenceNodes = UInt64(ledger.nodes.count)
    }

    private func sendHeartbeat(now: ContinuousClock.Instant) {
        lastHeartbeat = now
        send(.heartbeat(node: node, name: name), to: Self.nodesSubject)
    }

    /// The connection came back: what the other nodes sent meanwhile was lost, so every
    /// followed room is asked for again.
    private func connectionChanged(_ url: String?) {
        guard url != nil else { return }
        sendHeartbeat(now: .now)
        for room in ledger.followedRooms.sorted() {
            send(.sync(node: node, room: room), to: Self.subject(room: room), reply: inbox)
        }
    }

    private func send(_ message: PresenceMessage, to subject: String, reply: String = "") {
        do {
            try log.connection.send(subject: subject, reply: reply, payload: message.encode())
            hub.stats.clusterPresenceMessagesOut += 1
        } catch {
            logger.debug("presence: not sent to \(subject): \(error)")
        }
    }

    private static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
