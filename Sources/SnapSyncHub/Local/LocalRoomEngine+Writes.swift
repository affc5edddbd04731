import SnapSyncModel
import SnapSyncWire
import SnapSyncStore

// The write path (PROTOCOL.md §7): store prepare, room apply, store append, then the DIFF to
// every member before the writer's ACK.

extension LocalRoomEngine {
    /// A MUTATE, REPLACE or REPLACE_SECTION the hub admitted: find or create the room, let the
    /// store refuse, let the room decide, then fan the DIFF out to every member (the writer too,
    /// if it has joined) before the writer's ACK (PROTOCOL.md §7).
    func write(_ write: AdmittedWrite, from session: Session) {
        let (requestID, writeID, received) = (write.requestID, write.writeID, write.received)
        guard let room = room(named: write.roomName, requestID: requestID, countedAsWrite: true, for: session) else { return }
        if let rejection = admitCreation(of: room, for: session) {
            hub.countRejectedWrite(rejection.code)
            hub.send(rejection.message(requestID: requestID), to: session)
            return
        }
        switch prepareStore(room: room.name, while: "preparing a write to") {
        case .ready:
            break
        case .diskFull(let error):
            // This write is refused; the room goes on serving reads.
            hub.countRejectedWrite(.storageFailure)
            hub.send(Rejection(.storageFailure, "the write could not be made durable: \(error)").message(requestID: requestID), to: session)
            return
        case .failed:
            return
        }
        let itemsBefore = room.snapshot.numberOfItems
        defer { hub.roomBudget.update(room) }
        switch room.apply(write.request, writeID: writeID, scratch: &hub.diffBuffer) {
        case .applied(let version, let diff):
            hub.stats.writesApplied += 1
            hub.touch(room)
            hub.totalItems += room.snapshot.numberOfItems - itemsBefore
            // The fingerprint the room just remembered with the id: the log keeps it, so that a
            // write reusing the id after a restart is still told apart from a retry.
            let fingerprint = writeID.isEmpty ? nil : room.writeIDs.entry(of: writeID)?.fingerprint
            store.append(room: room.name, epoch: room.epoch, version: version, writeID: writeID, fingerprint: fingerprint, diffFrame: diff.bytes)
            hub.fanOut(diff, version: version, in: room)
            hub.send(.ack(requestID: requestID, epoch: room.epoch, version: version), to: session)
            if received != 0 { hub.writeAckTimer?.acknowledged(received) }
        case .unchanged(let version), .duplicate(let version):
            hub.send(.ack(requestID: requestID, epoch: room.epoch, version: version), to: session)
            if received != 0 { hub.writeAckTimer?.acknowledged(received) }
        case .rejected(let rejection):
            hub.countRejectedWrite(rejection.code)
            hub.send(rejection.message(requestID: requestID), to: session)
        }
    }
}
