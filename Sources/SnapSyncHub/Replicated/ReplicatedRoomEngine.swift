import Logging
import SnapSyncModel
package import SnapSyncStore
import SnapSyncWire

/// Cluster mode's rooms (docs/cluster.md): every room is a replica of its subject in the
/// cluster's log (`RoomLog`), resident while this node follows it. The first JOIN, write or
/// DROP of a room follows it (ReplicatedRoomEngine+Follow.swift); writes are validated against
/// the replica and proposed to the log (ReplicatedRoomEngine+Writes.swift), and the room changes
/// only by the records the log delivers, on every node alike
/// (ReplicatedRoomEngine+Records.swift); a read that must not miss a stored write waits for a
/// read barrier (ReplicatedRoomEngine+Barriers.swift). One room's state between the hub and the
/// log is its `ReplicatedRoom`.
///
/// A request this engine cannot answer at once (a write, a JOIN of a room still loading) holds
/// the session's next frames back until the log has answered (`Hub.awaitLog`).
///
/// Threads: the loop's, as the hub's; the log calls back on it.
package final class ReplicatedRoomEngine: RoomEngine {
    /// The cluster's rooms live in its log, which bounds them (docs/cluster.md).
    var storedRoomCount: Int { 0 }
    /// The hub that owns this engine: see `LocalRoomEngine.hub`.
    unowned(unsafe) let hub: Hub
    /// The replicated log every room's writes go through.
    package let log: any RoomLog
    /// The rooms this node follows in `log`, loaded or loading; a room is in the hub's `rooms`
    /// too once it has loaded.
    var replicas: [RoomName: ReplicatedRoom] = [:]
    /// How many rooms this node follows are in `phase` (the metrics' `snapsync_cluster_rooms`).
    /// `replicas` itself stays internal: a property other modules can see is checked for
    /// exclusive access at run time on every access, and it is read on every record.
    package func followedRoomCount(in phase: ReplicatedRoom.Phase) -> Int {
        replicas.values.count { $0.phase == phase }
    }
    /// The token of the next proposal (`ReplicatedRoom.InFlight.token`).
    var nextProposalToken: UInt64 = 1

    init(hub: Hub, log: any RoomLog) {
        self.hub = hub
        self.log = log
    }

    /// The log keeps no time-to-live (PROTOCOL.md §11.20): SET_TTL is refused before any room
    /// is followed.
    func setTTL(requestID: UInt64, roomName: String, seconds: UInt64, from session: Session) {
        hub.send(
            Rejection(
                .storageFailure, "SET_TTL of room \(LogEscaping.line(roomName)): this server keeps rooms in a cluster's log, which holds no time-to-live"
            ).message(requestID: requestID), to: session)
    }

    /// Nothing: a write is durable once the log has stored it, before its ACK is queued.
    func commit() throws(StoreError) {}

    func tick(now: ContinuousClock.Instant) {
        maintainReplicas(now: now)
    }
}
