import Logging
import SnapSyncAuth
import SnapSyncModel
import SnapSyncWire

// What the server does with each message (PROTOCOL.md §3, §7): the handshake, JOIN/LEAVE,
// STATS, PING/PONG; writes are in Hub+Writes.swift.

extension Hub {
    func handle(_ message: Message, from session: Session) {
        if session.state == .awaitingHello {
            guard case .hello(let versions, let clientName, let credentials) = message else {
                stats.protocolErrors += 1
                logger.info(
                    "frame before HELLO, closing", metadata: session.logMetadata(["type": "\(message.type.name)"]))
                close(session, error: .handshakeRequired, "\(message.type.name) before HELLO: the first frame must be HELLO")
                return
            }
            hello(versions: versions, clientName: clientName, credentials: credentials, from: session)
            return
        }
        switch message {
        case .hello:
            stats.protocolErrors += 1
            close(session, error: .handshakeRequired, "HELLO came twice")
        case .ping(let nonce):
            send(.pong(nonce: nonce), to: session)
        case .pong:
            break  // Any frame proves the peer alive; the IO layer already noted it.
        case .join(let requestID, let room, let resume):
            join(requestID: requestID, roomName: room, resume: resume, from: session)
        case .leave(let requestID, let room):
            leave(requestID: requestID, roomName: room, from: session)
        case .mutate(let requestID, let room, let expectedVersion, let writeID, let ops):
            if log != nil {
                clusterWrite(
                    requestID: requestID, roomName: room, writeID: writeID, .mutate(ops: ops, expectedVersion: expectedVersion), from: session)
                return
            }
            write(requestID: requestID, roomName: room, writeID: writeID, from: session) { room, scratch in
                room.mutate(ops, expectedVersion: expectedVersion, writeID: writeID, scratch: &scratch)
            }
        case .replace(let requestID, let room, let expectedVersion, let writeID, let snapshot):
            if log != nil {
                clusterWrite(
                    requestID: requestID, roomName: room, writeID: writeID, .replace(target: snapshot, expectedVersion: expectedVersion),
                    from: session)
                return
            }
            write(requestID: requestID, roomName: room, writeID: writeID, from: session) { room, scratch in
                room.replace(with: snapshot, expectedVersion: expectedVersion, writeID: writeID, scratch: &scratch)
            }
        case .replaceSection(let requestID, let room, let expectedVersion, let writeID, let section, let items):
            if log != nil {
                clusterWrite(
                    requestID: requestID, roomName: room, writeID: writeID,
                    .replaceSection(section: section, items: items, expectedVersion: expectedVersion), from: session)
                return
            }
            write(requestID: requestID, roomName: room, writeID: writeID, from: session) { room, scratch in
                room.replaceSection(section, with: items, expectedVersion: expectedVersion, writeID: writeID, scratch: &scratch)
            }
        case .stats(let requestID):
            guard authorizeStats(requestID: requestID, for: session) else { return }
            let entries = stats.entries(
                connections: sessions.count, rooms: rooms.count, sleepingRooms: sleepingRoomCount, items: totalItems,
                uptime: ContinuousClock.now - startTime)
            send(.statsReply(requestID: requestID, stats: entries.map { Message.Stat(name: $0.0, value: $0.1) }), to: session)
        case .auth(let requestID, let credentials):
            reauthenticate(session, requestID: requestID, credentials: credentials)
        case .drop(let requestID, let room):
            drop(requestID: requestID, roomName: room, from: session)
        case .setTTL(let requestID, let room, let seconds):
            setTTL(requestID: requestID, roomName: room, seconds: seconds, from: session)
        case .welcome, .error, .snapshot, .catchup, .diff, .ack, .reject, .statsReply, .left:
            // The decoder accepts client messages only; this is a safety net, not a path.
            stats.protocolErrors += 1
            close(session, error: .unknownMessageType, "\(message.type.name) is sent by the server only")
        }
    }

    private func hello(versions: [UInt64], clientName: String, credentials: [UInt8], from session: Session) {
        // The highest version offered that this server speaks (PROTOCOL.md §8.2).
        guard let version = ProtocolVersion.chosen(from: versions) else {
            stats.protocolErrors += 1
            close(
                session, error: .unsupportedVersion,
                "this server speaks versions \(ProtocolVersion.supported.map(String.init).joined(separator: ", ")); HELLO offered \(versions.map(String.init).joined(separator: ", "))"
            )
            return
        }
        guard authenticate(session, credentials: credentials) else { return }
        session.state = .ready
        session.clientName = clientName
        session.protocolVersion = version
        session.transport?.sessionBecameReady()
        send(
            .welcome(
                version: version, sessionID: session.id, serverName: configuration.serverName,
                limits: configuration.wire.welcomeEntries(version: version)), to: session)
        logger.debug(
            "handshake done",
            metadata: session.logMetadata(["client": "\(LogEscaping.line(clientName))"]))
    }

    // MARK: Rooms

    /// The room named `name`: resident, woken if asleep, or created (empty, version 0, fresh
    /// epoch) if this is its first use.
    /// The caller has validated the name (`Room.validate`): JOIN and writes check it first, before
    /// the right (PROTOCOL.md §8.4), so it is not checked a second time on every write.
    func room(named name: String) -> Result<Room, Rejection> {
        let key = RoomName(name)
        if let room = rooms[key] { return .success(room) }
        // A full daemon evicts its longest-idle memberless room rather than refuse; a sleeping
        // room is woken rather than created (Hub+Sleep.swift).
        guard rooms.count < configuration.maxRooms || evictLongestIdle() else {
            return .failure(Rejection(.tooManyRooms, "the server is at its limit of \(configuration.maxRooms) rooms"))
        }
        if let woken = wake(name) { return woken }
        let room = Room(name: name, limits: configuration.wire, maxHistoryBytes: configuration.historyBytes, idleSince: monotonicNow())
        room.budget = roomBudget
        rooms[key] = room
        logger.debug("room created", metadata: ["room": "\(LogEscaping.line(name))", "epoch": "\(room.epoch)"])
        roomBecameIdle(room)
        return .success(room)
    }

    private func join(requestID: UInt64, roomName: String, resume: RoomPosition?, from session: Session) {
        if let rejection = Room.validate(name: roomName) {
            send(rejection.message(requestID: requestID), to: session)
            return
        }
        // The right before anything else: a denied JOIN creates no room and no membership.
        guard authorize(.read, room: roomName, requestID: requestID, for: session) else { return }
        let alreadyJoined = session.memberships[roomName] != nil
        if !alreadyJoined && session.memberships.count >= configuration.wire.maxRoomsPerConnection {
            send(
                Rejection(
                    .tooManyRoomsForConnection,
                    "this connection has joined \(session.memberships.count) rooms, the limit"
                ).message(requestID: requestID), to: session)
            return
        }
        if log != nil {
            clusterJoin(requestID: requestID, roomName: roomName, resume: resume, from: session)
            return
        }
        let room: Room
        switch self.room(named: roomName) {
        case .success(let found): room = found
        case .failure(let rejection):
            send(rejection.message(requestID: requestID), to: session)
            return
        }
        completeJoin(requestID: requestID, room: room, resume: resume, from: session)
    }

    /// Answers a JOIN of `room` (SNAPSHOT, or CATCHUP and the DIFFs) and makes the session a
    /// member, once the room is there (at once on a single node; in cluster mode once it has
    /// loaded, Hub+Cluster.swift).
    func completeJoin(requestID: UInt64, room: Room, resume: RoomPosition?, from session: Session) {
        let alreadyJoined = session.memberships[room.name] != nil
        if let rejection = refuseOutline(room, to: session) {
            send(rejection.message(requestID: requestID), to: session)
            return
        }
        switch answerJoin(room, resume: resume, for: session) {
        case .snapshot(let reason):
            sendSnapshot(requestID: requestID, room: room, reason: reason, to: session)
        case .catchup(let from, let to, let frames):
            send(.catchup(requestID: requestID, room: room.name, epoch: room.epoch, fromVersion: from, toVersion: to), to: session)
            for frame in frames { send(shared: frame, to: session) }
        }
        // Joining again re-answers with the state but does not subscribe twice.
        if !alreadyJoined && session.state != .closing { addMember(session, to: room) }
    }

    private func leave(requestID: UInt64, roomName: String, from session: Session) {
        guard let room = session.memberships[roomName] else {
            send(Rejection(.notJoined, "this connection has not joined room \(LogEscaping.line(roomName))").message(requestID: requestID), to: session)
            return
        }
        removeMember(session, from: room)
        send(.ack(requestID: requestID, epoch: room.epoch, version: room.version), to: session)
    }
}
