import SnapSyncAuth
import SnapSyncModel
import SnapSyncWire
import SnapSyncStore

// The write path (PROTOCOL.md §7): store prepare, room apply, store append, then the DIFF to
// every member before the writer's ACK.

extension Hub {
    /// A MUTATE, REPLACE or REPLACE_SECTION: find or create the room, let the store refuse, let the room decide,
    /// then fan the DIFF out to every member (the writer too, if it has joined) before the
    /// writer's ACK (PROTOCOL.md §7).
    func write(
        requestID: UInt64, roomName: String, writeID: [UInt8], from session: Session,
        _ apply: (Room, inout [UInt8]) -> Room.WriteOutcome
    ) {
        // The name, then the right, before the room is created or the store asked.
        let received = writeAckTimer?.start() ?? 0
        if let rejection = Room.validate(name: roomName) {
            countRejectedWrite(rejection.code)
            send(rejection.message(requestID: requestID), to: session)
            return
        }
        guard authorize(.write, room: roomName, requestID: requestID, for: session) else { return }
        let room: Room
        switch self.room(named: roomName) {
        case .success(let found): room = found
        case .failure(let rejection):
            countRejectedWrite(rejection.code)
            send(rejection.message(requestID: requestID), to: session)
            return
        }
        do {
            try store.prepare(room: room.name)
        } catch {
            // A full disk refuses this write and the room goes on serving reads; any other
            // failure (a segment switch's fsync, a MANIFEST that cannot be rewritten) means the
            // log can no longer be trusted, so the daemon stops as it does when a commit fails.
            guard case .noSpace = error else {
                fail(ServerError("the store failed while preparing a write to room \(LogEscaping.line(room.name)): \(error); stopping"))
                return
            }
            countRejectedWrite(.storageFailure)
            send(Rejection(.storageFailure, "the write could not be made durable: \(error)").message(requestID: requestID), to: session)
            return
        }
        let itemsBefore = room.snapshot.numberOfItems
        defer { roomBudget.update(room) }
        switch apply(room, &diffBuffer) {
        case .applied(let version, let diff):
            stats.writesApplied += 1
            touch(room)
            totalItems += room.snapshot.numberOfItems - itemsBefore
            // The fingerprint the room just remembered with the id: the log keeps it, so that a
            // write reusing the id after a restart is still told apart from a retry.
            let fingerprint = writeID.isEmpty ? nil : room.writeIDs.entry(of: writeID)?.fingerprint
            store.append(room: room.name, epoch: room.epoch, version: version, writeID: writeID, fingerprint: fingerprint, diffFrame: diff.bytes)
            fanOut(diff, in: room)
            send(.ack(requestID: requestID, epoch: room.epoch, version: version), to: session)
            if received != 0 { writeAckTimer?.acknowledged(received) }
        case .unchanged(let version), .duplicate(let version):
            send(.ack(requestID: requestID, epoch: room.epoch, version: version), to: session)
            if received != 0 { writeAckTimer?.acknowledged(received) }
        case .rejected(let rejection):
            countRejectedWrite(rejection.code)
            send(rejection.message(requestID: requestID), to: session)
        }
    }

    /// Sends `room`'s DIFF just applied to every member (single node: `write`; cluster mode:
    /// each record the log delivers, Hub+ClusterRecords.swift).
    /// - Complexity: O(members).
    @inline(__always)
    func fanOut(_ diff: OutputChunk, in room: Room) {
        // Members are copied first: a member cut off as a slow consumer leaves the room,
        // which would otherwise reorder the array under the loop.
        let members = room.members.sessions
        // A DIFF that makes or keeps the room an outline, or carries a version 2 op, is no
        // frame for a version 1 member: it is sent LEFT in its place (PROTOCOL.md §8.2).
        let needsOutlines = room.snapshot.isOutline || room.lastDiffHasOutlineOps
        for member in members {
            if needsOutlines && !ProtocolVersion.hasOutlines(member.protocolVersion) {
                leaveForOutline(member, room: room)
            } else {
                send(shared: diff, to: member)
            }
        }
    }
}
