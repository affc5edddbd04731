public import SnapSyncModel

/// Writes frames (length prefix + body, PROTOCOL.md §1) into a caller-owned buffer.
///
/// The buffer is appended to, never cleared, so one buffer can collect many frames and be reused
/// across writes (`removeAll(keepingCapacity: true)`): encoding then allocates nothing once the
/// buffer has grown. Complexity: O(size of the frame).
///
/// The encoder does not check limits: the sender knows its peer's `max_frame_bytes` and compares
/// the returned frame size before sending.
public struct FrameEncoder: Sendable {
    /// The bytes of "SNAP", HELLO's magic.
    public static let magic: [UInt8] = [0x53, 0x4E, 0x41, 0x50]

    public init() {}

    /// Appends one frame holding `message`.
    /// - Returns: the frame's size in bytes, length prefix included (4 + L).
    @discardableResult
    public func encode(_ message: Message, into buffer: inout [UInt8]) -> Int {
        let start = beginFrame(&buffer)
        Self.appendBody(message, into: &buffer)
        return endFrame(&buffer, start: start)
    }

    /// One frame holding `message`, in a new array.
    public func encode(_ message: Message) -> [UInt8] {
        var buffer: [UInt8] = []
        encode(message, into: &buffer)
        return buffer
    }

    /// Appends a DIFF frame without building a `Message`: the daemon encodes each applied batch
    /// once and shares the bytes with every member of the room.
    /// - Returns: the frame's size in bytes, length prefix included.
    @discardableResult
    public func encodeDiff(
        room: String, epoch: UInt64, version: UInt64, ops: [SnapshotOperation],
        into buffer: inout [UInt8]
    ) -> Int {
        let start = beginFrame(&buffer)
        buffer.append(MessageType.diff.rawValue)
        buffer.appendString(room)
        buffer.appendVarint(epoch)
        buffer.appendVarint(version)
        buffer.appendOperations(ops)
        return endFrame(&buffer, start: start)
    }

    /// Appends a snapshot's canonical encoding (§4): the bytes its digest is computed over.
    public static func encodeSnapshot(_ snapshot: RoomSnapshot, into buffer: inout [UInt8]) {
        buffer.appendSnapshot(snapshot)
    }

    /// Appends an operation list as it appears in MUTATE and DIFF (`list<op>`), e.g. for a
    /// history log that stores batches in wire form.
    public static func encodeOperations(_ ops: [SnapshotOperation], into buffer: inout [UInt8]) {
        buffer.appendOperations(ops)
    }

    /// Appends a message's body: the type byte and its fields, without the length prefix.
    public static func appendBody(_ message: Message, into b: inout [UInt8]) {
        b.append(message.type.rawValue)
        switch message {
        case .hello(let versions, let clientName, let credentials):
            b.append(contentsOf: magic)
            b.appendVarint(versions.count)
            for v in versions { b.appendVarint(v) }
            b.appendString(clientName)
            b.appendBytes(credentials)
        case .welcome(let version, let sessionID, let serverName, let limits):
            b.appendVarint(version)
            b.appendVarint(sessionID)
            b.appendString(serverName)
            b.appendVarint(limits.count)
            for entry in limits {
                b.appendVarint(entry.key)
                b.appendVarint(entry.value)
            }
        case .error(let code, let message):
            b.appendVarint(code)
            b.appendString(message)
        case .ping(let nonce), .pong(let nonce):
            b.appendVarint(nonce)
        case .join(let requestID, let room, let resume, let chain):
            b.appendVarint(requestID)
            b.appendString(room)
            if let resume {
                b.append(0x01)
                b.appendVarint(resume.epoch)
                b.appendVarint(resume.version)
                if let chain { b.appendChain(chain) }
            } else {
                b.append(0x00)
            }
        case .leave(let requestID, let room):
            b.appendVarint(requestID)
            b.appendString(room)
        case .mutate(let requestID, let room, let expectedVersion, let writeID, let ops):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendOptionalVarint(expectedVersion)
            b.appendBytes(writeID)
            b.appendOperations(ops)
        case .replace(let requestID, let room, let expectedVersion, let writeID, let snapshot):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendOptionalVarint(expectedVersion)
            b.appendBytes(writeID)
            b.appendSnapshot(snapshot)
        case .replaceSection(let requestID, let room, let expectedVersion, let writeID, let section, let items):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendOptionalVarint(expectedVersion)
            b.appendBytes(writeID)
            b.appendBytes(section.bytes)
            b.appendSectionItems(items)
        case .stats(let requestID):
            b.appendVarint(requestID)
        case .auth(let requestID, let credentials):
            b.appendVarint(requestID)
            b.appendBytes(credentials)
        case .snapshot(let requestID, let room, let epoch, let version, let reason, let digest, let snapshot, let chain):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendVarint(epoch)
            b.appendVarint(version)
            b.append(reason.rawValue)
            b.append(contentsOf: digest.bytes)
            if let chain { b.appendChain(chain) }
            b.appendSnapshot(snapshot)
        case .catchup(let requestID, let room, let epoch, let fromVersion, let toVersion, let form):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendVarint(epoch)
            b.appendVarint(fromVersion)
            b.appendVarint(toVersion)
            switch form {
            case nil: break
            case .replay?: b.append(0x00)
            case .folded(let digest)?:
                b.append(0x01)
                b.append(contentsOf: digest.bytes)
            }
        case .diff(let room, let epoch, let version, let ops, let chain):
            b.appendString(room)
            b.appendVarint(epoch)
            b.appendVarint(version)
            b.appendOperations(ops)
            if let chain { b.appendChain(chain) }
        case .ack(let requestID, let epoch, let version):
            b.appendVarint(requestID)
            b.appendVarint(epoch)
            b.appendVarint(version)
        case .reject(let requestID, let code, let opIndex, let identifier, let message):
            b.appendVarint(requestID)
            b.appendVarint(code)
            b.appendOptionalVarint(opIndex)
            if let identifier {
                b.append(0x01)
                b.appendBytes(identifier.bytes)
            } else {
                b.append(0x00)
            }
            b.appendString(message)
        case .statsReply(let requestID, let stats):
            b.appendVarint(requestID)
            b.appendVarint(stats.count)
            for stat in stats {
                b.appendString(stat.name)
                b.appendVarint(stat.value)
            }
        case .left(let room, let code, let message):
            b.appendString(room)
            b.appendVarint(code)
            b.appendString(message)
        case .drop(let requestID, let room):
            b.appendVarint(requestID)
            b.appendString(room)
        case .setTTL(let requestID, let room, let seconds):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendVarint(seconds)
        case .verify(let requestID, let room):
            b.appendVarint(requestID)
            b.appendString(room)
        case .digest(let requestID, let room, let epoch, let version, let digest, let chain):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendVarint(epoch)
            b.appendVarint(version)
            b.append(contentsOf: digest.bytes)
            b.appendChain(chain)
        case .presenceWatch(let requestID, let room, let watch):
            b.appendVarint(requestID)
            b.appendString(room)
            b.append(watch ? 1 : 0)
        case .presenceList(let requestID, let room, let after, let limit):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendVarint(after)
            b.appendVarint(limit)
        case .setPresence(let requestID, let room, let state):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendBytes(state)
        case .presence(let requestID, let room, let count, let members, let next):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendVarint(count)
            b.appendVarint(members.count)
            for member in members { b.appendPresenceMember(member) }
            b.appendVarint(next)
        case .window(let requestID, let room, let window):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendWindow(window)
        case .windowState(let requestID, let room, let epoch, let version, let chain, let window, let counts, let snapshot):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendVarint(epoch)
            b.appendVarint(version)
            b.appendChain(chain)
            b.appendWindow(window)
            b.appendVarint(counts.count)
            for count in counts { b.appendVarint(count) }
            b.appendSnapshot(snapshot)
        case .windowDiff(let requestID, let room, let epoch, let version, let window, let counts, let ops):
            b.appendVarint(requestID)
            b.appendString(room)
            b.appendVarint(epoch)
            b.appendVarint(version)
            if let window {
                b.append(0x01)
                b.appendWindow(window)
            } else {
                b.append(0x00)
            }
            b.appendVarint(counts.count)
            for count in counts {
                b.appendBytes(count.section.bytes)
                b.appendVarint(count.items)
            }
            b.appendOperations(ops)
        case .presenceDiff(let room, let count, let changes):
            b.appendString(room)
            b.appendVarint(count)
            b.appendVarint(changes.count)
            for change in changes { b.appendPresenceChange(change) }
        }
    }

    // The length is only known after the body is written, so reserve 4 bytes and patch them.
    private func beginFrame(_ buffer: inout [UInt8]) -> Int {
        let start = buffer.count
        buffer.append(0)
        buffer.append(0)
        buffer.append(0)
        buffer.append(0)
        return start
    }

    private func endFrame(_ buffer: inout [UInt8], start: Int) -> Int {
        let length = buffer.count - start - 4
        precondition(length <= Int(UInt32.max), "frame body of \(length) bytes cannot be framed")
        buffer[start] = UInt8(truncatingIfNeeded: length >> 24)
        buffer[start + 1] = UInt8(truncatingIfNeeded: length >> 16)
        buffer[start + 2] = UInt8(truncatingIfNeeded: length >> 8)
        buffer[start + 3] = UInt8(truncatingIfNeeded: length)
        return length + 4
    }
}

extension [UInt8] {
    /// PRESENCE's `member` (§11.27).
    mutating func appendPresenceMember(_ member: PresenceMember) {
        appendVarint(member.memberID)
        appendString(member.principal)
        appendVarint(member.joinedAt)
        appendBytes(member.state)
    }

    /// PRESENCE_DIFF's `change` (§11.28).
    mutating func appendPresenceChange(_ change: PresenceChange) {
        append(change.kind)
        switch change {
        case .joined(let member), .shown(let member):
            appendPresenceMember(member)
        case .left(let id, let reason):
            appendVarint(id)
            append(reason)
        case .state(let id, let state):
            appendVarint(id)
            appendBytes(state)
        case .hidden(let id):
            appendVarint(id)
        }
    }
}
