import SnapSyncModel
import SnapSyncWire

// SNAPSHOT replies share their body. The snapshot is the last field of a SNAPSHOT frame
// (PROTOCOL.md §11.11), so a reply is a small private header (length, type, request id, room,
// epoch, version, reason, digest) followed by the room's canonical encoding at that version,
// encoded once and queued by reference to every session that JOINs while it is in use: a
// storm of JOINs of a large room costs one encoding and one copy of it, not one per joiner.

/// The latest canonical encoding of each room, held weakly: it lives as long as some output
/// queue holds it, and is encoded again for a JOIN after that or after the room changed.
struct SnapshotEncodings {
    private final class Entry {
        let version: UInt64
        weak var chunk: OutputChunk?

        init(version: UInt64, chunk: OutputChunk) {
            self.version = version
            self.chunk = chunk
        }
    }

    /// By room; removed when the room leaves memory, ended or asleep (`forget`), before another
    /// room can have its address.
    private var entries: [ObjectIdentifier: Entry] = [:]

    /// Drops `room`'s entry: it ended (LocalRoomEngine+Lifecycle.swift) or was evicted (LocalRoomEngine+Sleep.swift).
    mutating func forget(_ room: Room) {
        entries[ObjectIdentifier(room)] = nil
    }

    /// `room`'s canonical encoding at its current version, shared (frozen).
    /// - Parameter scratch: a reusable buffer to encode into (emptied first).
    /// - Complexity: O(1) when a queue still holds this version's encoding, else O(size of the room).
    mutating func body(of room: Room, scratch: inout [UInt8]) -> OutputChunk {
        let key = ObjectIdentifier(room)
        if let entry = entries[key], entry.version == room.version, let chunk = entry.chunk { return chunk }
        scratch.removeAll(keepingCapacity: true)
        FrameEncoder.encodeSnapshot(room.snapshot, into: &scratch)
        let chunk = scratch.withUnsafeBytes { OutputChunk(copying: $0) }
        entries[key] = Entry(version: room.version, chunk: chunk)
        return chunk
    }
}

extension Hub {
    /// Queues SNAPSHOT(`room` at its current version) for `session`: a private header and the
    /// shared body. Over the session's output cap the session is cut off instead, as `send`.
    func sendSnapshot(requestID: UInt64, room: Room, reason: SnapshotReason, to session: Session) {
        guard !session.isEnded, session.state != .closing else { return }
        flushBroadcasts(reaching: session)
        let body = snapshotEncodings.body(of: room, scratch: &encodeBuffer)
        encodeBuffer.removeAll(keepingCapacity: true)
        // The frame of an empty snapshot, whose encoding is one byte (0 sections): without that
        // byte it is the header, and its length prefix is made to cover the shared body.
        let emptyFrame = FrameEncoder().encode(
            .snapshot(
                requestID: requestID, room: room.name, epoch: room.epoch, version: room.version,
                reason: reason, digest: room.digest, snapshot: RoomSnapshot(),
                chain: ProtocolVersion.hasChain(version: session.protocolVersion) ? room.chain ?? .unknown : nil), into: &encodeBuffer)
        encodeBuffer.removeLast()
        let size = emptyFrame - 1 + body.count
        let length = UInt32(size - 4)
        for index in 0..<4 { encodeBuffer[index] = UInt8(truncatingIfNeeded: length >> (24 - 8 * index)) }
        if session.output.wouldExceedCap(adding: size) {
            cutOff(session)
            return
        }
        encodeBuffer.withUnsafeBytes { session.output.appendFrameHeader($0) }
        session.output.enqueue(body)
        stats.framesOut += 1
        traffic.queued(type: MessageType.snapshot.rawValue, bytes: size)
        markDirty(session)
        if outputBytes > configuration.maxOutputTotalBytes { enforceOutputBudget() }
    }
}
