import Logging
import SnapSyncAuth
import SnapSyncModel
import SnapSyncStore
import SnapSyncWire

// What the server does with each message (PROTOCOL.md §3, §7): the handshake, PING/PONG, STATS,
// LEAVE, VERIFY; and, for every request that names a room, the prologue (`admit`: the name, the right)
// before the engine's part (RoomEngine.swift).

extension Hub {
    func handle(_ message: Message, from session: Session) {
        if session.state == .awaitingHello {
            guard case .hello(let versions, let clientName, let credentials) = message else {
                stats.protocolErrors += 1
                logLimited(
                    .info, cause: "frame before HELLO", "frame before HELLO, closing", metadata: session.logMetadata(["type": "\(message.type.name)"]))
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
        case .join(let requestID, let room, let resume, let chain):
            join(requestID: requestID, roomName: room, resume: resume.map { ResumePoint(position: $0, chain: chain) }, from: session)
        case .leave(let requestID, let room):
            leave(requestID: requestID, roomName: room, from: session)
        case .mutate(let requestID, let room, let expectedVersion, let writeID, let ops):
            write(requestID: requestID, roomName: room, writeID: writeID, .mutate(ops: ops, expectedVersion: expectedVersion), from: session)
        case .replace(let requestID, let room, let expectedVersion, let writeID, let snapshot):
            write(requestID: requestID, roomName: room, writeID: writeID, .replace(target: snapshot, expectedVersion: expectedVersion), from: session)
        case .replaceSection(let requestID, let room, let expectedVersion, let writeID, let section, let items):
            write(
                requestID: requestID, roomName: room, writeID: writeID,
                .replaceSection(section: section, items: items, expectedVersion: expectedVersion), from: session)
        case .stats(let requestID):
            guard authorizeStats(requestID: requestID, for: session) else { return }
            let entries = stats.entries(
                connections: sessions.count, rooms: rooms.count, sleepingRooms: sleepingRoomCount,
                storedRooms: engine.storedRoomCount, dataBytes: dataUsage?.bytes ?? 0, items: totalItems,
                uptime: ContinuousClock.now - startTime)
            send(.statsReply(requestID: requestID, stats: entries.map { Message.Stat(name: $0.0, value: $0.1) }), to: session)
        case .auth(let requestID, let credentials):
            reauthenticate(session, requestID: requestID, credentials: credentials)
        case .drop(let requestID, let room):
            guard admit(requestID: requestID, roomName: room, right: .admin, from: session) else { return }
            engine.drop(requestID: requestID, roomName: room, from: session)
        case .setTTL(let requestID, let room, let seconds):
            guard admit(requestID: requestID, roomName: room, right: .write, from: session) else { return }
            engine.setTTL(requestID: requestID, roomName: room, seconds: seconds, from: session)
        case .verify(let requestID, let room):
            verify(requestID: requestID, roomName: room, from: session)
        case .presenceWatch(let requestID, let room, let watch):
            watchPresence(requestID: requestID, roomName: room, watch: watch, from: session)
        case .presenceList(let requestID, let room, let after, let limit):
            listPresence(requestID: requestID, roomName: room, after: after, limit: limit, from: session)
        case .setPresence(let requestID, let room, let state):
            setPresence(requestID: requestID, roomName: room, state: state, from: session)
        case .window(let requestID, let room, let window):
            setWindow(requestID: requestID, roomName: room, window: window, from: session)
        case .welcome, .error, .snapshot, .catchup, .diff, .ack, .reject, .statsReply, .left, .digest, .presence, .presenceDiff,
            .windowState, .windowDiff:
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

    /// Every request that names a room starts here: the name (`Room.validate`), then the right,
    /// before any room is created, woken or followed (PROTOCOL.md §8.4). False after answering
    /// the request's REJECT, which counts as a rejected write when `countedAsWrite`.
    func admit(requestID: UInt64, roomName: String, right: Right, countedAsWrite: Bool = false, from session: Session) -> Bool {
        if let rejection = Room.validate(name: roomName) {
            if countedAsWrite { countRejectedWrite(rejection.code) }
            send(rejection.message(requestID: requestID), to: session)
            return false
        }
        return authorize(right, room: roomName, requestID: requestID, for: session)
    }

    /// MUTATE, REPLACE or REPLACE_SECTION: admitted (the `write` right), then the engine's.
    private func write(requestID: UInt64, roomName: String, writeID: [UInt8], _ request: Room.WriteRequest, from session: Session) {
        let received = writeAckTimer?.start() ?? 0
        guard admit(requestID: requestID, roomName: roomName, right: .write, countedAsWrite: true, from: session) else { return }
        engine.write(
            AdmittedWrite(requestID: requestID, roomName: roomName, writeID: writeID, request: request, received: received), from: session)
    }

    private func join(requestID: UInt64, roomName: String, resume: ResumePoint?, from session: Session) {
        // The right before anything else: a denied JOIN creates no room and no membership.
        // A JOIN reusing the id of a WINDOW that never reached the room is a JOIN.
        session.pendingWindows[requestID] = nil
        guard admit(requestID: requestID, roomName: roomName, right: .read, from: session) else { return }
        let alreadyJoined = session.memberships[roomName] != nil
        if !alreadyJoined && session.memberships.count >= configuration.wire.maxRoomsPerConnection {
            send(
                Rejection(
                    .tooManyRoomsForConnection,
                    "this connection has joined \(session.memberships.count) rooms, the limit"
                ).message(requestID: requestID), to: session)
            return
        }
        engine.join(requestID: requestID, roomName: roomName, resume: resume, from: session)
    }

    /// Answers a JOIN of `room` (SNAPSHOT, or CATCHUP and the DIFFs) and makes the session a
    /// member, once the engine has the room (at once on a single node; in cluster mode once it
    /// has loaded, ReplicatedRoomEngine+Follow.swift).
    func completeJoin(requestID: UInt64, room: Room, resume: ResumePoint?, from session: Session) {
        if let window = session.pendingWindows.removeValue(forKey: requestID) {
            completeWindowJoin(requestID: requestID, room: room, window: window, from: session)
            return
        }
        // A windowed member that sends JOIN becomes a full member: the SNAPSHOT replaces its window.
        stopWindow(of: session, in: room)
        let alreadyJoined = session.memberships[room.name] != nil
        if let rejection = refuseOutline(room, to: session) {
            send(rejection.message(requestID: requestID), to: session)
            return
        }
        // Nil: the JOIN waits for a fold computed off the loop, and is handled again after it.
        guard let answer = cheapestAnswer(answerJoin(room, resume: resume, for: session), of: room, requestID: requestID, resume: resume, for: session)
        else { return }
        switch answer {
        case .snapshot(let reason):
            sendSnapshot(requestID: requestID, room: room, reason: reason, to: session)
        case .catchup(let from, let to, let frames):
            let form: CatchupForm? = ProtocolVersion.hasChain(version: session.protocolVersion) ? .replay : nil
            send(.catchup(requestID: requestID, room: room.name, epoch: room.epoch, fromVersion: from, toVersion: to, form: form), to: session)
            sendHistory(frames, after: from, of: room, to: session)
        case .folded(let fold):
            sendFolded(fold, requestID: requestID, of: room, to: session)
        }
        // Joining again re-answers with the state but does not subscribe twice.
        if !alreadyJoined && session.state != .closing { addMember(session, to: room) }
    }

    private func leave(requestID: UInt64, roomName: String, from session: Session) {
        guard let room = session.memberships[roomName] else {
            send(Rejection(.notJoined, "this connection has not joined room \(LogEscaping.line(roomName))").message(requestID: requestID), to: session)
            return
        }
        removeMember(session, from: room, reason: .left)
        send(.ack(requestID: requestID, epoch: room.epoch, version: room.version), to: session)
    }

    /// VERIFY (PROTOCOL.md §11.22): the room's digest and chain at its version, which is the
    /// position of the last SNAPSHOT or DIFF of it queued for this member, since both engines
    /// queue a room's DIFF to every member as the version is applied; the DIGEST goes behind it
    /// in the same queue. Only a member may ask: it is the one holding a replica to compare.
    /// - Complexity: O(1) when the room's digest at this version is already known (a JOIN or
    ///   an earlier VERIFY computed it), else O(size of the room) once per version; for a room
    ///   over `verifyFreeDigestBytes`, at most once per `verifyDigestInterval` whoever asks
    ///   (REJECT busy in between), so that members of a busy, large room cannot keep the loop
    ///   hashing.
    private func verify(requestID: UInt64, roomName: String, from session: Session) {
        guard let room = session.memberships[roomName] else {
            send(Rejection(.notJoined, "this connection has not joined room \(LogEscaping.line(roomName))").message(requestID: requestID), to: session)
            return
        }
        if !room.isDigestKnown && room.snapshot.canonicalByteCount > configuration.verifyFreeDigestBytes {
            let now = monotonicNow()
            if let last = room.lastVerifyDigest, now - last < configuration.verifyDigestInterval {
                stats.requestsBusy += 1
                send(
                    Rejection(
                        .busy,
                        "room \(LogEscaping.line(roomName)) (\(room.snapshot.canonicalByteCount) bytes) had its digest computed \(now - last) ago; a room this large is hashed for VERIFY at most once per \(configuration.verifyDigestInterval): retry later"
                    ).message(requestID: requestID), to: session)
                return
            }
            room.lastVerifyDigest = now
        }
        send(
            .digest(
                requestID: requestID, room: room.name, epoch: room.epoch, version: room.version, digest: room.digest,
                chain: room.chain ?? .unknown), to: session)
    }
}
