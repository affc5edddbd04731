import Logging
import SnapSyncModel
import SnapSyncWire
import SnapSyncStore

// What the server does with each message (PROTOCOL.md §3, §7): the handshake, JOIN/LEAVE,
// writes and their fan-out, STATS, PING/PONG.

extension Server {
    func handle(_ message: Message, from connection: Connection) {
        if connection.state == .awaitingHello {
            guard case .hello(let versions, let clientName, _) = message else {
                stats.protocolErrors += 1
                logger.info(
                    "frame before HELLO, closing", metadata: ["conn": "\(connection.id)", "peer": "\(connection.peer)", "type": "\(message.type.name)"])
                close(connection, error: .handshakeRequired, "\(message.type.name) before HELLO: the first frame must be HELLO")
                return
            }
            hello(versions: versions, clientName: clientName, from: connection)
            return
        }
        switch message {
        case .hello:
            stats.protocolErrors += 1
            close(connection, error: .handshakeRequired, "HELLO came twice")
        case .ping(let nonce):
            send(.pong(nonce: nonce), to: connection)
        case .pong:
            break  // Any frame proves the peer alive; `readable` already noted it.
        case .join(let requestID, let room, let resume):
            join(requestID: requestID, roomName: room, resume: resume, from: connection)
        case .leave(let requestID, let room):
            leave(requestID: requestID, roomName: room, from: connection)
        case .mutate(let requestID, let room, let expectedVersion, let writeId, let ops):
            write(requestID: requestID, roomName: room, writeId: writeId, from: connection) { room, scratch in
                room.mutate(ops, expectedVersion: expectedVersion, writeId: writeId, scratch: &scratch)
            }
        case .replace(let requestID, let room, let expectedVersion, let writeId, let snapshot):
            write(requestID: requestID, roomName: room, writeId: writeId, from: connection) { room, scratch in
                room.replace(with: snapshot, expectedVersion: expectedVersion, writeId: writeId, scratch: &scratch)
            }
        case .stats(let requestID):
            let entries = stats.entries(
                connections: connections.count, rooms: rooms.count, items: totalItems,
                uptime: ContinuousClock.now - startTime)
            send(.statsReply(requestID: requestID, stats: entries.map { Message.Stat(name: $0.0, value: $0.1) }), to: connection)
        case .welcome, .error, .snapshot, .catchup, .diff, .ack, .reject, .statsReply:
            // The decoder accepts client messages only; this is a safety net, not a path.
            stats.protocolErrors += 1
            close(connection, error: .unknownMessageType, "\(message.type.name) is sent by the server only")
        }
    }

    private func hello(versions: [UInt64], clientName: String, from connection: Connection) {
        guard versions.contains(ProtocolVersion.current) else {
            stats.protocolErrors += 1
            close(
                connection, error: .unsupportedVersion,
                "this server speaks version \(ProtocolVersion.current); HELLO offered \(versions.map(String.init).joined(separator: ", "))")
            return
        }
        connection.becomeReady()
        connection.clientName = clientName
        connection.armTimer(configuration.idleTimeout)
        send(
            .welcome(
                version: ProtocolVersion.current, sessionId: connection.id, serverName: configuration.serverName,
                limits: configuration.wire.welcomeEntries), to: connection)
        logger.debug(
            "handshake done",
            metadata: [
                "conn": "\(connection.id)", "peer": "\(connection.peer)",
                "client": "\(LogEscaping.line(clientName))",
            ])
    }

    // MARK: Rooms

    /// The room named `name`, created (empty, version 0, fresh epoch) if this is its first use.
    private func room(named name: String) -> Result<Room, Rejection> {
        if let rejection = Room.validate(name: name) { return .failure(rejection) }
        if let room = rooms[name] { return .success(room) }
        guard rooms.count < configuration.maxRooms else {
            return .failure(Rejection(.tooManyRooms, "the server is at its limit of \(configuration.maxRooms) rooms"))
        }
        let room = Room(name: name, limits: configuration.roomLimits)
        room.budget = roomBudget
        rooms[name] = room
        logger.debug("room created", metadata: ["room": "\(LogEscaping.line(name))", "epoch": "\(room.epoch)"])
        return .success(room)
    }

    func addMember(_ connection: Connection, to room: Room) {
        connection.memberships[room.name] = (room, room.members.count)
        room.members.append(connection)
    }

    /// O(1): the last member takes the leaver's slot.
    func removeMember(_ connection: Connection, from room: Room) {
        guard let slot = connection.memberships.removeValue(forKey: room.name)?.slot else { return }
        let last = room.members.removeLast()
        if last !== connection {
            room.members[slot] = last
            last.memberships[room.name]?.slot = slot
        }
    }

    private func join(requestID: UInt64, roomName: String, resume: RoomPosition?, from connection: Connection) {
        if let rejection = Room.validate(name: roomName) {
            send(rejection.message(requestID: requestID), to: connection)
            return
        }
        let alreadyJoined = connection.memberships[roomName] != nil
        if !alreadyJoined && connection.memberships.count >= configuration.wire.maxRoomsPerConnection {
            send(
                Rejection(
                    .tooManyRoomsForConnection,
                    "this connection has joined \(connection.memberships.count) rooms, the limit"
                ).message(requestID: requestID), to: connection)
            return
        }
        let room: Room
        switch self.room(named: roomName) {
        case .success(let found): room = found
        case .failure(let rejection):
            send(rejection.message(requestID: requestID), to: connection)
            return
        }
        switch room.answerJoin(resume: resume) {
        case .snapshot(let reason):
            sendSnapshot(requestID: requestID, room: room, reason: reason, to: connection)
        case .catchup(let from, let to, let frames):
            send(.catchup(requestID: requestID, room: room.name, epoch: room.epoch, fromVersion: from, toVersion: to), to: connection)
            for frame in frames { send(shared: frame, to: connection) }
        }
        // Joining again re-answers with the state but does not subscribe twice.
        if !alreadyJoined && connection.state != .closing { addMember(connection, to: room) }
    }

    private func leave(requestID: UInt64, roomName: String, from connection: Connection) {
        guard let room = connection.memberships[roomName]?.room else {
            send(Rejection(.notJoined, "this connection has not joined room \(LogEscaping.line(roomName))").message(requestID: requestID), to: connection)
            return
        }
        removeMember(connection, from: room)
        send(.ack(requestID: requestID, epoch: room.epoch, version: room.version), to: connection)
    }

    // MARK: Writes

    /// A MUTATE or REPLACE: find or create the room, let the store refuse, let the room decide,
    /// then fan the DIFF out to every member (the writer too, if it has joined) before the
    /// writer's ACK (PROTOCOL.md §7).
    private func write(
        requestID: UInt64, roomName: String, writeId: [UInt8], from connection: Connection,
        _ apply: (Room, inout [UInt8]) -> Room.WriteOutcome
    ) {
        let room: Room
        switch self.room(named: roomName) {
        case .success(let found): room = found
        case .failure(let rejection):
            stats.writesRejected += 1
            send(rejection.message(requestID: requestID), to: connection)
            return
        }
        do {
            try store.prepare(room: room.name)
        } catch {
            stats.writesRejected += 1
            send(Rejection(.storageFailure, "the write could not be made durable: \(error)").message(requestID: requestID), to: connection)
            return
        }
        let itemsBefore = room.snapshot.numberOfItems
        defer { roomBudget.update(room) }
        switch apply(room, &diffBuffer) {
        case .applied(let version, let diff):
            stats.writesApplied += 1
            totalItems += room.snapshot.numberOfItems - itemsBefore
            store.append(room: room.name, epoch: room.epoch, version: version, writeId: writeId, diffFrame: diff.bytes)
            // Members are copied first: a member cut off as a slow consumer leaves the room,
            // which would otherwise reorder the array under the loop.
            let members = room.members
            for member in members { send(shared: diff, to: member) }
            send(.ack(requestID: requestID, epoch: room.epoch, version: version), to: connection)
        case .unchanged(let version), .duplicate(let version):
            send(.ack(requestID: requestID, epoch: room.epoch, version: version), to: connection)
        case .rejected(let rejection):
            stats.writesRejected += 1
            send(rejection.message(requestID: requestID), to: connection)
        }
    }
}
